"""Conversion planner: plan kinds for known pairs, and simulated data movement that must land
every element where the destination layout says."""

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gluon.layouts import (BlockedLayout, DistributedLinearLayout, DotOperandLayout,
                           LinearLayout, NVMMADistributedLayout, SliceLayout)
from shared_codegen.layouts.planner import (ConversionPlan, conversion_matrix, placement,
                                   plan_conversion, simulate)


def check_simulation(src, dst, shape, dtype="fp16"):
    plan = plan_conversion(src, dst, shape, dtype)
    moved = simulate(plan, src, dst, shape)
    np.testing.assert_array_equal(moved, placement(dst, shape))
    return plan


# -- kinds of known pairs ---------------------------------------------------------------

def test_same_layout_is_a_noop():
    layout = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    plan = check_simulation(layout, layout, (128, 128))
    assert plan.kind == "noop"
    assert plan.cost.shuffles == 0 and plan.cost.smem_bytes == 0


def test_broadcasting_layout_to_itself_is_a_noop():
    # 8x8 is smaller than the 32x16 tile: lanes and warps hold broadcast copies
    layout = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    assert check_simulation(layout, layout, (8, 8)).kind == "noop"


def test_register_reorder_is_a_register_permutation():
    lanes = [[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]]
    warps = [[8, 0], [16, 0]]
    src = DistributedLinearLayout([[0, 1], [0, 2], [32, 0]], lanes, warps, [], [64, 16])
    dst = DistributedLinearLayout([[32, 0], [0, 2], [0, 1]], lanes, warps, [], [64, 16])
    plan = check_simulation(src, dst, (64, 16))
    assert plan.kind == "register_permutation"
    assert plan.permutation == (0, 4, 2, 6, 1, 5, 3, 7)
    assert plan.cost.register_moves == 4


def test_lane_permutation_is_a_warp_shuffle():
    src = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    dst = BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])
    plan = check_simulation(src, dst, (32, 16))
    assert plan.kind == "warp_shuffle"
    assert plan.moving_dims == ("register", "lane")
    # 4 fp16 registers per thread, two per 32-bit shuffle
    assert plan.shuffle.rounds == 2 and plan.cost.shuffles == 2
    first = plan.shuffle.round(0)
    assert len(first.src_lane) == 32


def test_pure_lane_permutation_needs_no_selects():
    lanes_src = [[0, 1], [0, 2], [1, 0], [2, 0], [4, 0]]
    lanes_dst = [[1, 0], [2, 0], [4, 0], [0, 1], [0, 2]]
    src = DistributedLinearLayout([[8, 0]], lanes_src, [], [], [16, 4])
    dst = DistributedLinearLayout([[8, 0]], lanes_dst, [], [], [16, 4])
    plan = check_simulation(src, dst, (16, 4), "fp32")
    assert plan.kind == "warp_shuffle"
    assert plan.cost.shuffles == 2 and not plan.cost.selects


def test_transpose_across_warps_goes_through_shared_memory():
    src = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    dst = BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1])
    plan = check_simulation(src, dst, (128, 128))
    assert plan.kind == "shared_memory"
    assert "warp" in plan.moving_dims
    shared = plan.shared
    assert shared.store_vector == 8 and shared.load_vector == 4
    # the chosen swizzle is conflict-free: 16-byte stores take 4 wavefronts (4 phases of 8
    # lanes), 8-byte loads take 2
    assert shared.store_wavefronts == 4 and shared.load_wavefronts == 2
    assert plan.cost.smem_bytes == 128 * 128 * 2


@pytest.mark.parametrize("dtype, vec", [("fp32", 4), ("fp8", 16)])
def test_shared_memory_vector_width_follows_element_size(dtype, vec):
    src = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    dst = BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1])
    plan = check_simulation(src, dst, (128, 128), dtype)
    assert plan.shared.store_vector == vec
    assert plan.shared.store_instruction == "st.shared.v4.b32"


