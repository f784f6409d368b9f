"""convert_layout through shared memory as planned: the planner's swizzle and rounds, vector
st.shared/ld.shared of the promised width, and stmatrix/ldmatrix where the plan picks them.
Run on the CPU lock-step simulator (byte-addressed, race-checked shared memory; stmatrix and
ldmatrix per the PTX fragment layout) and compiled to PTX and cubin for sm_90a."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_convert_shuffle import convert_ptx, simulate_convert
from test_cross_thread import count

from gluon.layouts import BlockedLayout, DistributedLinearLayout, NVMMADistributedLayout
from shared_codegen.ir.types import bfloat16, float8e4nv, float16, float32, float64, int8
from shared_codegen.layouts.planner import plan_conversion
from shared_codegen.lowering.context import _to_linear
from shared_codegen.lowering.xthread_swizzle import plan_sides


def blocked(spt, tpw, wpc, order):
    return BlockedLayout(list(spt), list(tpw), list(wpc), list(order))


def sides(src, dst, shape, dtype):
    plan = plan_conversion(src, dst, shape, dtype.bits)
    assert plan.kind == "shared_memory"
    got = plan_sides(plan, _to_linear(src, shape), _to_linear(dst, shape), shape)
    assert got is not None, "the planned round trip must run as planned"
    return plan, got[0], got[1]


def check_planned_round_trip(src, dst, shape, dtype, num_warps=4):
    """Simulate; the planned path (not the padded fallback) must have run: its scratch size
    and one store/load barrier pair per round."""
    plan, store, load = sides(src, dst, shape, dtype)
    sim = simulate_convert(src, dst, shape, dtype, num_warps)
    rounds = 1 << len(plan.shared.swizzle.reps)
    assert sim.shared_bytes == plan.cost.smem_bytes
    assert sim.barriers == 2 * rounds
    return plan, store, load, sim


# -- stmatrix / ldmatrix ------------------------------------------------------------------

ROW_MAJOR = blocked([1, 2], [4, 8], [1, 4], [1, 0])
MATRIX_CASES = {
    # name: (src, dst, store instruction, load instruction)
    "st_ld": (blocked([1, 2], [4, 8], [4, 1], [1, 0]), ROW_MAJOR,
              "stmatrix.x4.b16", "ldmatrix.x4.b16"),
    "st_ld_rounds": (blocked([1, 2], [4, 8], [4, 1], [1, 0]),
                     blocked([1, 2], [4, 8], [2, 2], [1, 0]),
                     "stmatrix.x4.b16", "ldmatrix.x4.b16"),
    "transpose": (ROW_MAJOR, blocked([4, 1], [4, 8], [4, 1], [0, 1]),
                  "stmatrix.x4.b16", "ldmatrix.trans.x4.b16"),
    "st_trans": (ROW_MAJOR, blocked([4, 1], [4, 8], [4, 1], [1, 0]),
                 "stmatrix.trans.x4.b16", "ld.shared.v4.b32"),
    "ld_trans": (ROW_MAJOR, blocked([2, 1], [32, 1], [1, 4], [1, 0]),
                 "st.shared.v4.b32", "ldmatrix.trans.x4.b16"),
    "st_trans_ld": (blocked([1, 2], [8, 4], [2, 2], [1, 0]),
                    blocked([2, 1], [16, 2], [4, 1], [0, 1]),
                    "stmatrix.trans.x4.b16", "ldmatrix.x4.b16"),
    "mma_to_blocked": (NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16]),
                       blocked([1, 8], [4, 8], [4, 1], [1, 0]), None, None),
}


def _matrix_ptx_name(form):
    """'ldmatrix.trans.x4.b16' -> the PTX spelling."""
    op, *mods = form.split(".")
    trans = ".trans" if "trans" in mods else ""
    width = next(m for m in mods if m.startswith("x"))
    return f"{op}.sync.aligned.m8n8.{width}{trans}.shared.b16"


@pytest.mark.parametrize("dtype", [float16, bfloat16])
@pytest.mark.parametrize("name", sorted(MATRIX_CASES))
def test_matrix_plans_run_on_the_simulator(name, dtype):
    src, dst, st_name, ld_name = MATRIX_CASES[name]
    plan, store, load, sim = check_planned_round_trip(src, dst, (64, 64), dtype)
    if st_name is not None:
        assert (plan.shared.store_instruction, plan.shared.load_instruction) == (st_name, ld_name)
    assert "matrix" in plan.shared.store_instruction + plan.shared.load_instruction
    # What ran is what the plan named, one instruction per planned access.
    assert store.instruction("st", 16) == plan.shared.store_instruction
    assert load.instruction("ld", 16) == plan.shared.load_instruction
    ran = [op.split(".")[2] for op in sim.matrix_ops]
    assert ran.count("stmatrix") == (len(store.accesses) if store.kind == "matrix" else 0)
    assert ran.count("ldmatrix") == (len(load.accesses) if load.kind == "matrix" else 0)


@pytest.mark.parametrize("name", sorted(MATRIX_CASES))
def test_matrix_plans_emit_stmatrix_ldmatrix(name):
    src, dst, _, _ = MATRIX_CASES[name]
    plan, store, load = sides(src, dst, (64, 64), float16)
    lowered, ptx = convert_ptx(src, dst, (64, 64), float16)
    for side, planned, op in ((store, plan.shared.store_instruction, "st"),
                              (load, plan.shared.load_instruction, "ld")):
        if side.kind == "matrix":
            spelled = _matrix_ptx_name(planned)
            assert count(ptx, re.escape(spelled)) == len(side.accesses), spelled
            assert not re.search(rf"\b{op}\.shared", ptx)
        else:
            assert count(ptx, rf"\b{re.escape(planned)}\b") == len(side.accesses)
    rounds = 1 << len(plan.shared.swizzle.reps)
    assert count(ptx, r"bar\.sync") == 2 * rounds
    assert lowered.shared_bytes == plan.cost.smem_bytes


def test_matrix_instructions_need_their_architecture():
    """stmatrix is sm_90+, ldmatrix sm_75+: below that the plan is not run as such."""
    src, dst, _, _ = MATRIX_CASES["st_ld"]
    plan = plan_conversion(src, dst, (64, 64), 16)
    lls = _to_linear(src, (64, 64)), _to_linear(dst, (64, 64))
    assert plan_sides(plan, *lls, (64, 64), arch=90) is not None
    assert plan_sides(plan, *lls, (64, 64), arch=80) is None


# -- plain vector ld/st: the promised width ---------------------------------------------------

VECTOR_CASES = [
    # src, dst, shape, dtype
    (blocked([1, 4], [1, 32], [4, 1], [1, 0]), blocked([4, 1], [32, 1], [1, 4], [0, 1]),
     (32, 32), float32),
    (blocked([1, 8], [4, 8], [4, 1], [1, 0]), blocked([8, 1], [8, 4], [1, 4], [0, 1]),
     (128, 128), float16),
    (blocked([1, 8], [4, 8], [4, 1], [1, 0]), blocked([8, 1], [8, 4], [1, 4], [0, 1]),
     (128, 128), float8e4nv),
    (blocked([1, 2], [4, 8], [4, 1], [1, 0]), blocked([2, 1], [8, 4], [4, 1], [1, 0]),
     (64, 64), float16),
    (blocked([1, 2], [4, 8], [1, 4], [1, 0]), blocked([2, 1], [4, 8], [4, 1], [1, 0]),
     (64, 64), float16),
    (blocked([2, 2], [8, 4], [2, 2], [0, 1]), blocked([1, 1], [1, 32], [4, 1], [1, 0]),
     (64, 64), float64),
]


def _access_bits(name):
    """'st.shared.v4.b32' -> 128: bits one thread moves per instruction."""
    m = re.fullmatch(r"(?:st|ld)\.shared(?:\.v(\d))?\.b(\d+)", name)
    return int(m.group(1) or 1) * int(m.group(2))


def _shared_accesses(ptx, op):
    return [_access_bits(n) for n in re.findall(rf"\b{op}\.shared(?:\.v\d)?\.b\d+", ptx)]


@pytest.mark.parametrize("case", range(len(VECTOR_CASES)))
def test_vector_width_in_ptx_is_the_planned_one(case):
    """Every st.shared / ld.shared moves the plan's vector (elements x bits), one per planned
    access. (LLVM may spell an 8-byte load of fp16 `ld.shared.v4.b16` rather than the plan's
    `ld.shared.v2.b32`: the width is what is promised, so widths are compared.)"""
    src, dst, shape, dtype = VECTOR_CASES[case]
    plan, store, load = sides(src, dst, shape, dtype)
    assert "matrix" not in plan.shared.store_instruction + plan.shared.load_instruction
    assert store.width == plan.shared.store_vector and load.width == plan.shared.load_vector
    check_planned_round_trip(src, dst, shape, dtype)
    _, ptx = convert_ptx(src, dst, shape, dtype)
    for op, side, vector in (("st", store, plan.shared.store_vector),
                             ("ld", load, plan.shared.load_vector)):
        widths = _shared_accesses(ptx, op)
        assert widths == [vector * dtype.bits] * len(side.accesses), (op, widths)


# -- random pairs -------------------------------------------------------------------------------

def _random_blocked(draw, num_warps):
    order = draw(st.permutations(range(2)))
    spt = [1 << draw(st.integers(0, 3)) for _ in range(2)]
    lane_split = draw(st.integers(0, 5))
    warp_split = draw(st.integers(0, num_warps.bit_length() - 1))
    return blocked(spt, [1 << lane_split, 1 << (5 - lane_split)],
                   [1 << warp_split, num_warps >> warp_split], list(order))


def _random_linear(draw, shape, num_warps):
    bits = [(0, 1 << i) for i in range(shape[0].bit_length() - 1)] + \
        [(1, 1 << i) for i in range(shape[1].bit_length() - 1)]
    bits = draw(st.permutations(bits))
    nw = num_warps.bit_length() - 1
    vectors = [[s if d == 0 else 0, s if d == 1 else 0] for d, s in bits]
    lanes, warps, regs = vectors[:5], vectors[5:5 + nw], vectors[5 + nw:]
    if draw(st.booleans()) and regs:
        regs.insert(draw(st.integers(0, len(regs))), [0, 0])
    return DistributedLinearLayout(regs, lanes, warps, [], list(shape))


@st.composite
def layout_pairs(draw):
    shape = (1 << draw(st.integers(4, 6)), 1 << draw(st.integers(4, 6)))
    num_warps = draw(st.sampled_from([1, 2, 4]))
    layouts = [_random_blocked(draw, num_warps) if draw(st.booleans())
               else _random_linear(draw, shape, num_warps) for _ in range(2)]
    dtype = draw(st.sampled_from([float16, float16, bfloat16, float32, int8, float64]))
    return layouts[0], layouts[1], shape, dtype, num_warps


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_pairs())
def test_random_conversions_land_every_element(pair):
    src, dst, shape, dtype, num_warps = pair
    plan = plan_conversion(src, dst, shape, dtype.bits)
    if plan.kind == "shared_memory":
        check_planned_round_trip(src, dst, shape, dtype, num_warps)
    else:
        sim = simulate_convert(src, dst, shape, dtype, num_warps)
        assert sim.barriers == 0
