"""ttg.mma_v2: layouts against the PTX fragment tables, a CPU simulation of the lowering plan,
interpreter numerics, verifier messages and the PTX/cubin it compiles to."""

import re

import numpy as np
import pytest
from ampere_kernels import compile_ptx, interpret, matmul_kernel, random_matrix

from gluon.layouts import DotOperandLayout, NVMMADistributedLayout
from shared_codegen.ir.core import VerificationError
from shared_codegen.ops.dot.definition import MmaV2Op, round_to_tf32
from shared_codegen.ir.types import bfloat16, float16, float32, int8, int32, uint8
from shared_codegen.ops.dot.lowering import MMA_SHAPES, plan_mma_v2


# ---- the PTX ISA tables, read a second time -------------------------------------------------
# PTX ISA 9.7.14.5.8 (m16n8k16 .f16/.bf16), 9.7.14.5.7 (m16n8k8 .tf32), 9.7.14.5.9
# (m16n8k32 .s8/.u8): groupID = %laneid >> 2, threadID_in_group = %laneid % 4.

def ptx_a(kind, lane, i):
    g, t = lane >> 2, lane % 4
    if kind == "f16":
        row = g if (i < 2 or 4 <= i < 6) else g + 8
        col = t * 2 + (i & 0x1) + (8 if i >= 4 else 0)
    elif kind == "tf32":
        row = g if i in (0, 2) else g + 8
        col = t if i in (0, 1) else t + 4
    else:
        row = g if (i < 4 or 8 <= i < 12) else g + 8
        col = t * 4 + (i & 0x3) + (16 if i >= 8 else 0)
    return row, col


def ptx_b(kind, lane, i):
    g, t = lane >> 2, lane % 4
    if kind == "f16":
        row = t * 2 + (i & 0x1) + (8 if i >= 2 else 0)
    elif kind == "tf32":
        row = t if i == 0 else t + 4
    else:
        row = t * 4 + (i & 0x3) + (16 if i >= 4 else 0)
    return row, g


def ptx_c(lane, i):
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 0x1)


KINDS = {"f16": (float16, float32, 16, 8, 4), "tf32": (float32, float32, 8, 4, 2),
         "s8": (int8, int32, 32, 16, 8)}  # elem, acc, K, a slots, b slots


def layouts(warps, k_width):
    mma = NVMMADistributedLayout([2, 0], warps, [16, 8])
    return mma, DotOperandLayout(0, mma, k_width), DotOperandLayout(1, mma, k_width)


def point(ll, in_dim, index):
    out = [0, 0]
    for bit, vec in enumerate(ll.bases.get(in_dim, [])):
        if index >> bit & 1:
            out = [out[0] ^ vec[0], out[1] ^ vec[1]]
    return tuple(out)


