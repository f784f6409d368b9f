"""Ping-pong between two warpgroups: they take turns issuing their tensor-core work, so one
warpgroup's other work (a softmax, an epilogue) runs while the other's MMAs keep the tensor
cores busy (FlashAttention-3's inter-warpgroup overlap, CUTLASS's "ping-pong" schedule).

    turns = pingpong.create()                     # before gl.warp_specialize
    # in warpgroup WG (0 or 1), a constexpr:
    turn = pingpong.start(turns, WG)
    for ...:
        pingpong.wait_turn(turns, WG, turn)       # the other warpgroup has issued its MMAs
        acc = warpgroup_mma(..., is_async=True)   # issue ours
        turn = pingpong.pass_turn(turns, WG, turn)
        ...                                       # softmax etc. under the other's MMAs

`turns` is a pair of mbarriers (count 1; an arrive from a partition is one arrival). Turn k
of warpgroup WG waits for phase k of `turns[WG]`; warpgroup 1 opens phase 0 of `turns[0]` at
`start`, so warpgroup 0 goes first, and each `pass_turn` completes the next phase of the other
warpgroup's barrier. Both warpgroups must take the same number of turns.
"""

from __future__ import annotations

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier


@gluon.jit
def create():
    """Allocate and initialize the two turn barriers (before gl.warp_specialize)."""
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for wg in gl.static_range(2):
        mbarrier.init(turns.index(wg), count=1)
    return turns


@gluon.jit
def start(turns, WG: gl.constexpr):
    """Warpgroup WG's first turn number (0); warpgroup 1 lets warpgroup 0 go first."""
    if WG == 1:
        mbarrier.arrive(turns.index(0))
    return 0


@gluon.jit
def wait_turn(turns, WG: gl.constexpr, turn):
    """Wait until the other warpgroup handed over turn `turn`."""
    mbarrier.wait(turns.index(WG), turn & 1)


@gluon.jit
def pass_turn(turns, WG: gl.constexpr, turn):
    """Hand the turn to the other warpgroup; returns the next turn number."""
    mbarrier.arrive(turns.index(1 - WG))
    return turn + 1


@gluon.jit
def invalidate(turns):
    for wg in gl.static_range(2):
        mbarrier.invalidate(turns.index(wg))


__all__ = ["create", "start", "wait_turn", "pass_turn", "invalidate"]
