"""A persistent schedule whose last tiles are split between programs (stream-K's
"data-parallel + two-tile stream-K" hybrid, as CUTLASS's stream-K scheduler builds it).

A persistent kernel over T equal tiles (the same number of units each, at least one) on G
programs ends when its busiest program does: with T = 2048 tiles on 132 SMs that is 16
tiles' time for 15.5 tiles' work on average, 3% of every SM idle in a half-empty last wave.
Here the tiles of the last full wave and the ragged one, (T mod G) + G of them, are cut
into their units of work (a tile's K/V blocks, a GEMM's k-steps) and dealt out evenly,
U = ceil(units / G) consecutive units a program.
U is at least one tile's units, so a tile is split between at most two programs: the one
whose range ends inside it ("side" 0, the tile's first units) and the next ("side" 1).
Each of them holds a partial result; the kernel combines the two (`slot` names the pair's
meeting place, e.g. a workspace row and a counter: the program that arrives second adds
the other's partial to its own and finishes the tile, so neither ever waits).

    SPLIT = stream_k.enabled(num_tiles, num_programs)       # host side, a constexpr
    for w in range(stream_k.num_work(num_tiles, units, SPLIT)):
        tile, u0, u1, slot, side = stream_k.work(w, num_tiles, units, SPLIT)
        ...                                # units [u0, u1) of `tile`; slot -1: the whole tile

Without SPLIT it is the plain persistent loop (program p takes tiles p, p + G, ...), so
the tiles in flight at once stay neighbours (a wave of attention tiles shares its heads'
K/V in L2), and so does the data-parallel part with SPLIT; the split part's tiles are the
last (T mod G) + G, a program's pieces of them (at most 3) consecutive.
"""

from __future__ import annotations

import gluon
from gluon import language as gl


def enabled(num_tiles: int, num_programs: int) -> bool:
    """Whether splitting the last tiles shortens the kernel: more tiles than programs, and
    not a whole number of waves."""
    return num_tiles > num_programs and num_tiles % num_programs != 0


@gluon.jit
def _split_part(num_tiles, units):
    """(first tile of the split part, its units, how many a program takes): the last
    (T mod G) + G tiles, at least one tile's units a program."""
    G = gl.num_programs(0)
    first = num_tiles - (num_tiles % G) - G
    total = (num_tiles - first) * units
    return first, total, gl.cdiv(total, G)


@gluon.jit
def num_work(num_tiles, units, SPLIT: gl.constexpr):
    """How many pieces of work this program runs: whole tiles, then with SPLIT its 0-3
    pieces of the split part."""
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    if SPLIT:
        first, total, per = _split_part(num_tiles, units)
        a = gl.minimum(pid * per, total)
        e = gl.minimum(a + per, total)
        pieces = gl.where(e > a, gl.cdiv(e, units) - a // units, 0)
        return first // G + pieces
    else:
        return gl.cdiv(gl.maximum(num_tiles - pid, 0), G)


@gluon.jit
def work(w, num_tiles, units, SPLIT: gl.constexpr):
    """Piece `w` of this program: (tile, first unit, end unit, slot, side). `slot` is -1 for
    a whole tile; for a split one it numbers the pair of programs sharing it (the first of
    them), and `side` says which part this is (0: units from 0, 1: units to the end)."""
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    tile = pid + w * G
    u0 = w * 0
    u1 = u0 + units
    slot = u0 - 1
    side = u0
    if SPLIT:
        first, total, per = _split_part(num_tiles, units)
        n_whole = first // G
        if w >= n_whole:
            a = pid * per
            e = gl.minimum(a + per, total)
            t = a // units + (w - n_whole)
            tile = first + t
            u0 = gl.maximum(a - t * units, 0)
            u1 = gl.minimum(e - t * units, units)
            # A piece that does not start at unit 0 began in the previous program; one that
            # ends early goes on in the next.
            slot = gl.where(u0 > 0, pid - 1, gl.where(u1 < units, pid, -1))
            side = gl.where(u0 > 0, 1, 0)
    return tile, u0, u1, slot, side


__all__ = ["enabled", "num_work", "work"]
