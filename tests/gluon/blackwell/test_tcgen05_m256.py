"""tcgen05_mma with M = 256 on one CTA (upstream's tutorial 06 `small_mma` with M = 256):
one instruction per 128-row block of the accumulator, each writing that block's TMEM
columns and reading its rows of A, as Triton lowers it."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             fence_async_shared, get_tmem_reg_layout, mbarrier,
                                             tcgen05_commit, tcgen05_mma)
from shared_codegen.frontend.errors import CompilationError

M, N, K = 256, 64, 32


@gluon.jit
def _offsets(R: gl.constexpr, C: gl.constexpr, layout: gl.constexpr):
    r = gl.arange(0, R, layout=gl.SliceLayout(1, layout))
    c = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    return gl.expand_dims(r, 1) * C + gl.expand_dims(c, 0)


@gluon.jit
def m256_kernel(a_ptr, b_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr,
                BLOCK_M: gl.constexpr, LHS_IN_TMEM: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(64, 16)
    a = gl.allocate_shared_memory(gl.float16, [M, K], smem, gl.load(a_ptr + _offsets(M, K, blocked)))
    b = gl.allocate_shared_memory(gl.float16, [K, N], smem, gl.load(b_ptr + _offsets(K, N, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(BLOCK_M, N), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    if LHS_IN_TMEM:
        lhs_layout: gl.constexpr = TensorMemoryLayout(block=(BLOCK_M, K), col_stride=1)
        lhs = allocate_tensor_memory(gl.float16, [M, K], lhs_layout)
        lhs.store(a.load(get_tmem_reg_layout(gl.float16, [M, K], lhs_layout, gl.num_warps())))
        tcgen05_mma(lhs, b, acc, use_acc=False)
    else:
        tcgen05_mma(a, b, acc, use_acc=False)
    tcgen05_commit(bar)
    mbarrier.wait(bar, 0)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], tmem_layout, gl.num_warps())
    gl.store(out_ptr + _offsets(M, N, blocked), gl.convert_layout(acc.load(reg), blocked))


def _inputs():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


@pytest.mark.parametrize("lhs_in_tmem", [False, True])
def test_m256_matches_numpy_in_the_interpreter(lhs_in_tmem):
    a, b, want = _inputs()
    out = np.zeros((M, N), np.float32)
    m256_kernel[(1,)](a, b, out, M, N, K, 128, lhs_in_tmem)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "out_ptr": "*fp32:16"}


@pytest.mark.parametrize("lhs_in_tmem", [False, True])
def test_m256_issues_one_instruction_per_row_block_and_k_step(lhs_in_tmem):
    comp = gluon.compile(m256_kernel, SIG, dict(M=M, N=N, K=K, BLOCK_M=128,
                                                LHS_IN_TMEM=lhs_in_tmem), target="sm_100a")
    ptx = comp.asm["ptx"]
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == (M // 128) * (K // 16)
    assert comp.asm["cubin"]


def test_m256_plan_addresses_each_row_block():
    from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType, float16, float32
    from shared_codegen.layouts import NVMMASharedLayout, TensorMemoryLayout as TmemLayout
    from shared_codegen.ops.tcgen05.lowering import plan_tcgen05
    smem = NVMMASharedLayout(64, 16)
    a_ty = SharedMemoryType((M, K), float16, smem, (M, K))
    b_ty = SharedMemoryType((K, N), float16, smem, (K, N))
    d_ty = TensorMemoryType((M, N), float32, TmemLayout((128, N), 1), (M, N))
    plan = plan_tcgen05(a_ty, b_ty, d_ty)
    assert (plan.idesc >> 24) & 0x1F == 128 >> 4  # each instruction computes 128 rows
    assert sorted({s.m0 for s in plan.steps}) == [0, 128]
    # Rows 128.. of A start 128 rows further in shared memory (64-byte swizzle: 64 B a row).
    starts = {s.m0: s.a_start for s in plan.steps if s.k0 == 0}
    assert starts[128] - starts[0] == 128 * K * 2


def test_m256_with_64_row_blocks_is_refused():
    with pytest.raises(CompilationError, match=r"M a multiple of 128 with block\[0\] = 128"):
        gluon.compile(m256_kernel, SIG, dict(M=M, N=N, K=K, BLOCK_M=64, LHS_IN_TMEM=False),
                      target="sm_100a")
