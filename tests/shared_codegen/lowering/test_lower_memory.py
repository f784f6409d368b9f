"""Lowering of loads, stores and atomics: vector width, predicates, replication.

Each test builds a small explicit-layout kernel, lowers it, compiles PTX -> cubin for sm_90a and
sm_100a and reads the PTX.
"""

from lowering_kernels import KernelBuilder, blocked_1d, compile_all, count, ptr

from shared_codegen.ir.types import bfloat16, float16, float32, int32, int64
from shared_codegen.ops.arith.definition import BinaryOp
from shared_codegen.ops.memory.definition import AtomicCASOp, AtomicRMWOp, LoadOp, StoreOp

ALIGNED = {0: 16, 1: 16, 2: 16}


def copy_kernel(elem, per_thread, block, divisibility, masked=False, n_divisible=False):
    """out[i] = x[i] + x[i] for a 1-D block of `block` elements."""
    layout = blocked_1d(per_thread)
    div = dict(divisibility)
    if n_divisible:
        div[2] = 16
    k = KernelBuilder("copy", [ptr(elem), ptr(elem), int32], ["x", "out", "n"], div)
    offs = k.offsets(block, layout)
    mask = k.mask_lt(offs, k.args[2], block, layout) if masked else None
    x = LoadOp.build(k.b, k.ptrs(k.args[0], offs, block, layout), mask)
    y = BinaryOp.build(k.b, "arith.addf", x, x)
    StoreOp.build(k.b, k.ptrs(k.args[1], offs, block, layout), y, mask)
    return k.finish()


def test_fp32_four_per_thread_aligned_gives_16_byte_accesses():
    kernel, ptx = compile_all(copy_kernel(float32, 4, 512, {0: 16, 1: 16}))
    for text in ptx.values():
        assert count(r"ld\.global\.v4\.b32", text) == 1
        assert count(r"st\.global\.v4\.b32", text) == 1
        assert "ld.global.b32" not in text
    assert kernel.param_kinds == ("ptr", "ptr", "i32")
    assert ".maxntid 128" in ptx["sm_90a"]


def test_fp16_eight_per_thread_moves_16_bytes_at_once():
    _, ptx = compile_all(copy_kernel(float16, 8, 1024, {0: 16, 1: 16}))
    assert count(r"ld\.global\.v4\.b32", ptx["sm_90a"]) == 1
    assert count(r"st\.global\.v4\.b32", ptx["sm_90a"]) == 1


def test_bf16_two_per_thread_packs_one_word():
    _, ptx = compile_all(copy_kernel(bfloat16, 2, 256, {0: 16, 1: 16}))
    assert count(r"ld\.global\.b32", ptx["sm_90a"]) == 1


def test_unaligned_pointer_gives_scalar_accesses():
    _, ptx = compile_all(copy_kernel(float32, 4, 512, {}))
    text = ptx["sm_90a"]
    assert "v4" not in text and "v2" not in text
    assert count(r"ld\.global\.b32", text) == 4
    assert count(r"st\.global\.b32", text) == 4


def test_mask_becomes_a_predicate_and_splits_vectors_unless_n_is_divisible():
    _, ptx = compile_all(copy_kernel(float32, 4, 512, {0: 16, 1: 16}, masked=True))
    text = ptx["sm_90a"]
    assert count(r"@%p\d+ ld\.global\.b32", text) == 4   # n unknown: mask varies per element
    assert count(r"@%p\d+ st\.global\.b32", text) == 4
    _, ptx = compile_all(copy_kernel(float32, 4, 512, {0: 16, 1: 16}, masked=True,
                                     n_divisible=True))
    assert count(r"@%p\d+ ld\.global\.v4\.b32", ptx["sm_90a"]) == 1
    assert count(r"@%p\d+ st\.global\.v4\.b32", ptx["sm_90a"]) == 1


def test_masked_load_fills_other():
    layout = blocked_1d(1)
    k = KernelBuilder("fill", [ptr(float32), ptr(float32), int32], ["x", "out", "n"])
    offs = k.offsets(128, layout)
    mask = k.mask_lt(offs, k.args[2], 128, layout)
    other = k.splat(k.const(-2.5, float32), 128, layout)
    x = LoadOp.build(k.b, k.ptrs(k.args[0], offs, 128, layout), mask, other)
    StoreOp.build(k.b, k.ptrs(k.args[1], offs, 128, layout), x)
    _, ptx = compile_all(k.finish())
    text = ptx["sm_90a"]
    # -2.5 (bits 0xC0200000 = -1071644672) is moved into the destination, then the load
    # overwrites it only where the predicate holds.
    assert "-1071644672" in text
    assert count(r"mov\.b32 %r\d+, %r\d+;\s*@%p\d+ ld\.global\.b32", text) == 1


