"""Gluon kernels for the mbarrier / TMA tests, and helpers to find their source lines (the
interpreter's reports name them)."""

from __future__ import annotations

import inspect

import numpy as np

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluon.nvidia.hopper import TensorDescriptor

BLOCKED = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
NVMMA128 = gl.NVMMASharedLayout(128, 16)   # fp16, 128-byte swizzle
NVMMA64 = gl.NVMMASharedLayout(64, 16)


def line_of(text: str) -> str:
    """`file:line` of the (unique) line of this module containing `text`."""
    lines, _ = inspect.findsource(inspect.getmodule(line_of))
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return f"{__file__}:{hits[0]}"


def desc(array, block, layout=NVMMA128):
    return TensorDescriptor.from_tensor(array, block, layout)


# ---- mbarrier only ---------------------------------------------------------------------------

@gluon.jit
def arrivals_kernel(out_ptr, COUNT: gl.constexpr, ARRIVALS: gl.constexpr, PHASE: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # arrivals bar
    mbarrier.init(bar, count=COUNT)
    for _ in gl.static_range(ARRIVALS):
        mbarrier.arrive(bar)
    mbarrier.wait(bar, PHASE)  # the arrivals wait
    gl.store(out_ptr, 1)


@gluon.jit
def two_phases_kernel(out_ptr, STUCK: gl.constexpr = False):
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # two bars
    bar = bars.index(1)
    mbarrier.init(bar, count=2)
    mbarrier.arrive(bar, count=2)
    mbarrier.wait(bar, 0)
    mbarrier.arrive(bar, pred=False)  # skipped
    mbarrier.arrive(bar, count=2)
    mbarrier.wait(bar, 1, pred=gl.program_id(0) == 0)  # the second phase waits
    gl.store(out_ptr + gl.program_id(0), 1)
    mbarrier.wait(bar, 0, pred=STUCK)  # phase 2 has no arrivals


@gluon.jit
def over_arrive_kernel():
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.arrive(bar, count=2)  # too many


@gluon.jit
def uninitialized_wait_kernel():
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.invalidate(bar)
    mbarrier.wait(bar, 0)  # after invalidate


# ---- TMA -------------------------------------------------------------------------------------

@gluon.jit
def tma_round_trip_kernel(in_desc, out_ptr, out_stride, EXPECT: gl.constexpr,
                          READ_EARLY: gl.constexpr):
    """TMA load one block per program -> wait -> local_load -> plain stores to out."""
    BM: gl.constexpr = in_desc.block_shape[0]
    BN: gl.constexpr = in_desc.block_shape[1]
    m = gl.program_id(0) * BM
    n = gl.program_id(1) * BN
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # the barrier
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, EXPECT)
    tma.async_copy_global_to_shared(in_desc, [m, n], bar, smem)  # the load
    if READ_EARLY:
        early = smem.load(BLOCKED)  # reads before the wait
    mbarrier.wait(bar, 0, deps=[smem])  # the load's wait
    x = smem.load(BLOCKED)
    rows = m + gl.arange(0, BM, gl.SliceLayout(1, BLOCKED))
    cols = n + gl.arange(0, BN, gl.SliceLayout(0, BLOCKED))
    offs = gl.expand_dims(rows, 1) * out_stride + gl.expand_dims(cols, 0)
    gl.store(out_ptr + offs, x)
    mbarrier.invalidate(bar)


@gluon.jit
def tma_offset_load_kernel(in_desc, out_ptr, M0, N0):
    """One block at (M0, N0) (which may hang off any edge) -> out (block-shaped)."""
    BM: gl.constexpr = in_desc.block_shape[0]
    BN: gl.constexpr = in_desc.block_shape[1]
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [M0, N0], bar, smem)
    mbarrier.wait(bar, 0)
    x = smem.load(BLOCKED)
    rows = gl.arange(0, BM, gl.SliceLayout(1, BLOCKED))
    cols = gl.arange(0, BN, gl.SliceLayout(0, BLOCKED))
    gl.store(out_ptr + gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0), x)


@gluon.jit
def tma_ring_kernel(in_desc, out_desc, NUM_TILES: gl.constexpr, STAGES: gl.constexpr):
    """Row tiles through a STAGES-deep ring: TMA load -> wait -> registers (+1) -> smem ->
    TMA store, phases counted by hand."""
    BM: gl.constexpr = in_desc.block_shape[0]
    ring = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_shape,
                                     in_desc.layout)
    out = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_shape, out_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.expect(bars.index(s), in_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(in_desc, [s * BM, 0], bars.index(s), ring.index(s))
    for i in range(NUM_TILES):
        s = i % STAGES
        mbarrier.wait(bars.index(s), (i // STAGES) & 1)
        x = ring.index(s).load(BLOCKED) + 1
        nxt = i + STAGES
        mbarrier.expect(bars.index(s), in_desc.block_type.nbytes, pred=nxt < NUM_TILES)
        tma.async_copy_global_to_shared(in_desc, [nxt * BM, 0], bars.index(s), ring.index(s),
                                        pred=nxt < NUM_TILES)
        tma.store_wait(0)
        out.store(x)
        fence_async_shared()
        tma.async_copy_shared_to_global(out_desc, [i * BM, 0], out)
    tma.store_wait(0)


@gluon.jit
def tma_store_kernel(out_desc, M0, N0, OVERWRITE_EARLY: gl.constexpr):
    """Fill a block with 1 + its element index and TMA-store it at (M0, N0)."""
    BM: gl.constexpr = out_desc.block_shape[0]
    BN: gl.constexpr = out_desc.block_shape[1]
    rows = gl.arange(0, BM, gl.SliceLayout(1, BLOCKED))
    cols = gl.arange(0, BN, gl.SliceLayout(0, BLOCKED))
    x = (gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0) + 1).to(out_desc.dtype)
    smem = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_shape, out_desc.layout, x)
    fence_async_shared()
    tma.async_copy_shared_to_global(out_desc, [M0, N0], smem)  # the store
    if OVERWRITE_EARLY:
        smem.store(x)  # overwrites before store_wait
    tma.store_wait(0)
    smem.store(x)


@gluon.jit
def tma_two_waits_kernel(a_desc, b_desc, out_desc):
    """Two loads on two barriers, two waits, one store (PTX: two try_wait loops)."""
    a = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    mbarrier.expect(bars.index(0), a_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(a_desc, [0, 0], bars.index(0), a)
    mbarrier.expect(bars.index(1), b_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(b_desc, [0, 0], bars.index(1), b)
    mbarrier.wait(bars.index(0), 0)
    mbarrier.wait(bars.index(1), 0)
    s = a.load(BLOCKED) + b.load(BLOCKED)
    a.store(s)
    fence_async_shared()
    tma.async_copy_shared_to_global(out_desc, [0, 0], a)
    tma.store_wait(0)


def arange2d(rows, cols, dtype=np.float16):
    return (np.arange(rows * cols) % 2039).reshape(rows, cols).astype(dtype)
