"""convert_layout by warp shuffles: the planner's `warp_shuffle` plans run on the CPU lock-step
simulator (every lane of every warp, shuffles and selects executed) and compiled to PTX and
cubin for sm_90a, where they must be `shfl.sync.idx` and nothing touching shared memory."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cross_thread import Kernel, count
from xthread_sim import SimContext

from gluon.layouts import BlockedLayout, DistributedLinearLayout
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block
from shared_codegen.ir.types import (TensorType, bfloat16, float8e4nv, float16, float32, float64,
                                     int1, int8, int16, int32, int64)
from shared_codegen.layouts.planner import plan_conversion
from shared_codegen.lowering.xthread_shuffle import Affine, fit_affine, schedule_shuffle
from shared_codegen.ops.tensor import definition as tensor
from shared_codegen.ops.tensor import lowering as tensor_rules

DTYPES = {"fp16": float16, "bf16": bfloat16, "fp32": float32, "fp64": float64, "i8": int8,
          "i16": int16, "i32": int32, "i64": int64, "i1": int1, "fp8": float8e4nv}


def _values(shape, dtype, seed=0):
    """Exact in every element type (fp8 and i1 are integers to the simulator)."""
    high = 2 if dtype is int1 else 100
    return np.random.default_rng(seed).integers(0, high, size=shape).astype(np.float64)


def simulate_convert(src, dst, shape, dtype, num_warps):
    b = Builder(Block())
    x = Block([TensorType(shape, dtype, src)]).args[0]
    y = tensor.ConvertLayoutOp.build(b, x, dst)
    sim = SimContext(num_warps)
    data = _values(shape, dtype)
    sim.bind(x, data)
    (out,) = tensor_rules.lower_convert_layout(y.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, y.type), data)
    return sim


def _bits(dtype):
    return 8 if dtype is int1 else dtype.bits


# -- the affine fit ----------------------------------------------------------------------

def test_fit_affine_recovers_a_map_and_refuses_a_non_affine_table():
    f = Affine(5, (1, 2, 0, 8, 3))
    assert fit_affine({x: f(x) for x in range(32)}, 5) == f
    partial = {x: f(x) for x in range(0, 32, 4)}   # lane bits 0, 1 never read
    fitted = fit_affine(partial, 5)
    assert all(fitted(x) == y for x, y in partial.items())
    assert fit_affine({0: 0, 1: 1, 2: 2, 3: 0}, 2) is None


# -- known pairs -----------------------------------------------------------------------------

BLOCKED_SRC = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
BLOCKED_DST = BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_blocked_lane_permutation_in_every_type(name):
    dtype = DTYPES[name]
    plan = plan_conversion(BLOCKED_SRC, BLOCKED_DST, (32, 16), _bits(dtype))
    assert plan.kind == "warp_shuffle"
    sim = simulate_convert(BLOCKED_SRC, BLOCKED_DST, (32, 16), dtype, 4)
    assert sim.shuffles == plan.cost.shuffles
    assert sim.barriers == 0 and sim.shared_bytes == 0


def test_pure_lane_permutation_needs_no_selects():
    lanes_src = [[0, 1], [0, 2], [1, 0], [2, 0], [4, 0]]
    lanes_dst = [[1, 0], [2, 0], [4, 0], [0, 1], [0, 2]]
    src = DistributedLinearLayout([[8, 0]], lanes_src, [], [], [16, 4])
    dst = DistributedLinearLayout([[8, 0]], lanes_dst, [], [], [16, 4])
    plan = plan_conversion(src, dst, (16, 4), 32)
    sched = schedule_shuffle(plan, dst.to_linear_layout([16, 4]).bases["register"], 2)
    assert all(not any(r.send.masks) for r in sched.rounds) and not any(sched.recv)
    sim = simulate_convert(src, dst, (16, 4), float32, 1)
    assert sim.shuffles == 2


# -- random warp-local pairs ------------------------------------------------------------------

@st.composite
def warp_local_pairs(draw):
    """Two layouts with the same warp bases: every element stays in its warp. Lanes may hold
    broadcast copies (when the tensor has fewer than 32 elements per warp) and registers may
    be broadcast too."""
    num_warps = draw(st.sampled_from([1, 2, 4]))
    nw = num_warps.bit_length() - 1
    shape = (1 << draw(st.integers(2, 4)), 1 << draw(st.integers(2, 4)))
    bits = [(0, 1 << i) for i in range(shape[0].bit_length() - 1)] + \
        [(1, 1 << i) for i in range(shape[1].bit_length() - 1)]
    warp_bits = draw(st.permutations(bits))[:nw]
    rest = [x for x in bits if x not in warp_bits]

    def vec(bit):
        return [bit[1] if bit[0] == 0 else 0, bit[1] if bit[0] == 1 else 0]

    warps = [vec(w) for w in warp_bits]
    layouts = []
    for _ in range(2):
        perm = [vec(x) for x in draw(st.permutations(rest))]
        lanes, regs = perm[:5], perm[5:]
        while len(lanes) < 5:       # too few elements: the missing lane bits broadcast
            lanes.insert(draw(st.integers(0, len(lanes))), [0, 0])
        if draw(st.booleans()):
            regs.insert(draw(st.integers(0, len(regs))), [0, 0])
        layouts.append(DistributedLinearLayout(regs, lanes, warps, [], list(shape)))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    return layouts[0], layouts[1], shape, DTYPES[dtype], num_warps


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(warp_local_pairs())
def test_random_warp_local_conversions_run_the_plan(pair):
    src, dst, shape, dtype, num_warps = pair
    plan = plan_conversion(src, dst, shape, _bits(dtype))
    sim = simulate_convert(src, dst, shape, dtype, num_warps)
    assert sim.barriers == 0 and sim.shared_bytes == 0
    if plan.kind == "warp_shuffle":
        assert sim.shuffles == plan.cost.shuffles
    else:
        assert plan.kind in ("noop", "register_permutation") and sim.shuffles == 0


# -- PTX ---------------------------------------------------------------------------------------

SMEM = re.compile(r"\b(st|ld)\.shared|bar\.sync|stmatrix|ldmatrix")


def convert_ptx(src, dst, shape, dtype):
    k = Kernel(dtype=dtype)
    x = k.load(shape, src)
    k.store(tensor.ConvertLayoutOp.build(k.b, x, dst))
    return k.compile()


@pytest.mark.parametrize("dtype", [float16, float32, float64, int8])
def test_shuffle_plan_emits_shfl_and_no_shared_memory(dtype):
    plan = plan_conversion(BLOCKED_SRC, BLOCKED_DST, (32, 16), dtype.bits)
    assert plan.kind == "warp_shuffle"
    lowered, ptx = convert_ptx(BLOCKED_SRC, BLOCKED_DST, (32, 16), dtype)
    assert count(ptx, r"shfl\.sync\.idx") == plan.cost.shuffles + 1  # + the warp-id shuffle
    assert not SMEM.search(ptx)
    assert lowered.shared_bytes == 0


def test_register_permutation_emits_neither_shuffles_nor_shared_memory():
    # Lanes only along dim 1 and warps only along dim 0: `order` changes registers alone.
    src = BlockedLayout([2, 2], [1, 32], [4, 1], [1, 0])
    dst = BlockedLayout([2, 2], [1, 32], [4, 1], [0, 1])
    assert plan_conversion(src, dst, (16, 128), 32).kind == "register_permutation"
    _, ptx = convert_ptx(src, dst, (16, 128), float32)
    assert count(ptx, r"shfl\.sync") == 1                            # the warp-id shuffle
    assert not SMEM.search(ptx)