def test_replicated_layout_stores_once_per_element():
    # 64 elements over 128 threads: lanes 16..31 of each warp and warps 1..3 hold copies.
    layout = blocked_1d(1)
    k = KernelBuilder("rep", [ptr(float32)], ["out"], {0: 16})
    offs = k.offsets(64, layout, times_pid=False)
    vals = k.splat(k.const(1.0, float32), 64, layout)
    StoreOp.build(k.b, k.ptrs(k.args[0], offs, 64, layout), vals)
    kernel, ptx = compile_all(k.finish())
    text = ptx["sm_90a"]
    assert count(r"@%p\d+ st\.global\.b32", text) == 1
    assert "and.b32" in text  # lane & 16 / warp & 3 test


def test_atomics_are_predicated_and_scoped():
    layout = blocked_1d(1)
    k = KernelBuilder("atom", [ptr(float32), ptr(int32), ptr(int64), int32],
                      ["f", "i", "l", "n"])
    offs = k.offsets(128, layout)
    mask = k.mask_lt(offs, k.args[3], 128, layout)
    fv = k.splat(k.const(1.0, float32), 128, layout)
    AtomicRMWOp.build(k.b, "fadd", k.ptrs(k.args[0], offs, 128, layout), fv, mask)
    iv = k.splat(k.const(3), 128, layout)
    old = AtomicRMWOp.build(k.b, "max", k.ptrs(k.args[1], offs, 128, layout), iv, mask,
                            sem="relaxed", scope="cta")
    AtomicRMWOp.build(k.b, "max", k.ptrs(k.args[0], offs, 128, layout), fv, mask)
    lp = k.ptrs(k.args[2], offs, 128, layout)
    lv = k.splat(k.const(7, int64), 128, layout)
    AtomicCASOp.build(k.b, lp, lv, lv)
    StoreOp.build(k.b, k.ptrs(k.args[1], offs, 128, layout), old)
    # a scalar atomic: one thread performs it, the old value reaches all through shared memory
    sold = AtomicRMWOp.build(k.b, "add", k.args[1], k.const(1))
    StoreOp.build(k.b, k.args[1], sold)
    kernel, ptx = compile_all(k.finish())
    text = ptx["sm_90a"]
    assert "@%p" in text
    assert "atom.acq_rel.gpu.global.add.f32" in text
    assert "atom.relaxed.cta.global.max.s32" in text
    assert "atom.acq_rel.gpu.global.cas.b64" in text
    assert "atom.acq_rel.gpu.global.min.u32" in text  # float max through integer atomics
    assert kernel.shared_bytes >= 4 and "st.shared" in text and "bar.sync" in text


def test_2d_tile_with_row_stride_vectorizes_along_the_fast_dim():
    from shared_codegen.layouts.distributed import BlockedLayout, SliceLayout
    from shared_codegen.ops.arith.definition import AddPtrOp
    from shared_codegen.ops.tensor.definition import BroadcastOp, ExpandDimsOp, MakeRangeOp, SplatOp

    m, n = 32, 64
    layout = BlockedLayout((1, 4), (4, 8), (4, 1), (1, 0))
    k = KernelBuilder("tile", [ptr(float32), ptr(float32), int32], ["x", "out", "stride"],
                      {0: 16, 1: 16, 2: 16})
    rm = ExpandDimsOp.build(k.b, MakeRangeOp.build(k.b, 0, m, SliceLayout(1, layout)), 1, layout)
    rn = ExpandDimsOp.build(k.b, MakeRangeOp.build(k.b, 0, n, SliceLayout(0, layout)), 0, layout)
    rows = BinaryOp.build(k.b, "arith.muli", rm, SplatOp.build(k.b, k.args[2], (m, 1), layout))
    offs = BinaryOp.build(k.b, "arith.addi", BroadcastOp.build(k.b, rows, (m, n)),
                          BroadcastOp.build(k.b, rn, (m, n)))
    x = LoadOp.build(k.b, AddPtrOp.build(k.b, SplatOp.build(k.b, k.args[0], (m, n), layout),
                                          offs))
    StoreOp.build(k.b, AddPtrOp.build(k.b, SplatOp.build(k.b, k.args[1], (m, n), layout), offs),
                  x)
    _, ptx = compile_all(k.finish())
    # 32x64 over a 16x32 CTA tile: 2x2 repetitions of 4 contiguous fp32 per thread
    assert count(r"ld\.global\.v4\.b32", ptx["sm_90a"]) == 4
    assert count(r"st\.global\.v4\.b32", ptx["sm_90a"]) == 4
