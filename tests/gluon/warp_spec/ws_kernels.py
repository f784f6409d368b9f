"""Warp-specialized Gluon kernels for the tests, and a helper to find their source lines (the
interpreter's reports name them)."""

from __future__ import annotations

import inspect

import numpy as np

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluon.nvidia.hopper import TensorDescriptor
from gluon.warp_spec import pingpong, pipeline

BLOCKED = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])       # 4 warps
BLOCKED_1W = gl.BlockedLayout([1, 8], [4, 8], [1, 1], [1, 0])    # 1 warp
NVMMA128 = gl.NVMMASharedLayout(128, 16)


def line_of(text: str) -> str:
    """`file:line` of the (unique) line of this module containing `text`."""
    lines, _ = inspect.findsource(inspect.getmodule(line_of))
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return f"{__file__}:{hits[0]}"


def desc(array, block, layout=NVMMA128):
    return TensorDescriptor.from_tensor(array, block, layout)


def arange2d(rows, cols, dtype=np.float16):
    return (np.arange(rows * cols) % 2039).reshape(rows, cols).astype(dtype)


# ---- producer / consumer, phases counted by hand ---------------------------------------------

@gluon.jit
def _tma_producer(in_desc, ring, ready, empty, NUM_TILES: gl.constexpr, STAGES: gl.constexpr):
    BM: gl.constexpr = in_desc.block_shape[0]
    for i in range(NUM_TILES):
        s = i % STAGES
        # A fresh barrier's "previous" phase (parity 1) counts as complete: the first round
        # of waits on `empty` returns at once.
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), in_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(in_desc, [i * BM, 0], ready.index(s), ring.index(s))


@gluon.jit
def _add_one_consumer(ring, ready, empty, out_ptr, NUM_TILES: gl.constexpr,
                      STAGES: gl.constexpr):
    BM: gl.constexpr = ring.shape[1]
    BN: gl.constexpr = ring.shape[2]
    rows = gl.arange(0, BM, gl.SliceLayout(1, BLOCKED))
    cols = gl.arange(0, BN, gl.SliceLayout(0, BLOCKED))
    offs = gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0)
    for i in range(NUM_TILES):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        x = ring.index(s).load(BLOCKED)
        mbarrier.arrive(empty.index(s))
        gl.store(out_ptr + i * BM * BN + offs, x + 1)


@gluon.jit
def producer_consumer_kernel(in_desc, out_ptr, NUM_TILES: gl.constexpr, STAGES: gl.constexpr):
    """A 1-warp TMA producer fills a STAGES-deep ring; the default partition adds 1 and
    stores each tile."""
    ring = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_shape,
                                     in_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    gl.warp_specialize([(_add_one_consumer, (ring, ready, empty, out_ptr, NUM_TILES, STAGES)),
                        (_tma_producer, (in_desc, ring, ready, empty, NUM_TILES, STAGES))],
                       [1], [24])


# ---- a deadlock: each partition waits for the other to arrive first -------------------------

@gluon.jit
def _waits_for_worker(mine, theirs):
    mbarrier.wait(mine, 0)  # the default partition's wait
    mbarrier.arrive(theirs)


@gluon.jit
def _waits_for_default(mine, theirs):
    mbarrier.wait(mine, 0)  # the worker's wait
    mbarrier.arrive(theirs)


@gluon.jit
def deadlock_kernel():
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # 2 bars
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_waits_for_worker, (bars.index(0), bars.index(1))),  # the fork
                        (_waits_for_default, (bars.index(1), bars.index(0)))], [1], [24])


# ---- a race: the consumer reads the ring before the TMA load's barrier says so ---------------

@gluon.jit
def _early_reader(smem, go, full, out_ptr):
    mbarrier.wait(go, 0)
    x = smem.load(BLOCKED)  # reads before waiting on `full`
    mbarrier.wait(full, 0)
    rows = gl.arange(0, 64, gl.SliceLayout(1, BLOCKED))
    cols = gl.arange(0, 64, gl.SliceLayout(0, BLOCKED))
    gl.store(out_ptr + gl.expand_dims(rows, 1) * 64 + gl.expand_dims(cols, 0), x)


@gluon.jit
def _loader(in_desc, smem, go, full):
    mbarrier.arrive(go)
    mbarrier.expect(full, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [0, 0], full, smem)  # the racing load


@gluon.jit
def racy_kernel(in_desc, out_ptr):
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # race bars
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_early_reader, (smem, bars.index(0), bars.index(1), out_ptr)),
                        (_loader, (in_desc, smem, bars.index(0), bars.index(1)))], [1], [24])


# ---- layouts, num_warps and results of partitions --------------------------------------------

@gluon.jit
def _default_sum(x_ptr):
    offs = gl.arange(0, 128, gl.SliceLayout(0, BLOCKED))
    return gl.sum(gl.load(x_ptr + offs), axis=0), gl.num_warps()


