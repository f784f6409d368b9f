"""Thread-block cluster kernels shared by the interpreter tests (test_clusters.py) and the GPU
test (tests/gpu/test_clusters_gpu.py): a 2-CTA cluster GEMM whose A tile is multicast (each
CTA loads half of its rows for both), and small kernels around the cluster barrier and remote
mbarrier arrivals."""

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import (cluster, fence_async_shared, mbarrier, tma,
                                          warpgroup_mma, warpgroup_mma_wait)


@gluon.jit
def multicast_gemm_kernel(a_desc, b_desc, c_ptr, N, K, SYNC_EACH_STEP: gl.constexpr = True):
    """C = A @ B. A program is a cluster of num_ctas CTAs sharing a BM-row band of A: CTA r
    computes the BN columns (program_id(1) * num_ctas + r) of C. The A tile of each K step is
    loaded once for the cluster (`multicast=True`: each CTA fetches BM / num_ctas rows for
    all); each CTA loads its own B tile."""
    BM: gl.constexpr = a_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    BN: gl.constexpr = b_desc.block_shape[1]
    rank = cluster.cta_rank()
    off_m = gl.program_id(0) * BM
    off_n = (gl.program_id(1) * gl.num_ctas() + rank) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    # Peers signal this barrier and write a_smem: they may only once it is initialized.
    fence_async_shared(cluster=True)
    cluster.barrier()
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
    acc = gl.zeros([BM, BN], gl.float32, layout=acc_layout)
    phase = 0
    for k in range(0, K, BK):
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [off_m, k], bar, a_smem, multicast=True)
        tma.async_load(b_desc, [k, off_n], bar, b_smem)
        mbarrier.wait(bar, phase)
        phase ^= 1
        acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        if SYNC_EACH_STEP:
            # The next step's multicast writes every CTA's a_smem: all must be done reading.
            cluster.barrier()
    cluster.barrier()  # no CTA leaves while a peer may still write its shared memory
    mbarrier.invalidate(bar)
    rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, acc_layout))
    cols = off_n + gl.arange(0, BN, gl.SliceLayout(0, acc_layout))
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


@gluon.jit
def cluster_ids_kernel(out):
    """out[program * num_ctas + rank] = 10 * program + rank, after a cluster barrier."""
    rank = cluster.cta_rank()
    cluster.arrive()
    cluster.wait()
    gl.store(out + gl.program_id(0) * gl.num_ctas() + rank, gl.program_id(0) * 10 + rank)
    gl.barrier(cluster=True)


@gluon.jit
def lonely_cluster_barrier_kernel(out):
    """CTA 0 waits at a cluster barrier CTA 1 never reaches: a deadlock."""
    if cluster.cta_rank() == 0:
        cluster.barrier()
    gl.store(out + cluster.cta_rank(), 1)


@gluon.jit
def gather_arrivals_kernel(out, COUNT: gl.constexpr):
    """Every CTA arrives on CTA 0's barrier (`from_cta=0`); CTA 0 waits for COUNT arrivals,
    then writes how many CTAs there are."""
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=COUNT)
    cluster.barrier()
    mbarrier.arrive(bar, from_cta=0)
    if cluster.cta_rank() == 0:
        mbarrier.wait(bar, 0)
        gl.store(out + gl.program_id(0), gl.num_ctas())
    cluster.barrier()


@gluon.jit
def early_multicast_kernel(a_desc):
    """A multicast before the cluster barrier that makes the peers' barriers ready."""
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], bar, a_smem, multicast=True)
    mbarrier.wait(bar, 0)
    cluster.barrier()


@gluon.jit
def _multicast_loader(a_desc, smem, ready, empty, STEPS: gl.constexpr):
    for i in range(STEPS):
        mbarrier.wait(empty, (i & 1) ^ 1)  # every CTA's consumer released the slot
        mbarrier.expect(ready, a_desc.block_type.nbytes)
        tma.async_load(a_desc, [i * a_desc.block_shape[0], 0], ready, smem, multicast=True)
    # The peers' last releases arrive here: wait for them before this CTA may leave.
    mbarrier.wait(empty, (STEPS & 1) ^ 1)


@gluon.jit
def _summing_consumer(a_desc, smem, ready, empty, out, STEPS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    BM: gl.constexpr = a_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    acc = gl.zeros([BM, BK], gl.float32, layout)
    for i in range(STEPS):
        mbarrier.wait(ready, i & 1)
        acc += smem.load(layout).to(gl.float32)
        # Every CTA's loader multicasts into this CTA's smem: release it to all of them.
        mbarrier.arrive(empty, multicast_cta=gl.num_ctas() - 1)
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BK, gl.SliceLayout(0, layout))
    base = (gl.program_id(0) * gl.num_ctas() + cluster.cta_rank()) * BM * BK
    gl.store(out + base + rows[:, None] * BK + cols[None, :], acc)


@gluon.jit
def multicast_pipeline_kernel(a_desc, out, STEPS: gl.constexpr):
    """Warp-specialized: a 1-warp loader multicasts STEPS tiles of A (one slot, each CTA
    fetching a slice for all); the default warps sum them. Every CTA's sum is the same; the
    empty barrier counts one release per CTA of the cluster (`multicast_cta` arrivals)."""
    smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(ready, count=1)
    mbarrier.init(empty, count=gl.num_ctas())
    fence_async_shared(cluster=True)
    cluster.barrier()  # the worker warps take part too (before the split)
    gl.warp_specialize([(_summing_consumer, (a_desc, smem, ready, empty, out, STEPS)),
                        (_multicast_loader, (a_desc, smem, ready, empty, STEPS))], [1], [24])
