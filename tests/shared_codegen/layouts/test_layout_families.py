"""Layout family constructors: validation messages, repr round trips, known shared layouts."""

import pytest

from gluon import layouts
from gluon.layouts import (BlockedLayout, DistributedLinearLayout, DotOperandLayout,
                           NVMMADistributedLayout, NVMMASharedLayout, SharedLinearLayout,
                           SliceLayout, SwizzledSharedLayout, TensorMemoryLayout,
                           default_blocked_layout, layout_equivalent, to_linear_layout)

BLOCKED = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
MMA_V2 = NVMMADistributedLayout([2, 0], [2, 2], [16, 8])
MMA_V3 = NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])

EXAMPLES = [
    BLOCKED,
    BlockedLayout([1, 1, 2], [2, 4, 4], [1, 2, 2], [2, 1, 0], cga_layout=[[1, 0, 0]]),
    SliceLayout(0, BLOCKED),
    SliceLayout(1, MMA_V2),
    DistributedLinearLayout([[0, 1]], [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0]], [], [],
                            [32, 2]),
    MMA_V2,
    MMA_V3,
    DotOperandLayout(0, MMA_V2, 2),
    DotOperandLayout(1, MMA_V2, 4),
    DotOperandLayout(0, MMA_V3, 2),
    NVMMASharedLayout(128, 16),
    NVMMASharedLayout(64, 8, rank=3, transposed=True),
    SwizzledSharedLayout(8, 2, 4, [1, 0]),
    SharedLinearLayout([[0, 1], [0, 2], [1, 0]]),
    TensorMemoryLayout((128, 64), col_stride=1),
    TensorMemoryLayout((64, 128), col_stride=2, cta_split_num=(2, 1), two_ctas=True),
]


@pytest.mark.parametrize("layout", EXAMPLES, ids=repr)
def test_repr_is_the_constructor_call(layout):
    namespace = {name: getattr(layouts, name) for name in layouts.__all__}
    again = eval(repr(layout), namespace)
    assert again == layout and hash(again) == hash(layout)


def test_repr_reads_like_gluon():
    assert repr(BLOCKED) == ("BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[8, 4], "
                             "warps_per_cta=[4, 1], order=[1, 0])")


@pytest.mark.parametrize("layout,prefix", [
    (BLOCKED, "blocked"), (SliceLayout(0, BLOCKED), "slice"), (MMA_V2, "mma"),
    (DotOperandLayout(0, MMA_V2, 2), "dot_op"), (NVMMASharedLayout(128, 16), "nvmma_shared"),
    (SwizzledSharedLayout(1, 1, 1, [1, 0]), "shared"), (TensorMemoryLayout((128, 32), 1),
                                                        "tmem"),
    (DistributedLinearLayout([], [], [], [], [1]), "linear")])
def test_alias_prefixes(layout, prefix):
    assert layout.alias_prefix == prefix


@pytest.mark.parametrize("make,message", [
    (lambda: BlockedLayout([1, 3], [8, 4], [4, 1], [1, 0]),
     "BlockedLayout: size_per_thread entries must be powers of two, got [1, 3]"),
    (lambda: BlockedLayout([1, 4], [8, 2], [4, 1], [1, 0]),
     "BlockedLayout: threads_per_warp must multiply to 32 (the warp size), got [8, 2] "
     "(product 16)"),
    (lambda: BlockedLayout([1, 4], [8, 4], [4], [1, 0]),
     "BlockedLayout: warps_per_cta has 1 entries but size_per_thread has 2; all must have "
     "one entry per tensor dim"),
    (lambda: BlockedLayout([1, 4], [8, 4], [4, 1], [1, 1]),
     "BlockedLayout: order must be a permutation of 0..1, got [1, 1]"),
    (lambda: SliceLayout(2, BLOCKED),
     "SliceLayout: dim must be in [0, 2) for a rank 2 parent, got 2"),
    (lambda: NVMMADistributedLayout([1, 0], [4, 1], [16, 8]),
     "NVMMADistributedLayout: version must be [2, 0] (mma.sync) or [3, 0] (wgmma), got "
     "[1, 0]"),
    (lambda: NVMMADistributedLayout([3, 0], [2, 1], [16, 64, 16]),
     "NVMMADistributedLayout: version 3 needs whole warpgroups (warps_per_cta multiplying "
     "to a multiple of 4), got [2, 1]"),
    (lambda: DotOperandLayout(1, MMA_V3, 2),
     "DotOperandLayout: operand_index=1 with a version 3 (wgmma) parent is not a register "
     "layout: wgmma reads B from shared memory"),
    (lambda: DotOperandLayout(0, MMA_V2, 3),
     "DotOperandLayout: k_width must be a power of two, got 3"),
    (lambda: NVMMASharedLayout(96, 16),
     "NVMMASharedLayout: swizzle_byte_width must be 0, 32, 64 or 128, got 96"),
    (lambda: NVMMASharedLayout(128, 12),
     "NVMMASharedLayout: element_bitwidth must be 8, 16, 32 or 64, got 12"),
    (lambda: SwizzledSharedLayout(3, 1, 1, [1, 0]),
     "SwizzledSharedLayout: vec must be a power of two, got 3"),
    (lambda: TensorMemoryLayout((32, 64), 1),
     "TensorMemoryLayout: block M must be 64 or 128 (TMEM lanes per CTA), got 32"),
    (lambda: DistributedLinearLayout([[0, 4]], [], [], [], [2, 4]),
     "DistributedLinearLayout: reg_bases basis [0, 4] has dim1=4, outside shape [2, 4]"),
])
def test_invalid_parameters_raise_value_error_naming_them(make, message):
    with pytest.raises(ValueError) as error:
        make()
    assert str(error.value) == message


