"""A Blackwell matmul the way Gluon kernels write it: TMA loads into NVMMA shared memory,
tcgen05_mma into tensor memory with its completion on an mbarrier, a K loop with phases, the
accumulator loaded once at the end. Interpreter numerics under several completion orders
(SC_INTERPRET_SEED) and the sm_100a compile."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout, mbarrier, tcgen05_mma, tma)
from gluon.nvidia.blackwell import TensorDescriptor


@gluon.jit
def matmul_kernel(a_desc, b_desc, out_ptr, K, N: gl.constexpr,
                  WAIT_MMA: gl.constexpr = True):
    BM: gl.constexpr = a_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    BN: gl.constexpr = b_desc.block_shape[0]  # b is [N, K], K contiguous
    m = gl.program_id(0) * BM
    n = gl.program_id(1) * BN
    a_s = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(loaded, count=1)
    mbarrier.init(done, count=1)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(BM, BN), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], tmem_layout)
    phase = 0
    for k in range(0, K, BK):
        mbarrier.expect(loaded, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(a_desc, [m, k], loaded, a_s)
        tma.async_copy_global_to_shared(b_desc, [n, k], loaded, b_s)
        mbarrier.wait(loaded, phase)
        tcgen05_mma(a_s, b_s.permute((1, 0)), acc, use_acc=k > 0, mbarriers=[done])
        if WAIT_MMA:  # the MMA is done reading a_s / b_s before the next load
            mbarrier.wait(done, phase)
        phase ^= 1
    mbarrier.invalidate(loaded)
    mbarrier.invalidate(done)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [BM, BN], tmem_layout, gl.num_warps())
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    rows = m + gl.arange(0, BM, layout=gl.SliceLayout(1, blocked))
    cols = n + gl.arange(0, BN, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * N + cols[None, :],
             gl.convert_layout(acc.load(reg), blocked))


def descriptors(a, b_nk, bm, bn, bk):
    layout = gl.NVMMASharedLayout(min(128, bk * a.itemsize), 8 * a.itemsize)
    return (TensorDescriptor.from_tensor(a, [bm, bk], layout),
            TensorDescriptor.from_tensor(b_nk, [bn, bk], layout))


@pytest.mark.parametrize("seed", ["0", "1", "4"])
def test_tma_tcgen05_matmul_matches_numpy(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    rng = np.random.default_rng(0)
    m, n, k, bm, bn, bk = 256, 128, 192, 128, 64, 64
    a = rng.standard_normal((m, k)).astype(np.float16)
    b_nk = rng.standard_normal((n, k)).astype(np.float16)
    out = np.full((m, n), np.nan, np.float32)
    a_desc, b_desc = descriptors(a, b_nk, bm, bn, bk)
    matmul_kernel[(m // bm, n // bn)](a_desc, b_desc, out, k, N=n)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b_nk.astype(np.float32).T,
                               rtol=1e-4, atol=1e-3)


def test_tma_tcgen05_matmul_compiles_for_sm100a():
    a, b_nk = np.zeros((256, 192), np.float16), np.zeros((128, 192), np.float16)
    a_desc, b_desc = descriptors(a, b_nk, 128, 64, 64)
    comp = gluon.compile(matmul_kernel, {"a_desc": a_desc, "b_desc": b_desc,
                                         "out_ptr": "*fp32:16", "K": "i32"}, dict(N=128),
                         target="sm_100a", num_warps=4)
    ptx = comp.asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster" in ptx
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 4  # BK = 64: four K steps
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one" in ptx
    assert comp.asm["cubin"]


def test_refilling_shared_memory_an_mma_still_reads_is_a_race():
    import inspect
    from shared_codegen.interpreter.memory import InterpreterError
    a, b_nk = np.ones((128, 128), np.float16), np.ones((64, 128), np.float16)
    a_desc, b_desc = descriptors(a, b_nk, 128, 64, 64)
    with pytest.raises(InterpreterError) as info:
        matmul_kernel[(1, 1)](a_desc, b_desc, np.zeros((128, 64), np.float32), 128, N=64,
                              WAIT_MMA=False)
    lines, first = inspect.getsourcelines(matmul_kernel.fn)
    mma = first + next(i for i, x in enumerate(lines) if "tcgen05_mma(a_s" in x)
    load = first + next(i for i, x in enumerate(lines) if "[m, k], loaded, a_s)" in x)
    text = str(info.value)
    assert f"{__file__}:{load}: race: this TMA load targets " \
           f"shared memory that the tcgen05_mma at {__file__}:{mma} may still be reading; " \
           f"wait on the mbarrier its completion is committed to (tcgen05_commit or " \
           f"mbarriers=[...]) first" in text, text


def tf32(x):
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("kind", ["tf32", "fp8e4nv"])
def test_tf32_and_fp8_kinds(monkeypatch, kind):
    import ml_dtypes
    monkeypatch.setenv("SC_INTERPRET_SEED", "3")
    np_dtype, bk = {"tf32": (np.float32, 32), "fp8e4nv": (ml_dtypes.float8_e4m3fn, 128)}[kind]
    rng = np.random.default_rng(2)
    m, n, k = 128, 64, 2 * bk
    a = rng.standard_normal((m, k)).astype(np.float32).astype(np_dtype)
    b_nk = rng.standard_normal((n, k)).astype(np.float32).astype(np_dtype)
    out = np.zeros((m, n), np.float32)
    a_desc, b_desc = descriptors(a, b_nk, 128, 64, bk)
    matmul_kernel[(1, 1)](a_desc, b_desc, out, k, N=n)
    want = a.astype(np.float32) @ b_nk.astype(np.float32).T
    if kind == "tf32":
        want = tf32(a) @ tf32(b_nk).T
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
    comp = gluon.compile(matmul_kernel, {"a_desc": a_desc, "b_desc": b_desc,
                                         "out_ptr": "*fp32:16", "K": "i32"}, dict(N=n),
                         target="sm_100a", num_warps=4)
    ptx_kind = {"tf32": "tf32", "fp8e4nv": "f8f6f4"}[kind]
    assert comp.asm["ptx"].count(f"tcgen05.mma.cta_group::1.kind::{ptx_kind}") == 4
    assert comp.asm["cubin"]
