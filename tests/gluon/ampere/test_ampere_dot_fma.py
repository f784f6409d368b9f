"""ttg.dot_fma: interpreter numerics, the per-register FMA plan, verifier messages, PTX."""

import re

import numpy as np
import pytest
from ampere_kernels import compile_ptx, interpret, matmul_kernel, random_matrix

from gluon.layouts import BlockedLayout, DotOperandLayout
from shared_codegen.ir.core import VerificationError
from shared_codegen.ops.dot.definition import DotFmaOp
from shared_codegen.ir.types import bfloat16, float16, float32, int8, int32
from shared_codegen.ops.dot.lowering import plan_dot_fma

BLOCKED = BlockedLayout([2, 2], [4, 8], [2, 2], [1, 0])


def operands(parent=BLOCKED):
    return DotOperandLayout(0, parent, 0), DotOperandLayout(1, parent, 0)


def run(elem, acc_elem, mnk, parent=BLOCKED, seed=0):
    m, n, k = mnk
    a_lay, b_lay = operands(parent)
    mod = matmul_kernel(DotFmaOp.build, elem, acc_elem, mnk, a_lay, b_lay, parent)
    rng = np.random.default_rng(seed)
    a, b = random_matrix(rng, (m, k), elem.np), random_matrix(rng, (k, n), elem.np)
    c = random_matrix(rng, (m, n), acc_elem.np)
    out = np.zeros((m, n), acc_elem.np)
    interpret(mod, a, b, c, out)
    return mod, a, b, c, out


@pytest.mark.parametrize("elem", [float32, float16, bfloat16])
@pytest.mark.parametrize("mnk", [(32, 32, 8), (16, 64, 16), (64, 16, 4)])
def test_interpreter_matches_numpy_with_operands_widened_to_fp32(elem, mnk):
    _, a, b, c, out = run(elem, float32, mnk)
    want = a.astype(np.float32) @ b.astype(np.float32) + c
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_interpreter_integer_dot_accumulates_in_the_accumulator_type():
    _, a, b, c, out = run(int8, int32, (32, 32, 16))
    np.testing.assert_array_equal(out, a.astype(np.int64) @ b.astype(np.int64) + c)


def test_plan_gives_every_acc_register_a_chain_over_all_of_k():
    a_lay, b_lay = operands()
    chains, c_rep = plan_dot_fma(a_lay.to_linear_layout([32, 8]),
                                 b_lay.to_linear_layout([8, 32]),
                                 BLOCKED.to_linear_layout([32, 32]), 8)
    # 2x2 per thread, 4x8 lanes, 2x2 warps cover 16x32: two repeats along M, 8 registers.
    assert len(chains) == len(c_rep) == 8
    assert all(len(ch.ks) == 8 for ch in chains)


def test_plan_rejects_operands_that_do_not_broadcast_along_k():
    other = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    _, b_lay = operands()
    with pytest.raises(ValueError, match="must hold its accumulator's rows/columns"):
        plan_dot_fma(DotOperandLayout(0, other, 0).to_linear_layout([32, 8]),
                     b_lay.to_linear_layout([8, 32]), BLOCKED.to_linear_layout([32, 32]), 8)


def test_verifier_names_the_expected_operand_layout_and_types():
    a_lay, b_lay = operands()
    with pytest.raises(VerificationError, match=re.escape(
            "b must have layout DotOperandLayout(operand_index=1, parent=BlockedLayout(")):
        matmul_kernel(DotFmaOp.build, float32, float32, (32, 32, 8), a_lay,
                      DotOperandLayout(1, BLOCKED, 2), BLOCKED)
    with pytest.raises(VerificationError, match="not a widening"):
        matmul_kernel(DotFmaOp.build, float32, float16, (32, 32, 8), a_lay, b_lay, BLOCKED)


@pytest.mark.parametrize("elem,acc_elem,instrs", [
    (float32, float32, {r"fma\.rn\.f32": 1}),
    (float16, float32, {r"fma\.rn\.f32": 1}),
    (float16, float16, {r"fma\.rn\.f16\s": 1, r"fma\.rn\.f16x2": 2}),
    (int8, int32, {r"mad\.lo\.s32": 1, r"mul\.wide\.s16": 1}),  # LLVM narrows i8 products
])
def test_ptx_is_one_multiply_add_per_acc_register_and_k(elem, acc_elem, instrs):
    a_lay, b_lay = operands()
    mod = matmul_kernel(DotFmaOp.build, elem, acc_elem, (32, 32, 8), a_lay, b_lay, BLOCKED)
    ptx = compile_ptx(mod)
    for target in ("sm_90a", "sm_80"):
        found = sum(n * len(re.findall(pattern, ptx[target])) for pattern, n in instrs.items())
        assert found == 8 * 8, (target, found)  # 8 acc registers x K = 8
