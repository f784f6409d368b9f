"""Deliberately broken warp-specialized kernels for the happens-before race detector: each
misses one mbarrier edge between two partitions' shared-memory accesses."""

from __future__ import annotations

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

BLOCKED = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])       # 4 warps
BLOCKED_1W = gl.BlockedLayout([1, 8], [4, 8], [1, 1], [1, 0])    # 1 warp
SMEM = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])


@gluon.jit
def _offsets(layout: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr):
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    return gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0)


# ---- a TMA write read by another partition that waits on the wrong barrier -----------------

@gluon.jit
def _reads_without_waiting_on_ready(smem, ready, go, out_ptr):
    mbarrier.wait(go, 0)  # orders the read after `go`, but not after the TMA load
    x = smem.load(BLOCKED)  # the unordered read
    gl.store(out_ptr + _offsets(BLOCKED, 64, 64), x)


@gluon.jit
def _loads_then_waits_itself(in_desc, smem, ready, go):
    mbarrier.arrive(go)
    mbarrier.expect(ready, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [0, 0], ready, smem)  # the TMA write
    mbarrier.wait(ready, 0)


@gluon.jit
def tma_read_without_wait_kernel(in_desc, out_ptr):
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # hb bars
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_reads_without_waiting_on_ready, (smem, bars.index(1), bars.index(0),
                                                          out_ptr)),
                        (_loads_then_waits_itself, (in_desc, smem, bars.index(1),
                                                    bars.index(0)))],
                       [1], [24])


# ---- a store that no arrive publishes ----------------------------------------------------

@gluon.jit
def _writes_and_leaves(smem, done, ARRIVE: gl.constexpr):
    smem.store(gl.full([32, 32], 1.0, gl.float32, BLOCKED))  # the unpublished write
    if ARRIVE:
        mbarrier.arrive(done)  # publishes it, but the reader does not wait


@gluon.jit
def _reads_the_unpublished(smem, done, out_ptr):
    x = smem.load(BLOCKED_1W)  # reads what no arrive published
    gl.store(out_ptr + _offsets(BLOCKED_1W, 32, 32), x)


@gluon.jit
def store_without_arrive_kernel(out_ptr, ARRIVE: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # done bar
    mbarrier.init(done, count=1)
    gl.warp_specialize([(_writes_and_leaves, (smem, done, ARRIVE)),
                        (_reads_the_unpublished, (smem, done, out_ptr))], [1], [24])


# ---- a consumer that frees its slot before it reads it (write after read) --------------------

@gluon.jit
def _producer_refills(smem, ready, empty):
    smem.store(gl.full([32, 32], 1.0, gl.float32, BLOCKED))
    mbarrier.arrive(ready)
    mbarrier.wait(empty, 0)
    smem.store(gl.full([32, 32], 2.0, gl.float32, BLOCKED))  # the refill


@gluon.jit
def _consumer_frees_too_early(smem, ready, empty, out_ptr, FIXED: gl.constexpr):
    mbarrier.wait(ready, 0)
    if not FIXED:
        mbarrier.arrive(empty)  # frees the slot before reading it
    x = smem.load(BLOCKED_1W)  # the read the refill races with
    if FIXED:
        mbarrier.arrive(empty)
    gl.store(out_ptr + _offsets(BLOCKED_1W, 32, 32), x)


@gluon.jit
def early_release_kernel(out_ptr, FIXED: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # war bars
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_producer_refills, (smem, bars.index(0), bars.index(1))),
                        (_consumer_frees_too_early, (smem, bars.index(0), bars.index(1),
                                                     out_ptr, FIXED))], [1], [24])


# ---- an MMA consumer that frees its slot before the wgmma reads it ---------------------------

@gluon.jit
def _tma_refills(in_desc, ring, ready, empty):
    for i in range(2):
        mbarrier.wait(empty, (i & 1) ^ 1)
        mbarrier.expect(ready, in_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(in_desc, [i * 64, 0], ready, ring)  # the TMA refill


@gluon.jit
def _mma_frees_too_early(ring, b_s, ready, empty, out_ptr, FIXED: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 32, 16])
    acc = gl.zeros([64, 32], gl.float32, layout=acc_layout)
    for i in range(2):
        mbarrier.wait(ready, i & 1)
        if not FIXED:
            mbarrier.arrive(empty)  # frees the slot before the wgmma reads it
        acc = warpgroup_mma(ring, b_s, acc, is_async=True)  # the wgmma read
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        if FIXED:
            mbarrier.arrive(empty)
    gl.store(out_ptr + _offsets(acc_layout, 64, 32), acc)


@gluon.jit
def mma_early_release_kernel(in_desc, b_ptr, out_ptr, FIXED: gl.constexpr):
    ring = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    b_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16)
    b_s = gl.allocate_shared_memory(gl.float16, [16, 32], b_layout,
                                    gl.load(b_ptr + _offsets(BLOCKED, 16, 32)))
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_mma_frees_too_early, (ring, b_s, bars.index(0), bars.index(1),
                                                out_ptr, FIXED)),
                        (_tma_refills, (in_desc, ring, bars.index(0), bars.index(1)))],
                       [1], [24])