def at(ll, reg, lane, warp):
    r, l, w = point(ll, "register", reg), point(ll, "lane", lane), point(ll, "warp", warp)
    return r[0] ^ l[0] ^ w[0], r[1] ^ l[1] ^ w[1]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_instruction_tile_of_each_layout_is_the_ptx_fragment(kind):
    elem, acc_elem, k, a_slots, b_slots = KINDS[kind]
    mma, a_lay, b_lay = layouts([1, 1], 32 // elem.bits)
    a_ll = a_lay.to_linear_layout([16, k])
    b_ll = b_lay.to_linear_layout([k, 8])
    c_ll = mma.to_linear_layout([16, 8])
    for lane in range(32):
        assert [at(a_ll, i, lane, 0) for i in range(a_slots)] == \
            [ptx_a(kind, lane, i) for i in range(a_slots)]
        assert [at(b_ll, i, lane, 0) for i in range(b_slots)] == \
            [ptx_b(kind, lane, i) for i in range(b_slots)]
        assert [at(c_ll, i, lane, 0) for i in range(4)] == [ptx_c(lane, i) for i in range(4)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_lowering_tables_are_the_ptx_tables(kind):
    elem, acc_elem, k, a_slots, b_slots = KINDS[kind]
    shape = MMA_SHAPES[(elem.name, acc_elem.name)]
    assert (shape.k, shape.a_slots, shape.b_slots) == (k, a_slots, b_slots)
    for lane in range(32):
        assert [shape.a_pos(lane, i) for i in range(a_slots)] == \
            [ptx_a(kind, lane, i) for i in range(a_slots)]
        assert [shape.b_pos(lane, i) for i in range(b_slots)] == \
            [ptx_b(kind, lane, i) for i in range(b_slots)]
        assert [shape.c_pos(lane, i) for i in range(4)] == [ptx_c(lane, i) for i in range(4)]


def simulate(kind, mnk, warps, rng):
    """Run the lowering's plan the way the hardware would: each instruction gathers its 16xK
    and Kx8 tiles from the 32 lanes' fragment registers (PTX tables above), multiplies, and
    scatters D back; then compare every thread's acc registers with numpy."""
    elem, acc_elem, k, a_slots, b_slots = KINDS[kind]
    m_size, n_size, k_size = mnk
    mma, a_lay, b_lay = layouts(warps, 32 // elem.bits)
    lls = [a_lay.to_linear_layout([m_size, k_size]), b_lay.to_linear_layout([k_size, n_size]),
           mma.to_linear_layout([m_size, n_size])]
    steps, c_rep = plan_mma_v2(*lls, MMA_SHAPES[(elem.name, acc_elem.name)], mnk)
    A = rng.integers(-4, 5, (m_size, k_size)).astype(np.float64)
    B = rng.integers(-4, 5, (k_size, n_size)).astype(np.float64)
    C = rng.integers(-4, 5, (m_size, n_size)).astype(np.float64)
    num_warps = int(np.prod(warps))
    files = []  # per (warp, lane): the a, b, acc register values
    for w in range(num_warps):
        for lane in range(32):
            regs = []
            for ll, mat in zip(lls, (A, B, C)):
                n_regs = 1 << len(ll.bases["register"])
                regs.append([mat[at(ll, r, lane, w)] for r in range(n_regs)])
            files.append(regs)
    for step in steps:
        a_regs = [r for reg in step.a for r in reg]
        b_regs = [r for reg in step.b for r in reg]
        for w in range(num_warps):
            ta, tb, tc = np.zeros((16, k)), np.zeros((k, 8)), np.zeros((16, 8))
            for lane in range(32):
                fa, fb, fc = files[w * 32 + lane]
                for i, r in enumerate(a_regs):
                    ta[ptx_a(kind, lane, i)] = fa[r]
                for i, r in enumerate(b_regs):
                    tb[ptx_b(kind, lane, i)] = fb[r]
                for i, r in enumerate(step.c):
                    tc[ptx_c(lane, i)] = fc[r]
            d = ta @ tb + tc
            for lane in range(32):
                for i, r in enumerate(step.c):
                    files[w * 32 + lane][2][r] = d[ptx_c(lane, i)]
    want = A @ B + C
    c_ll = lls[2]
    for w in range(num_warps):
        for lane in range(32):
            acc = files[w * 32 + lane][2]
            for r in range(len(acc)):
                assert acc[c_rep[r]] == want[at(c_ll, r, lane, w)], (w, lane, r)
    return steps


@pytest.mark.parametrize("kind,mnk,warps", [
    ("f16", (16, 8, 16), [1, 1]),
    ("f16", (64, 64, 32), [2, 2]),
    ("f16", (128, 32, 64), [4, 1]),
    ("f16", (32, 128, 16), [1, 4]),
    ("f16", (16, 8, 32), [2, 2]),      # fewer tiles than warps: warps compute copies
    ("f16", (64, 16, 16), [4, 2]),
    ("tf32", (32, 32, 16), [2, 2]),
    ("s8", (32, 16, 64), [2, 1]),
])
def test_simulated_plan_computes_the_matmul_on_every_thread(kind, mnk, warps):
    steps = simulate(kind, mnk, warps, np.random.default_rng(1))
    assert steps


def test_plan_issues_k_steps_outermost_and_one_instruction_per_tile_and_k_step():
    mma, a_lay, b_lay = layouts([2, 2], 2)
    lls = [a_lay.to_linear_layout([64, 32]), b_lay.to_linear_layout([32, 64]),
           mma.to_linear_layout([64, 64])]
    steps, _ = plan_mma_v2(*lls, MMA_SHAPES[("fp16", "fp32")], (64, 64, 32))
    # Each warp owns a 32x32 block: 2 x 4 tiles of 16x8, two K steps of 16.
    assert len(steps) == 16
    assert [s.origin[2] for s in steps] == [0] * 8 + [16] * 8


def test_plan_rejects_an_operand_with_the_wrong_k_width():
    mma, _, b_lay = layouts([2, 2], 2)
    a_lay = DotOperandLayout(0, mma, 4)
    lls = [a_lay.to_linear_layout([64, 32]), b_lay.to_linear_layout([32, 64]),
           mma.to_linear_layout([64, 64])]
    with pytest.raises(ValueError, match="a's layout puts lane 1 at"):
        plan_mma_v2(*lls, MMA_SHAPES[("fp16", "fp32")], (64, 64, 32))


# ---- interpreter numerics ---------------------------------------------------------------------

def run_mma(elem, acc_elem, mnk, warps, rng, **attrs):
    mma, a_lay, b_lay = layouts(warps, max(1, 32 // elem.bits))
    m, n, k = mnk
    mod = matmul_kernel(MmaV2Op.build, elem, acc_elem, mnk, a_lay, b_lay, mma,
                        num_warps=int(np.prod(warps)), **attrs)
    a = random_matrix(rng, (m, k), elem.np)
    b = random_matrix(rng, (k, n), elem.np)
    c = random_matrix(rng, (m, n), acc_elem.np)
    out = np.zeros((m, n), acc_elem.np)
    interpret(mod, a, b, c, out)
    return mod, a, b, c, out


@pytest.mark.parametrize("elem", [float16, bfloat16])
@pytest.mark.parametrize("mnk,warps", [((16, 8, 16), [1, 1]), ((64, 64, 32), [2, 2]),
                                       ((128, 64, 64), [4, 1]), ((32, 64, 128), [1, 2])])
def test_interpreter_fp16_bf16_against_fp32_numpy(elem, mnk, warps):
    _, a, b, c, out = run_mma(elem, float32, mnk, warps, np.random.default_rng(2))
    want = a.astype(np.float32) @ b.astype(np.float32) + c
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_interpreter_tf32_rounds_inputs_to_nearest_ties_away():
    x = np.array([1.0, 1 + 2**-11, 1 + 2**-10 + 2**-11, -(1 + 2**-11), np.inf, 3e38],
                 np.float32)
    got = round_to_tf32(x)
    assert list(got[:4]) == [1.0, 1 + 2**-10, 1 + 2**-9, -(1 + 2**-10)]
    assert got[4] == np.inf
    _, a, b, c, out = run_mma(float32, float32, (32, 16, 16), [2, 1], np.random.default_rng(3))
    want = round_to_tf32(a) @ round_to_tf32(b) + c
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    assert np.abs(out - (a @ b + c)).max() > 1e-5  # tf32 really is coarser than fp32


@pytest.mark.parametrize("elem", [int8, uint8])
def test_interpreter_int8_accumulates_in_int32(elem):
    rng = np.random.default_rng(4)
    _, a, b, c, out = run_mma(elem, int32, (32, 16, 64), [2, 1], rng)
    want = a.astype(np.int64) @ b.astype(np.int64) + c
    np.testing.assert_array_equal(out, want.astype(np.int32))


# ---- verifier ---------------------------------------------------------------------------------

def test_verifier_names_the_expected_operand_layout():
    mma, a_lay, b_lay = layouts([2, 2], 2)
    with pytest.raises(VerificationError, match=re.escape(
            "a must have layout DotOperandLayout(operand_index=0, parent=NVMMADistributedLayout("
            "version=[2, 0], warps_per_cta=[2, 2], instr_shape=[16, 8]), k_width=2)")):
        matmul_kernel(MmaV2Op.build, float16, float32, (32, 32, 32),
                      DotOperandLayout(0, mma, 4), b_lay, mma)


def test_verifier_rejects_bad_shapes_types_and_accumulator_layouts():
    mma, a_lay, b_lay = layouts([2, 2], 2)
    with pytest.raises(VerificationError, match=r"M must be a multiple of 16, N of 8, K of 16; "
                                                r"got M=32, N=32, K=8"):
        matmul_kernel(MmaV2Op.build, float16, float32, (32, 32, 8), a_lay, b_lay, mma)
    # fp16 -> fp16 is an mma.sync form (test_mma_v2_f16_acc.py); bf16 -> bf16 is not.
    with pytest.raises(VerificationError, match="fp16/bf16 -> fp32"):
        matmul_kernel(MmaV2Op.build, bfloat16, bfloat16, (32, 32, 16), a_lay, b_lay, mma)
    hopper = NVMMADistributedLayout([3, 0], [4, 1], [16, 32, 16])
    with pytest.raises(VerificationError, match=r"acc must have layout NVMMADistributedLayout"
                                                r"\(version=\[2, 0\]"):
        matmul_kernel(MmaV2Op.build, float16, float32, (64, 32, 16), a_lay, b_lay, hopper)
    with pytest.raises(VerificationError, match="use dot_fma for full fp32 precision"):
        matmul_kernel(MmaV2Op.build, float32, float32, (32, 32, 16), *layouts([2, 2], 1)[1:],
                      mma, input_precision="ieee")


# ---- PTX and cubin ----------------------------------------------------------------------------

def mma_ptx(elem, acc_elem, mnk, warps, **attrs):
    mma, a_lay, b_lay = layouts(warps, max(1, 32 // elem.bits))
    mod = matmul_kernel(MmaV2Op.build, elem, acc_elem, mnk, a_lay, b_lay, mma,
                        num_warps=int(np.prod(warps)), **attrs)
    return compile_ptx(mod)


def test_fp16_ptx_has_one_mma_sync_per_tile_and_k_step_for_sm_90a_and_sm_80():
    ptx = mma_ptx(float16, float32, (64, 64, 32), [2, 2])
    for target in ("sm_90a", "sm_80"):
        text = ptx[target]
        assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32",
                              text)) == 16
        assert "ld.local" not in text and "st.local" not in text  # no register spills


@pytest.mark.parametrize("elem,acc_elem,instr", [
    (bfloat16, float32, r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32"),
    (float32, float32, r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"),
    (int8, int32, r"mma\.sync\.aligned\.m16n8k32\.row\.col\.s32\.s8\.s8\.s32"),
    (uint8, int32, r"mma\.sync\.aligned\.m16n8k32\.row\.col\.s32\.u8\.u8\.s32"),
])
def test_other_input_types_compile_to_their_mma_sync(elem, acc_elem, instr):
    k = 32 if elem.bits == 8 else 16
    ptx = mma_ptx(elem, acc_elem, (32, 16, k), [2, 1])
    # Each warp: one 16x16 block = 2 tiles; K / instruction K steps.
    steps = k // MMA_SHAPES[(elem.name, acc_elem.name)].k
    assert len(re.findall(instr, ptx["sm_90a"])) == 2 * steps
    if elem == float32:
        assert "cvt.rna.tf32.f32" in ptx["sm_90a"]


@pytest.mark.parametrize("elem", [float16, bfloat16])
def test_16_bit_pairs_pack_with_one_mov_not_shifts(elem):
    # B's two K-adjacent elements come from different rows (separate 16-bit loads here).
    text = mma_ptx(elem, float32, (16, 8, 16), [1, 1])["sm_90a"]
    before = text.split("mma.sync")[0]
    assert re.search(r"mov\.b32\s+%r\d+, \{%rs\d+, %rs\d+\}", before)
    assert "cvt.u32.u16" not in before and "cvt.f32" not in before
