"""Scratch shared memory for the rules that move data between threads, with a barrier before
an exchange's writes only where an earlier exchange's reads may still be running.

A rule that exchanges data through scratch (a layout conversion, a reduction across warps, a
scan, a histogram) writes, waits at `bar.sync` (PTX ISA 9.7.13.1), then reads. Before it
writes, the threads of earlier exchanges must be done reading the bytes it overwrites. A
barrier there every time (what every rule did) costs a `bar.sync` per exchange, two per
exchange in a loop that reduces and converts each tile. Triton places barriers by a
dataflow analysis of shared-memory accesses (its "membar" pass); this is its straight-line
form:

- each claim's bytes count as read until a barrier follows them: `settle` records them
  with the barrier count of the moment when the op that claimed them ends (its reads come
  after its own last barrier; an op lowered inside it, a reduction's combine, does not end
  its claims) or claims again (its earlier exchanges are read by then);
- a claim in the basic block of the last barrier emitted (the barrier precedes it on every
  path, and orders everything that ran before it) needs no barrier when nothing was read
  since that barrier, and none either when the bytes past those read since it fit in the
  room the kernel's scratch has anyway (at least SPREAD_BYTES): it takes those instead;
- anywhere else (the first op of a loop body or a branch, whose previous iteration or
  predecessor may still read), the barrier as before, and offset 0.

The barrier between an exchange's own writes and reads stays with each rule.
"""

from __future__ import annotations

from typing import List, Tuple

from llvmlite import ir

# How far past the bytes still being read a claim may go (further if the kernel's scratch
# is larger anyway): the small exchanges of a loop body, not a second copy of a big one.
SPREAD_BYTES = 2048
ALIGN = 128  # shared-memory banks repeat every 128 bytes: a claim's bank pattern keeps its offset
I8 = ir.IntType(8)


class ScratchClaims:
    """What the current code has claimed: `pending`, the byte ranges of ops still being
    lowered and the op that claimed each (read until a barrier follows their op's end), and
    `reads`, settled ranges with the barrier count at which they were last read."""

    __slots__ = ("pending", "reads")

    def __init__(self) -> None:
        self.pending: List[Tuple[int, int, object]] = []
        self.reads: List[Tuple[int, int, int]] = []


def settle(ctx, op=None) -> None:
    """Record the claims of `op` (all claims when None) as read at the current barrier
    count, and forget reads a barrier has ordered since."""
    claims = ctx.scratch_claims
    claims.reads = [r for r in claims.reads if r[2] == ctx.barrier_count]
    still = []
    for lo, hi, owner in claims.pending:
        if op is None or owner is op:
            claims.reads.append((lo, hi, ctx.barrier_count))
        else:
            still.append((lo, hi, owner))
    claims.pending = still


def claim_scratch(ctx, nbytes: int):
    """A pointer to `nbytes` of scratch shared memory the caller may write right away: the
    barrier before it emitted only if an earlier exchange may still read those bytes."""
    op = ctx.current_op
    settle(ctx, op)
    claims = ctx.scratch_claims
    offset, ordered = 0, False
    if ctx.barrier_block is ctx.builder.block and not claims.pending:
        # (An op this one is lowered inside may read its claim after any barrier here: no
        # such nesting claims today, and it keeps the plain barrier at offset 0.)
        busy = [hi for _, hi, count in claims.reads if count == ctx.barrier_count]
        if not busy:
            ordered = True
        else:
            start = -(-max(busy) // ALIGN) * ALIGN
            room = max(ctx.shared_bytes - ctx.static_shared_bytes, SPREAD_BYTES)
            if start + nbytes <= room:
                offset, ordered = start, True
    base = ctx.request_shared(offset + nbytes)
    if offset:
        base = ctx.builder.gep(base, [ctx.i32(offset)], source_etype=I8)
    if not ordered:
        ctx.barrier()  # an earlier op may still be reading these bytes
    claims.pending.append((offset, offset + nbytes, op))
    return base
