"""Turn-taking between consumer warpgroups: they issue their tensor-core work one after the
other, round-robin, so one warpgroup's other work (a softmax, an epilogue) runs while the
others' MMAs keep the tensor cores busy (FlashAttention-3's inter-warpgroup overlap and its
scheduler barrier, CUTLASS's "ping-pong" schedule). Two warpgroups ping-pong; three or more
take their turns in order 0, 1, ..., n-1, 0, ...

    turns = pingpong.create()                     # before gl.warp_specialize; create(3) for 3
    # in warpgroup WG (0 .. n-1), a constexpr:
    turn = pingpong.start(turns, WG)
    for ...:
        pingpong.wait_turn(turns, WG, turn)       # the previous warpgroup has issued its MMAs
        acc = warpgroup_mma(..., is_async=True)   # issue ours
        turn = pingpong.pass_turn(turns, WG, turn)
        ...                                       # softmax etc. under the others' MMAs

`turns` holds one mbarrier per warpgroup (count 1; an arrive from a partition is one
arrival); their number is the number of warpgroups taking turns. Turn k of warpgroup WG waits
for phase k of `turns[WG]`; the last warpgroup opens phase 0 of `turns[0]` at `start`, so
warpgroup 0 goes first, and each `pass_turn` completes the next phase of the next
warpgroup's barrier. A barrier never runs two phases ahead of its waiter: warpgroup WG - 1
passes its turn k + 1 only after every other warpgroup, WG included, has passed turn k.
All warpgroups must take the same number of turns.
"""

from __future__ import annotations

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier


@gluon.jit
def create(NUM: gl.constexpr = 2, ARRIVALS: gl.constexpr = 1):
    """Allocate and initialize the turn barriers of NUM warpgroups (before
    gl.warp_specialize). ARRIVALS hand over one turn: 1 (one thread for the warpgroup), or
    its warps' number when they hand the turn over each on its own (`start` and `pass_turn`
    with PER_WARP), so they never wait for one another there, as FlashAttention-3's warps
    arrive one by one at its scheduler barrier."""
    turns = gl.allocate_shared_memory(gl.int64, [NUM, 1], mbarrier.MBarrierLayout())
    for wg in gl.static_range(NUM):
        mbarrier.init(turns.index(wg), count=ARRIVALS)
    return turns


@gluon.jit
def start(turns, WG: gl.constexpr, PER_WARP: gl.constexpr = False):
    """Warpgroup WG's first turn number (0); the last warpgroup lets warpgroup 0 go first."""
    if WG == turns.shape[0] - 1:
        mbarrier.arrive(turns.index(0), per_warp=PER_WARP)
    return 0


@gluon.jit
def wait_turn(turns, WG: gl.constexpr, turn):
    """Wait until the previous warpgroup handed over turn `turn`."""
    mbarrier.wait(turns.index(WG), turn & 1)


@gluon.jit
def pass_turn(turns, WG: gl.constexpr, turn, PER_WARP: gl.constexpr = False):
    """Hand the turn to the next warpgroup; returns the next turn number. PER_WARP (with
    `create(ARRIVALS=warps)`): each warp hands over its share as soon as it has issued its
    part."""
    mbarrier.arrive(turns.index((WG + 1) % turns.shape[0]), per_warp=PER_WARP)
    return turn + 1


@gluon.jit
def invalidate(turns):
    for wg in gl.static_range(turns.shape[0]):
        mbarrier.invalidate(turns.index(wg))


__all__ = ["create", "start", "wait_turn", "pass_turn", "invalidate"]
