"""A producer/consumer ring of mbarrier pairs that owns stage indices and phases.

    pipe = pipeline.create(STAGES)                     # before gl.warp_specialize
    # producer partition (e.g. one TMA warp)
    for i in range(n):
        s, ready = pipeline.producer_acquire(pipe, i)   # waits until stage s is free
        mbarrier.expect(ready, desc.block_type.nbytes)
        tma.async_copy_global_to_shared(desc, [i * BM, 0], ready, ring.index(s))
    # consumer partition
    for i in range(n):
        s = pipeline.consumer_wait(pipe, i)             # waits until stage s is full
        x = ring.index(s).load(layout)
        pipeline.consumer_release(pipe, i)              # hands stage s back
        # or, consuming asynchronously, the MMA's completion hands stage s back:
        tcgen05_mma(a, ring.index(s), acc, mbarriers=[pipeline.release_barrier(pipe, i)])

`pipe` is a tuple `(ready, empty)` of `[STAGES, 1]` mbarrier allocations, so it passes to
partitions like any other arguments. Both sides count the same item index `i`; the helpers
derive the stage (`i % STAGES`) and the phase parity (`(i // STAGES) & 1`) from it, so a
kernel never counts phases by hand (ThunderKittens' producer/consumer template does the
same bookkeeping).

Phases (PTX ISA 9.7.13.15, mbarrier). `ready[s]` completes a phase each time stage s is
filled: by the producer's `mbarrier.expect` plus its TMA bytes, or by `producer_commit`
(one arrival, for producers that store with registers). `empty[s]` completes a phase each
time every consumer released the stage (`consumer_arrivals` arrivals). Round r of stage s
waits for phase r of `ready[s]`, parity `r & 1`. The producer's first round must not wait:
a fresh barrier's phase "-1" (parity 1) counts as complete, so it waits on parity
`(r & 1) ^ 1`.
"""

from __future__ import annotations

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, mbarrier


@gluon.jit
def create(NUM_STAGES: gl.constexpr, CONSUMER_ARRIVALS: gl.constexpr = 1,
           PRODUCER_ARRIVALS: gl.constexpr = 1):
    """Allocate and initialize the barrier pairs of a NUM_STAGES-deep ring (call it before
    gl.warp_specialize and pass the result to both sides). CONSUMER_ARRIVALS partitions
    must release a stage before the producer may refill it; PRODUCER_ARRIVALS
    `producer_commit`s fill one (the warps' number for a producer whose warps commit each
    on its own)."""
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(s), count=PRODUCER_ARRIVALS)
        mbarrier.init(empty.index(s), count=CONSUMER_ARRIVALS)
    return ready, empty


@gluon.jit
def producer_acquire(pipe, i):
    """Wait until the stage of item `i` is free; returns (stage index, its `ready` barrier),
    on which the producer then expects TMA bytes or calls `producer_commit`."""
    ready = pipe[0]
    empty = pipe[1]
    NUM_STAGES: gl.constexpr = ready.shape[0]
    s = i % NUM_STAGES
    mbarrier.wait(empty.index(s), ((i // NUM_STAGES) & 1) ^ 1)
    return s, ready.index(s)


@gluon.jit
def producer_commit(pipe, i, per_warp: gl.constexpr = False):
    """Mark the stage of item `i` full after writing it with generic stores (the fence makes
    them visible to async readers such as wgmma or a TMA store). `per_warp=True`: each warp
    commits its own stores without waiting for the others (create the ring with the warps'
    number as PRODUCER_ARRIVALS)."""
    ready = pipe[0]
    NUM_STAGES: gl.constexpr = ready.shape[0]
    fence_async_shared()
    mbarrier.arrive(ready.index(i % NUM_STAGES), per_warp=per_warp)


@gluon.jit
def consumer_wait(pipe, i):
    """Wait until the stage of item `i` is full; returns the stage index."""
    ready = pipe[0]
    NUM_STAGES: gl.constexpr = ready.shape[0]
    s = i % NUM_STAGES
    mbarrier.wait(ready.index(s), (i // NUM_STAGES) & 1)
    return s


@gluon.jit
def consumer_release(pipe, i, pred=True, multicast_cta: gl.constexpr = 0,
                     per_warp: gl.constexpr = False):
    """Hand the stage of item `i` back to the producer (after the last read of it); with
    `pred` false nothing happens (a predicate, not a branch, so that releases in a row stay
    in one basic block and share the partition barrier before the first of them). In a
    cluster whose producers multicast into every CTA's ring, `multicast_cta=num_ctas - 1`
    releases the stage to every CTA's producer (create the ring with num_ctas times the
    consumer arrivals, and end each producer with `producer_drain`). `per_warp=True`: each
    warp releases on its own, without a barrier of the consumer's warps first (create the
    ring with the warps' arrivals, `mbarrier.arrive(per_warp=True)`)."""
    empty = pipe[1]
    NUM_STAGES: gl.constexpr = empty.shape[0]
    mbarrier.arrive(empty.index(i % NUM_STAGES), pred=pred, multicast_cta=multicast_cta,
                    per_warp=per_warp)


@gluon.jit
def producer_drain(pipe, i):
    """After the producer's last item (`i` items produced): wait until the consumers have
    released every stage. In a cluster the peers' consumers release this CTA's stages with
    remote arrivals, and none may arrive after the CTA has exited."""
    ready = pipe[0]
    NUM_STAGES: gl.constexpr = ready.shape[0]
    for k in gl.static_range(NUM_STAGES):
        producer_acquire(pipe, i + k)


@gluon.jit
def release_barrier(pipe, i):
    """The barrier whose arrival hands the stage of item `i` back, for a consumer that
    releases it asynchronously: `tcgen05_mma(..., mbarriers=[release_barrier(pipe, i)])`
    frees the stage once the MMA has read it."""
    empty = pipe[1]
    NUM_STAGES: gl.constexpr = empty.shape[0]
    return empty.index(i % NUM_STAGES)


@gluon.jit
def invalidate(pipe):
    """End the barriers' lives (after gl.warp_specialize returns)."""
    ready = pipe[0]
    empty = pipe[1]
    for s in gl.static_range(ready.shape[0]):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


__all__ = ["create", "producer_acquire", "producer_commit", "producer_drain", "consumer_wait",
           "release_barrier", "consumer_release", "invalidate"]