@gluon.jit
def _worker_store(x_ptr, out_ptr, value):
    # 1-warp layout: this partition's warps, not the kernel's.
    offs = gl.arange(0, 32, gl.SliceLayout(0, BLOCKED_1W))
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) * value + gl.num_warps())
    gl.thread_barrier()


@gluon.jit
def results_kernel(x_ptr, out_ptr, scale):
    total, warps = gl.warp_specialize([(_default_sum, (x_ptr,)),
                                       (_worker_store, (x_ptr, out_ptr + 32, scale * 2))],
                                      [1], [32])
    gl.store(out_ptr + 64, total)
    gl.store(out_ptr + 65, warps)


# ---- what a worker cannot take -----------------------------------------------------------------

@gluon.jit
def _takes_tensor(x):
    pass


@gluon.jit
def _nothing():
    pass


@gluon.jit
def tensor_capture_kernel(x_ptr):
    x = gl.load(x_ptr + gl.arange(0, 128, gl.SliceLayout(0, BLOCKED)))
    gl.warp_specialize([(_nothing, ()), (_takes_tensor, (x,))], [1], [24])


@gluon.jit
def bad_regs_kernel(REGS: gl.constexpr, WARPS: gl.constexpr):
    gl.warp_specialize([(_nothing, ()), (_nothing, ())], [WARPS], [REGS])


@gluon.jit
def two_workers_kernel():
    gl.warp_specialize([(_nothing, ()), (_nothing, ()), (_nothing, ())], [1, 1], [24, 40])




# ---- the pipeline helper -----------------------------------------------------------------------

@gluon.jit
def _pipe_producer(in_desc, ring, pipe, NUM_TILES: gl.constexpr):
    BM: gl.constexpr = in_desc.block_shape[0]
    for i in range(NUM_TILES):
        s, ready = pipeline.producer_acquire(pipe, i)
        mbarrier.expect(ready, in_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(in_desc, [i * BM, 0], ready, ring.index(s))


@gluon.jit
def _pipe_consumer(ring, pipe, out_ptr, NUM_TILES: gl.constexpr):
    BM: gl.constexpr = ring.shape[1]
    BN: gl.constexpr = ring.shape[2]
    rows = gl.arange(0, BM, gl.SliceLayout(1, BLOCKED))
    cols = gl.arange(0, BN, gl.SliceLayout(0, BLOCKED))
    offs = gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0)
    acc = gl.zeros([BM, BN], gl.float32, BLOCKED)
    for i in range(NUM_TILES):
        s = pipeline.consumer_wait(pipe, i)
        acc += ring.index(s).load(BLOCKED).to(gl.float32)
        pipeline.consumer_release(pipe, i)
    gl.store(out_ptr + offs, acc)


@gluon.jit
def pipeline_sum_kernel(in_desc, out_ptr, NUM_TILES: gl.constexpr, STAGES: gl.constexpr):
    """out = the sum of NUM_TILES row tiles, streamed through a STAGES-deep TMA ring."""
    ring = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_shape,
                                     in_desc.layout)
    pipe = pipeline.create(STAGES)
    gl.warp_specialize([(_pipe_consumer, (ring, pipe, out_ptr, NUM_TILES)),
                        (_pipe_producer, (in_desc, ring, pipe, NUM_TILES))], [1], [24])
    pipeline.invalidate(pipe)


@gluon.jit
def _register_producer(x_ptr, ring, pipe, NUM_TILES: gl.constexpr):
    offs = gl.arange(0, 32, gl.SliceLayout(0, BLOCKED_1W))
    for i in range(NUM_TILES):
        s, ready = pipeline.producer_acquire(pipe, i)
        ring.index(s).store(gl.load(x_ptr + i * 32 + offs))
        pipeline.producer_commit(pipe, i)


@gluon.jit
def _doubling_consumer(ring, pipe, out_ptr, NUM_TILES: gl.constexpr):
    offs = gl.arange(0, 32, gl.SliceLayout(0, BLOCKED))
    for i in range(NUM_TILES):
        s = pipeline.consumer_wait(pipe, i)
        x = ring.index(s).load(gl.SliceLayout(0, BLOCKED))
        pipeline.consumer_release(pipe, i)
        gl.store(out_ptr + i * 32 + offs, x * 2)


@gluon.jit
def register_pipeline_kernel(x_ptr, out_ptr, NUM_TILES: gl.constexpr, STAGES: gl.constexpr):
    """A 1-warp producer stores rows with registers, the default partition doubles them."""
    ring = gl.allocate_shared_memory(gl.float32, [STAGES, 32],
                                     gl.SwizzledSharedLayout(1, 1, 1, [0]))
    pipe = pipeline.create(STAGES)
    gl.warp_specialize([(_doubling_consumer, (ring, pipe, out_ptr, NUM_TILES)),
                        (_register_producer, (x_ptr, ring, pipe, NUM_TILES))], [1], [24])


@gluon.jit
def _tile_offsets(layout: gl.constexpr):
    """Offsets of a row-major [16, 32] tile in `layout`."""
    rows = gl.arange(0, 16, gl.SliceLayout(1, layout))
    cols = gl.arange(0, 32, gl.SliceLayout(0, layout))
    return gl.expand_dims(rows * 32, 1) + gl.expand_dims(cols, 0)