def test_shape_errors():
    with pytest.raises(ValueError, match=r"shape entries must be powers of two, got \[3, 4\]"):
        to_linear_layout(BLOCKED, [3, 4])
    with pytest.raises(ValueError, match="has rank 3 but the layout has rank 2"):
        to_linear_layout(BLOCKED, [4, 4, 4])
    with pytest.raises(ValueError, match="less than one 128-byte swizzle row"):
        to_linear_layout(NVMMASharedLayout(128, 16), [64, 32])


def test_nvmma_shared_128_byte_swizzle_is_the_documented_pattern():
    # 16-byte chunks of row r are XOR-ed with r % 8: offset bits 6..8 move the row and
    # flip the chunk index (PTX ISA, 128B swizzle mode).
    linear = to_linear_layout(NVMMASharedLayout(128, 16), [64, 64])
    assert linear.in_dims == ["offset", "block"]
    assert linear.bases["offset"] == [(0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (0, 32),
                                      (1, 8), (2, 16), (4, 32), (8, 0), (16, 0), (32, 0)]
    assert linear.is_invertible()


def test_nvmma_shared_without_swizzle_is_row_major():
    linear = to_linear_layout(NVMMASharedLayout(0, 16), [8, 16])
    assert linear.bases["offset"] == [(0, 1), (0, 2), (0, 4), (0, 8), (1, 0), (2, 0), (4, 0)]


def test_swizzled_shared_phase_advances_every_per_phase_rows():
    linear = to_linear_layout(SwizzledSharedLayout(8, 2, 4, [1, 0]), [32, 64])
    assert linear.bases["offset"][6:] == [(1, 0), (2, 8), (4, 16), (8, 0), (16, 0)]
    assert linear.is_invertible()


@pytest.mark.parametrize("layout", [NVMMASharedLayout(s, b, transposed=t)
                                    for s in (0, 32, 64, 128) for b in (8, 16, 32)
                                    for t in (False, True)], ids=repr)
def test_every_nvmma_shared_layout_is_a_bijection(layout):
    assert to_linear_layout(layout, [128, 128]).is_invertible()


def test_tensor_memory_layout_maps_lanes_to_rows():
    linear = to_linear_layout(TensorMemoryLayout((128, 64), 1), [128, 64])
    assert linear.in_dims == ["col", "row"]
    assert linear.apply({"row": 5, "col": 3}) == {"dim1": 3, "dim0": 5}
    unpacked = to_linear_layout(TensorMemoryLayout((128, 64), 2), [128, 64])
    assert unpacked.bases["col"][0] == (0, 0)  # the second 16-bit half of a column is unused


def test_default_blocked_layout_matches_triton_rule():
    assert default_blocked_layout([64, 64], 4) == BlockedLayout([1, 1], [1, 32], [2, 2],
                                                                [1, 0])
    assert default_blocked_layout([16], 8) == BlockedLayout([1], [32], [8], [0])
    assert default_blocked_layout([4, 8], 4, order=[0, 1]) == BlockedLayout(
        [1, 1], [4, 8], [1, 4], [0, 1])


def test_counts_derived_from_the_layout():
    assert (BLOCKED.num_warps, BLOCKED.warp_size, BLOCKED.rank) == (4, 32, 2)
    assert (MMA_V3.num_warps, DotOperandLayout(0, MMA_V2, 2).num_warps) == (4, 4)
    assert SliceLayout(1, BLOCKED).num_warps == 4 and SliceLayout(1, BLOCKED).rank == 1


def test_layout_equivalent_compares_linear_forms():
    linear = DistributedLinearLayout.from_linear_layout(to_linear_layout(BLOCKED, [32, 16]))
    assert layout_equivalent(BLOCKED, linear, [32, 16])
    assert not layout_equivalent(BLOCKED, BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1]),
                                 [32, 16])


def test_int_lists_take_constexpr_wrapped_ints_as_triton_does():
    # Triton 3.6's attention example builds TensorMemoryLayout blocks from lists that hold
    # constexprs; anything with __index__ is an int there, bools and floats are not.
    import numpy as np
    from shared_codegen.frontend.values import constexpr
    layout = TensorMemoryLayout((128, constexpr(64)), col_stride=1)
    assert layout == TensorMemoryLayout((128, 64), col_stride=1)
    assert BlockedLayout([1, np.int64(4)], [8, 4], [4, 1], [1, 0]) == \
        BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    for bad in (True, 2.0, constexpr(True)):
        with pytest.raises(ValueError, match=r"TensorMemoryLayout: block must be a list of "
                                             r"ints, got \[128, "):
            TensorMemoryLayout((128, bad), col_stride=1)
