"""``bank_conflicts`` (Gluon 3.6's meaning: extra wavefronts of storing a register tensor into
a shared layout) against hand-computed cases, and the wavefront counter it is checked with."""

import numpy as np
import pytest

from gluon.layouts import (BlockedLayout, LinearLayout, NVMMADistributedLayout,
                           NVMMASharedLayout, SwizzledSharedLayout)
from shared_codegen.layouts.bank_conflicts import (bank_conflicts, count_wavefronts, dtype_bits,
                                          span_intersection)

COLUMN_WISE = BlockedLayout([1, 1], [32, 1], [1, 1], [1, 0])   # lane i holds row i
ROW_WISE = BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0])      # lane i holds column i
PLAIN = SwizzledSharedLayout(1, 1, 1, [1, 0])                  # row-major, no swizzle
XOR8 = SwizzledSharedLayout(4, 1, 8, [1, 0])                   # col ^= 4 * (row % 8)


def test_wavefront_counter_basics():
    lanes = np.arange(32)
    assert count_wavefronts((lanes * 4)[None], 4).tolist() == [1]       # consecutive words
    assert count_wavefronts((lanes * 128)[None], 4).tolist() == [32]    # one bank, 32 rows
    assert count_wavefronts(np.zeros((1, 32), int), 4).tolist() == [1]  # broadcast
    assert count_wavefronts((lanes * 16)[None], 16).tolist() == [4]     # 4 phases of 8
    assert count_wavefronts((lanes * 2)[None], 2).tolist() == [1]       # 2 halves a word


def test_columns_of_a_row_major_fp32_tile_conflict_8_ways():
    # Registers run along the row, so st.shared.v4 (4 x fp32) is used and 8 lanes share a
    # phase. Those 8 lanes write rows 0..7 at the same column: the same 4 banks, 8 distinct
    # rows -> 8 wavefronts per phase, 7 extra.
    assert bank_conflicts(COLUMN_WISE, PLAIN, (32, 32), "fp32") == 7


def test_fp16_vectors_are_wider_so_fewer_lanes_meet():
    # 8 x fp16 per st.shared.v4; rows are 64 bytes so rows r and r^1 share a 128-byte line and
    # fall in different banks: only 4 of the 8 rows of a phase collide -> 3 extra.
    assert bank_conflicts(COLUMN_WISE, PLAIN, (32, 32), "fp16") == 3


def test_lanes_along_the_row_are_conflict_free():
    assert bank_conflicts(ROW_WISE, PLAIN, (32, 32), "fp32") == 0
    assert bank_conflicts(ROW_WISE, XOR8, (32, 32), "fp16") == 0


def test_xor_swizzle_removes_the_column_conflict():
    assert bank_conflicts(COLUMN_WISE, XOR8, (32, 32), "fp32") == 0


def test_hand_built_shared_linear_layout_matches_the_family():
    swizzled = LinearLayout({"offset": [(0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (1, 4),
                                        (2, 8), (4, 16), (8, 0), (16, 0)], "block": []},
                            [("dim0", 32), ("dim1", 32)])
    assert bank_conflicts(COLUMN_WISE, swizzled, (32, 32), "fp32") == 0


@pytest.mark.parametrize("swizzle, expected", [(0, 7), (32, 0), (64, 0), (128, 0)])
def test_wgmma_accumulator_into_nvmma_shared(swizzle, expected):
    # Lanes 4i..4i+3 hold row i (2 x fp16 each); unswizzled 128-byte rows put the 8 rows of
    # a store on the same 4 banks: 7 extra wavefronts. Any NVMMA swizzle spreads them.
    acc = NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])
    assert bank_conflicts(acc, NVMMASharedLayout(swizzle, 16), (64, 64), "fp16") == expected


@pytest.mark.parametrize("register, shared, dtype", [
    (COLUMN_WISE, PLAIN, "fp32"), (COLUMN_WISE, PLAIN, "fp16"), (COLUMN_WISE, XOR8, "fp32"),
    (ROW_WISE, PLAIN, "fp32"), (ROW_WISE, PLAIN, "fp16")])
def test_formula_agrees_with_counted_wavefronts(register, shared, dtype):
    """Store every register vector the way the formula assumes and count for real."""
    from gluon.layouts import to_linear_layout
    bits = dtype_bits(dtype)
    reg = to_linear_layout(register, [32, 32])
    smem = to_linear_layout(shared, [32, 32])
    offset_of = {}
    for off in range(1024):
        c = smem.apply({"offset": off})
        offset_of[c["dim0"], c["dim1"]] = off
    vec = min(128 // bits, 32) if register is COLUMN_WISE else 1
    lane_addr = []
    for first in range(0, 32, vec):
        row = []
        for lane in range(32):
            c = reg.apply({"register": first, "lane": lane})
            row.append(offset_of[c["dim0"], c["dim1"]] * bits // 8)
        lane_addr.append(row)
    access = vec * bits // 8
    waves = count_wavefronts(np.array(lane_addr), access)
    phases = max(1, access // 4)
    extra = int(waves.max()) // phases - 1
    assert extra == bank_conflicts(register, shared, (32, 32), dtype)


def test_span_intersection_handles_swizzled_bases():
    assert span_intersection([1, 2, 4], [2, 8]) == [2]
    # span{3, 4} = {0, 3, 4, 7} and span{7, 1} = {0, 1, 6, 7} meet in {0, 7}
    assert span_intersection([3, 4], [7, 1]) == [7]


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shapes must match|outside"):
        from shared_codegen.layouts.linear_layout import LinearLayout as LL
        small = LL({"offset": [(1,), (2,)], "block": []}, [("dim0", 4)])
        bank_conflicts(COLUMN_WISE.to_linear_layout([32, 32]), small, (32, 32), "fp32")