@gluon.jit
def _per_warp_register_producer(x_ptr, ring, pipe, NUM_TILES: gl.constexpr):
    offs = _tile_offsets(BLOCKED)
    for i in range(NUM_TILES):
        s, ready = pipeline.producer_acquire(pipe, i)
        ring.index(s).store(gl.load(x_ptr + i * 512 + offs))
        pipeline.producer_commit(pipe, i, per_warp=True)  # each warp its own rows


@gluon.jit
def _one_warp_doubling_consumer(ring, pipe, out_ptr, NUM_TILES: gl.constexpr):
    offs = _tile_offsets(BLOCKED_1W)
    for i in range(NUM_TILES):
        s = pipeline.consumer_wait(pipe, i)
        x = ring.index(s).load(BLOCKED_1W)
        pipeline.consumer_release(pipe, i)
        gl.store(out_ptr + i * 512 + offs, x * 2)


@gluon.jit
def per_warp_pipeline_kernel(x_ptr, out_ptr, NUM_TILES: gl.constexpr, STAGES: gl.constexpr):
    """The default partition's 4 warps store [16, 32] tiles and commit each warp on its own
    (a stage is full after 4 arrivals); a 1-warp worker doubles them."""
    ring = gl.allocate_shared_memory(gl.float32, [STAGES, 16, 32],
                                     gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    pipe = pipeline.create(STAGES, 1, 4)
    gl.warp_specialize([(_per_warp_register_producer, (x_ptr, ring, pipe, NUM_TILES)),
                        (_one_warp_doubling_consumer, (ring, pipe, out_ptr, NUM_TILES))],
                       [1], [24])


# ---- a warp-specialized wgmma tile: TMA producer, wgmma consumer -------------------------------

@gluon.jit
def _mma_loader(a_desc, b_desc, a_ring, b_ring, pipe, K_TILES: gl.constexpr):
    BK: gl.constexpr = a_desc.block_shape[1]
    for k in range(K_TILES):
        s, ready = pipeline.producer_acquire(pipe, k)
        mbarrier.expect(ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(a_desc, [0, k * BK], ready, a_ring.index(s))
        tma.async_copy_global_to_shared(b_desc, [k * BK, 0], ready, b_ring.index(s))


@gluon.jit
def _mma_consumer(a_ring, b_ring, pipe, out_ptr, K_TILES: gl.constexpr):
    BM: gl.constexpr = a_ring.shape[1]
    BN: gl.constexpr = b_ring.shape[2]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros([BM, BN], gl.float32, layout=acc_layout)
    for k in range(K_TILES):
        s = pipeline.consumer_wait(pipe, k)
        acc = warpgroup_mma(a_ring.index(s), b_ring.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        pipeline.consumer_release(pipe, k)
    rows = gl.arange(0, BM, gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, acc_layout))
    gl.store(out_ptr + gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0), acc)


@gluon.jit
def ws_matmul_kernel(a_desc, b_desc, out_ptr, K_TILES: gl.constexpr, STAGES: gl.constexpr):
    """out = A @ B for one 64 x 64 tile: a 1-warp TMA producer, a wgmma warpgroup."""
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape,
                                       a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape,
                                       b_desc.layout)
    pipe = pipeline.create(STAGES)
    gl.warp_specialize([(_mma_consumer, (a_ring, b_ring, pipe, out_ptr, K_TILES)),
                        (_mma_loader, (a_desc, b_desc, a_ring, b_ring, pipe, K_TILES))],
                       [1], [24])


# ---- the ping-pong helper ----------------------------------------------------------------------

@gluon.jit
def _take_turns(turns, log_ptr, WG: gl.constexpr, ROUNDS: gl.constexpr):
    # In its turn a partition appends its index to a base-NUM number: only the turn order
    # makes the read-modify-write of `log_ptr` safe and the digits come out 0, 1, .., NUM-1.
    NUM: gl.constexpr = turns.shape[0]
    turn = pingpong.start(turns, WG)
    for _ in range(ROUNDS):
        pingpong.wait_turn(turns, WG, turn)
        gl.store(log_ptr, gl.load(log_ptr) * NUM + WG)
        turn = pingpong.pass_turn(turns, WG, turn)


@gluon.jit
def pingpong_order_kernel(log_ptr, NUM: gl.constexpr, ROUNDS: gl.constexpr):
    """NUM partitions take ROUNDS turns each through gluon.warp_spec.pingpong."""
    turns = pingpong.create(NUM)
    parts = [(_take_turns, (turns, log_ptr, 0, ROUNDS)),
             (_take_turns, (turns, log_ptr, 1, ROUNDS))]
    if NUM == 3:
        parts = parts + [(_take_turns, (turns, log_ptr, 2, ROUNDS))]
    gl.warp_specialize(parts, [1] * (NUM - 1), [24] * (NUM - 1))
    pingpong.invalidate(turns)
