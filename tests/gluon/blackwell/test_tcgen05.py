"""tcgen05 MMA and tensor memory in @gluon.jit kernels: interpreter numerics against numpy
under several completion orders, races and overflow errors word for word, and the sm_100a
PTX / cubin."""

import inspect

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             fence_async_shared, get_tmem_reg_layout,
                                             mbarrier, tcgen05_commit, tcgen05_mma)
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError
from shared_codegen.lowering.backend import parse_resource_usage


@gluon.jit
def tile_offsets(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


@gluon.jit
def tcgen05_kernel(a_ptr, b_ptr, c_ptr, out_ptr, DTYPE: gl.constexpr, M: gl.constexpr,
                   N: gl.constexpr, K: gl.constexpr, SWIZZLE: gl.constexpr,
                   USE_ACC: gl.constexpr, K_STEPS: gl.constexpr, COMMIT: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=SWIZZLE,
                                              element_bitwidth=DTYPE.primitive_bitwidth, rank=2)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], tmem_layout, gl.num_warps())
    a = gl.allocate_shared_memory(DTYPE, [M, K], smem, gl.load(a_ptr + tile_offsets(M, K, blocked)))
    b = gl.allocate_shared_memory(DTYPE, [K, N], smem, gl.load(b_ptr + tile_offsets(K, N, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    if USE_ACC:
        acc.store(gl.convert_layout(gl.load(c_ptr + tile_offsets(M, N, blocked)), reg))
    KS: gl.constexpr = K // K_STEPS
    for i in gl.static_range(K_STEPS):  # chained MMAs on one accumulator
        if COMMIT:
            tcgen05_mma(a.slice(i * KS, KS, dim=1), b.slice(i * KS, KS, dim=0), acc,
                        use_acc=USE_ACC or i > 0)
        else:
            tcgen05_mma(a.slice(i * KS, KS, dim=1), b.slice(i * KS, KS, dim=0), acc,
                        use_acc=USE_ACC or i > 0, mbarriers=[bar],
                        mbarrier_preds=[i == K_STEPS - 1])
    if COMMIT:
        tcgen05_commit(bar)
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + tile_offsets(M, N, blocked), gl.convert_layout(acc.load(reg), blocked))
    mbarrier.invalidate(bar)


DTYPES = {"fp16": (gl.float16, np.float16), "bf16": (gl.bfloat16, ml_dtypes.bfloat16)}


def run(kind="fp16", m=128, n=64, k=64, use_acc=False, k_steps=1, commit=False, seed=0):
    dtype, np_dtype = DTYPES[kind]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32).astype(np_dtype)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(np_dtype)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    swizzle = min(128, (k // k_steps) * 2, n * 2)
    tcgen05_kernel[(1,)](a, b, c, out, DTYPE=dtype, M=m, N=n, K=k, SWIZZLE=swizzle,
                         USE_ACC=use_acc, K_STEPS=k_steps, COMMIT=commit)
    want = a.astype(np.float32) @ b.astype(np.float32) + (c if use_acc else 0)
    return out, want


@pytest.mark.parametrize("seed", ["0", "1", "7"])
@pytest.mark.parametrize("kind,m,n,k,use_acc,k_steps,commit", [
    ("fp16", 128, 64, 64, False, 1, False),
    ("bf16", 128, 32, 64, True, 2, False),
    ("fp16", 64, 64, 32, False, 2, True),
])
def test_tcgen05_matmul_matches_numpy(monkeypatch, seed, kind, m, n, k, use_acc, k_steps,
                                      commit):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    out, want = run(kind, m, n, k, use_acc, k_steps, commit)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