def test_mma_to_blocked_uses_a_matrix_instruction_when_the_tile_fits():
    mma = NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])
    blocked = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    plan = check_simulation(mma, blocked, (64, 64))
    assert plan.kind == "shared_memory"
    names = plan.shared.store_instruction + " " + plan.shared.load_instruction
    assert "matrix" in names
    # 16 bytes per lane or per matrix row: 4 phases, no conflicts, 4 instructions a side
    assert plan.shared.store_wavefronts == 4 and plan.shared.load_wavefronts == 4
    assert plan.cost.store_instructions == 4 and plan.cost.load_instructions == 4
    plan32 = check_simulation(mma, blocked, (64, 64), "fp32")
    assert "matrix" not in plan32.shared.store_instruction + plan32.shared.load_instruction


def test_small_conversions_run_in_one_round_large_ones_in_rounds():
    # A decode loop's P tile (16 query rows, mma v2 over 4 warps along N) becomes the A
    # operand of the next dot: its registers-on-both-sides bit would be a second round
    # (512 B a round, two barriers more); 1 KB in one round is under the 4 KB limit.
    mma = NVMMADistributedLayout([2, 0], [1, 4], [16, 8])
    dot_a = DotOperandLayout(0, mma, 2)
    small = check_simulation(mma, dot_a, (16, 32))
    assert small.shared.swizzle.reps == ()
    assert (small.cost.smem_bytes, small.cost.rounds, small.cost.barriers) == (1024, 1, 1)
    # 64x64: 8 KB in one round, so it keeps Triton's rounds (2 KB, 4 rounds).
    large = check_simulation(mma, dot_a, (64, 64))
    assert (large.cost.smem_bytes, large.cost.rounds, large.cost.barriers) == (2048, 4, 7)


def test_conversion_matrix_is_dst_inverse_after_src():
    src = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    dst = BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])
    cvt = conversion_matrix(src, dst, (32, 16))
    s = src.to_linear_layout([32, 16])
    d = dst.to_linear_layout([32, 16])
    for reg in range(4):
        for lane in range(32):
            where = cvt.apply({"register": reg, "lane": lane, "warp": 1})
            assert d.apply(where) == s.apply({"register": reg, "lane": lane, "warp": 1})


def test_linear_layouts_are_accepted_directly():
    src = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]).to_linear_layout([32, 16])
    dst = BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0]).to_linear_layout([32, 16])
    assert plan_conversion(src, dst, (32, 16), 16).kind == "warp_shuffle"


def test_num_warps_mismatch_is_reported():
    layout = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    with pytest.raises(ValueError, match="num_warps=8 but the layouts use 4 warps"):
        plan_conversion(layout, layout, (64, 64), "fp16", num_warps=8)


def test_describe_names_the_plan_and_cost():
    src = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    dst = BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1])
    plan = plan_conversion(src, dst, (128, 128), "bf16")
    text = plan.describe()
    assert text.startswith("plan: shared_memory")
    assert "st.shared.v4.b32, 8 elements (16 B) per access" in text
    assert "cost: 32768 B scratch" in text
    assert isinstance(plan, ConversionPlan)


def test_plans_are_cached_and_fast():
    src = BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])
    dst = BlockedLayout([8, 1], [8, 4], [1, 8], [0, 1])
    first = plan_conversion(src, dst, (128, 128), "fp16")
    start = time.perf_counter()
    for _ in range(100):
        again = plan_conversion(src, dst, (128, 128), "fp16")
    per_call = (time.perf_counter() - start) / 100
    assert again is first
    assert per_call < 200e-6  # the budget is 50 us; leave room for a loaded CI machine


# -- random pairs -----------------------------------------------------------------------

def _blocked(draw, shape, num_warps):
    rank = len(shape)
    order = draw(st.permutations(range(rank)))
    spt = [1 << draw(st.integers(0, 2)) for _ in range(rank)]
    lane_split = draw(st.integers(0, 5))
    tpw = [1 << lane_split, 1 << (5 - lane_split)]
    warp_split = draw(st.integers(0, num_warps.bit_length() - 1))
    wpc = [1 << warp_split, num_warps >> warp_split]
    return BlockedLayout(spt, tpw, wpc, list(order))


