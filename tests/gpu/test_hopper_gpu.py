"""Hopper wgmma on the GPU: every operand source and type against torch (fp32 reference)."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

pytestmark = pytest.mark.gpu


@gluon.jit
def _offsets(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


@gluon.jit
def wgmma_tile(a_ptr, b_ptr, out_ptr, DTYPE: gl.constexpr, M: gl.constexpr, N: gl.constexpr,
               K: gl.constexpr, SWIZZLE: gl.constexpr, A_IN_REGS: gl.constexpr,
               B_K_MAJOR: gl.constexpr, IS_ASYNC: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, N, 16])
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=SWIZZLE,
                                              element_bitwidth=DTYPE.primitive_bitwidth, rank=2)
    if A_IN_REGS:
        a_layout: gl.constexpr = gl.DotOperandLayout(
            operand_index=0, parent=acc_layout, k_width=32 // DTYPE.primitive_bitwidth)
        a = gl.load(a_ptr + _offsets(M, K, a_layout))
    else:
        a = gl.allocate_shared_memory(DTYPE, [M, K], smem, gl.load(a_ptr + _offsets(M, K, blocked)))
    if B_K_MAJOR:
        b = gl.allocate_shared_memory(DTYPE, [N, K], smem, gl.load(b_ptr + _offsets(N, K, blocked)))
        b = b.permute((1, 0))
    else:
        b = gl.allocate_shared_memory(DTYPE, [K, N], smem, gl.load(b_ptr + _offsets(K, N, blocked)))
    # Generic-proxy stores must be visible to the async proxy that wgmma reads through.
    fence_async_shared()
    acc = gl.zeros([M, N], gl.float32, layout=acc_layout)
    acc = warpgroup_mma(a, b, acc, is_async=IS_ASYNC)
    if IS_ASYNC:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    gl.store(out_ptr + _offsets(M, N, acc_layout), acc)


CASES = [  # dtype, N, K, a_in_regs, b_k_major, is_async
    ("float16", 128, 64, False, False, False), ("float16", 64, 64, False, True, True),
    ("bfloat16", 128, 64, True, False, False), ("bfloat16", 256, 64, False, True, True),
    ("float8_e4m3fn", 128, 64, False, True, False), ("float32", 64, 32, False, True, False),
]


@pytest.mark.parametrize("dtype,n,k,a_in_regs,b_k_major,is_async", CASES)
def test_wgmma_tile_matches_torch(dtype, n, k, a_in_regs, b_k_major, is_async):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, dtype)
    gdt = {"float16": gl.float16, "bfloat16": gl.bfloat16, "float8_e4m3fn": gl.float8e4nv,
           "float32": gl.float32}[dtype]
    m = 64
    a = torch.randn(m, k, device="cuda").to(tdt)
    b = torch.randn(k, n, device="cuda").to(tdt)
    out = torch.empty(m, n, device="cuda")
    swizzle = min(128, k * a.element_size())
    wgmma_tile[(1,)](a, b.t().contiguous() if b_k_major else b, out, DTYPE=gdt, M=m, N=n, K=k,
                     SWIZZLE=swizzle, A_IN_REGS=a_in_regs, B_K_MAJOR=b_k_major,
                     IS_ASYNC=is_async, num_warps=4)
    want = a.float() @ b.float()
    tol = {"float16": 1e-2, "bfloat16": 5e-2, "float8_e4m3fn": 1e-1, "float32": 5e-2}[dtype]
    torch.testing.assert_close(out, want, atol=tol * k ** 0.5, rtol=tol)


@pytest.mark.parametrize("a_in_regs", [False, True])
def test_wgmma_with_m_64_on_8_warps_matches_torch(a_in_regs):
    # Triton's rule: the second warpgroup computes a copy of the 64-row tile.
    torch = pytest.importorskip("torch")
    m, n, k = 64, 128, 64
    a = torch.randn(m, k, device="cuda").half()
    b = torch.randn(k, n, device="cuda").half()
    out = torch.empty(m, n, device="cuda")
    wgmma_tile[(1,)](a, b, out, DTYPE=gl.float16, M=m, N=n, K=k, SWIZZLE=128,
                     A_IN_REGS=a_in_regs, B_K_MAJOR=False, IS_ASYNC=True, num_warps=8)
    torch.testing.assert_close(out, a.float() @ b.float(), atol=1e-2 * k ** 0.5, rtol=1e-2)
