"""The Blackwell GEMM structure: a 1-warp TMA loader and a 1-warp MMA issuer in worker
partitions feed a STAGES-deep ring; the default warps wait for the accumulator and store it.
Interpreter numerics under several seeds, and the sm_100a cubin (tensor memory descriptors
captured by worker partitions)."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout, mbarrier, tcgen05_commit,
                                             tcgen05_mma, tma)
from gluon.nvidia.blackwell import TensorDescriptor


@gluon.jit
def _loader(a_desc, b_desc, a_ring, b_ring, ready, empty, K_TILES: gl.constexpr,
            STAGES: gl.constexpr):
    BK: gl.constexpr = a_desc.block_shape[1]
    for i in range(K_TILES):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # the first round passes
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(a_desc, [0, i * BK], ready.index(s), a_ring.index(s))
        tma.async_copy_global_to_shared(b_desc, [0, i * BK], ready.index(s), b_ring.index(s))


@gluon.jit
def _mma_issuer(a_ring, b_ring, ready, empty, acc, done, K_TILES: gl.constexpr,
                STAGES: gl.constexpr):
    for i in range(K_TILES):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        tcgen05_mma(a_ring.index(s), b_ring.index(s).permute((1, 0)), acc, use_acc=i > 0,
                    mbarriers=[empty.index(s)])  # frees the stage once the MMA read it
    tcgen05_commit(done)


@gluon.jit
def _epilogue(acc, done, out_ptr, BM: gl.constexpr, BN: gl.constexpr):
    mbarrier.wait(done, 0)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(BM, BN), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [BM, BN], tmem_layout, gl.num_warps())
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :],
             gl.convert_layout(acc.load(reg), blocked))


@gluon.jit
def ws_matmul_kernel(a_desc, b_desc, out_ptr, K_TILES: gl.constexpr, STAGES: gl.constexpr):
    BM: gl.constexpr = a_desc.block_shape[0]
    BN: gl.constexpr = b_desc.block_shape[0]
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape,
                                       a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape,
                                       b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    mbarrier.init(done, count=1)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(BM, BN), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], tmem_layout)
    gl.warp_specialize([(_epilogue, (acc, done, out_ptr, BM, BN)),
                        (_loader, (a_desc, b_desc, a_ring, b_ring, ready, empty, K_TILES,
                                   STAGES)),
                        (_mma_issuer, (a_ring, b_ring, ready, empty, acc, done, K_TILES,
                                       STAGES))],
                       [1, 1], [24, 24])


def setup(k_tiles, bm=128, bn=64, bk=64):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((bm, bk * k_tiles)).astype(np.float16)
    b_nk = rng.standard_normal((bn, bk * k_tiles)).astype(np.float16)
    layout = gl.NVMMASharedLayout(128, 16)
    return (a, b_nk, TensorDescriptor.from_tensor(a, [bm, bk], layout),
            TensorDescriptor.from_tensor(b_nk, [bn, bk], layout))


@pytest.mark.parametrize("seed", ["0", "1", "9"])
def test_warp_specialized_tcgen05_matmul(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    a, b_nk, a_desc, b_desc = setup(5)
    out = np.full((128, 64), np.nan, np.float32)
    ws_matmul_kernel[(1,)](a_desc, b_desc, out, K_TILES=5, STAGES=2)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b_nk.astype(np.float32).T,
                               rtol=1e-4, atol=1e-3)


def test_warp_specialized_tcgen05_matmul_compiles_for_sm100a():
    _, _, a_desc, b_desc = setup(5)
    comp = gluon.compile(ws_matmul_kernel, {"a_desc": a_desc, "b_desc": b_desc,
                                            "out_ptr": "*fp32:16"},
                         dict(K_TILES=5, STAGES=2), target="sm_100a", num_warps=4)
    ptx = comp.asm["ptx"]
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    assert "tcgen05.ld.sync.aligned.32x32b" in ptx
    assert ptx.count("tcgen05.alloc.cta_group::1") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1") == 1
    assert comp.asm["cubin"]