def _linear(draw, shape, num_warps):
    """Random register layout: a random permutation of the element bits over
    register / lane / warp, with random broadcast bits thrown in."""
    bits = [(0, 1 << i) for i in range(shape[0].bit_length() - 1)] + \
        [(1, 1 << i) for i in range(shape[1].bit_length() - 1)]
    bits = draw(st.permutations(bits))
    nw = num_warps.bit_length() - 1
    vectors = [[s if d == 0 else 0, s if d == 1 else 0] for d, s in bits]
    lanes, warps, regs = vectors[:5], vectors[5:5 + nw], vectors[5 + nw:]
    if draw(st.booleans()) and regs:
        regs.insert(draw(st.integers(0, len(regs))), [0, 0])   # a broadcast register
    return DistributedLinearLayout(regs, lanes, warps, [], list(shape))


@st.composite
def layout_pairs(draw):
    shape = (1 << draw(st.integers(4, 6)), 1 << draw(st.integers(4, 6)))
    num_warps = draw(st.sampled_from([1, 2, 4]))
    pick = st.sampled_from(["blocked", "linear"])
    layouts = []
    for _ in range(2):
        kind = draw(pick)
        layouts.append(_blocked(draw, shape, num_warps) if kind == "blocked"
                       else _linear(draw, shape, num_warps))
    dtype = draw(st.sampled_from(["fp8", "fp16", "fp32", "fp64"]))
    return layouts[0], layouts[1], shape, dtype


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_pairs())
def test_simulated_conversion_lands_every_element(pair):
    src, dst, shape, dtype = pair
    check_simulation(src, dst, shape, dtype)


@st.composite
def warp_local_pairs(draw):
    """Pairs that differ only inside a warp: forces the shuffle path."""
    shape = (16, 1 << draw(st.integers(2, 4)))
    bits = [(0, 1 << i) for i in range(4)] + [(1, 1 << i) for i in
                                              range(shape[1].bit_length() - 1)]
    warp_bit = bits.pop(3)          # dim0 = 8 is the warp bit of both layouts
    layouts = []
    for _ in range(2):
        perm = draw(st.permutations(bits))
        vectors = [[s if d == 0 else 0, s if d == 1 else 0] for d, s in perm]
        layouts.append(DistributedLinearLayout(vectors[5:], vectors[:5], [[warp_bit[1], 0]],
                                               [], list(shape)))
    return layouts[0], layouts[1], shape, draw(st.sampled_from(["fp16", "fp32"]))


@settings(max_examples=100, deadline=None)
@given(warp_local_pairs())
def test_warp_local_conversions_never_touch_shared_memory(pair):
    src, dst, shape, dtype = pair
    plan = check_simulation(src, dst, shape, dtype)
    assert plan.kind in ("noop", "register_permutation", "warp_shuffle")
    if plan.kind == "warp_shuffle":
        regs = 1 << len([v for v in dst.reg_bases if any(v)])
        pack = 2 if dtype == "fp16" else 1
        assert plan.cost.shuffles >= regs // pack


def test_slice_and_dot_operand_layouts_plan():
    parent = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    s0 = SliceLayout(0, parent)
    s1 = SliceLayout(1, parent)
    check_simulation(s0, s1, (64,))
    mma = NVMMADistributedLayout([2, 0], [4, 1], [16, 8])
    dot = DotOperandLayout(0, mma, 2)
    check_simulation(dot, parent, (64, 64))
    check_simulation(mma, dot, (64, 64))


def test_hand_built_linear_layout_with_block_dim():
    layout = LinearLayout({"register": [(0, 1)], "lane": [(0, 2), (0, 4), (1, 0), (2, 0),
                                                             (4, 0)],
                           "warp": [], "block": []}, [("dim0", 8), ("dim1", 8)])
    assert plan_conversion(layout, layout, (8, 8), "fp32").kind == "noop"
