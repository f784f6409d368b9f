"""A two-CTA tcgen05 GEMM (`cta_group::2`, docs/clusters.md): each CTA of a pair loads its 128
rows of A and half of B's columns; the pair's leader issues one MMA of 256 rows for both, whose
completion is committed to both CTAs' barriers; each CTA stores its 128 rows of C."""

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             cluster, fence_async_shared, mbarrier, tcgen05_mma,
                                             tma)


@gluon.jit
def pair_gemm_kernel(a_desc, b_desc, c_ptr, N, K):
    BM: gl.constexpr = a_desc.block_shape[0]        # 128 rows per CTA
    BK: gl.constexpr = a_desc.block_shape[1]
    HALF_N: gl.constexpr = b_desc.block_shape[1]    # this CTA's columns of B
    BN: gl.constexpr = 2 * HALF_N
    rank = cluster.cta_rank()
    half = rank % 2
    pair = gl.program_id(0) * (gl.num_ctas() // 2) + rank // 2
    off_m = pair * 2 * BM + half * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    pair_loaded = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(loaded, count=1)
    mbarrier.init(pair_loaded, count=1)
    mbarrier.init(mma_done, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN],
                                 TensorMemoryLayout([BM, BN], col_stride=1, two_ctas=True))
    fence_async_shared(cluster=True)
    cluster.barrier()
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        mbarrier.expect(loaded, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, k], loaded, a_smem)
        tma.async_copy_global_to_shared(b_desc, [k, off_n + half * HALF_N], loaded, b_smem)
        mbarrier.wait(loaded, phase)
        # The odd CTA's halves are in place: tell the leader (the CTA of rank & ~1).
        mbarrier.arrive(pair_loaded, pred=half == 1, from_cta=gl.num_ctas() - 2)
        mbarrier.wait(pair_loaded, phase, pred=half == 0)
        tcgen05_mma(a_smem, b_smem, acc, use_acc=use_acc, mbarriers=[mma_done])
        mbarrier.wait(mma_done, phase)  # the leader's commit reaches both CTAs
        use_acc = True
        phase ^= 1
    reg_layout: gl.constexpr = gl.BlockedLayout([1, BN], [32, 1], [gl.num_warps(), 1], [0, 1])
    out = acc.load(reg_layout)
    rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, reg_layout))
    cols = off_n + gl.arange(0, BN, gl.SliceLayout(0, reg_layout))
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], out)
    cluster.barrier()
