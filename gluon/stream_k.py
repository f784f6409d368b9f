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

SNAKE deals each wave of whole tiles out in the direction opposite to the last one's: over
tiles sorted longest first (a causal attention forward), program p would otherwise take the
longest tile of every wave, and the kernel end about 6% past the mean at 4k-16k keys
(benchmarks/attention_bwd_tail_model.py --forward models it).

A kernel launched with one program a tile (the hardware deals the CTAs out as SMs free
up) gets the same split from `tail_grid`, `tail_num_work` and `tail_work`: programs
0 .. first - 1 take tile p each, and the last G of the grid (G = the SM count, passed in)
share the split part as above; its slots number those G programs.

    grid = (stream_k.tail_grid(num_tiles, num_sms),)        # host side
    for w in range(stream_k.tail_num_work(num_tiles, units, num_sms, SPLIT)):
        tile, u0, u1, slot, side = stream_k.tail_work(w, num_tiles, units, num_sms, SPLIT)
"""

from __future__ import annotations

import gluon
from gluon import language as gl


def enabled(num_tiles: int, num_programs: int) -> bool:
    """Whether splitting the last tiles shortens the kernel: more tiles than programs, and
    not a whole number of waves."""
    return num_tiles > num_programs and num_tiles % num_programs != 0


def tail_grid(num_tiles: int, num_sms: int) -> int:
    """Programs of a one-tile-a-program launch over `num_tiles` tiles whose last ones are
    split between `num_sms` programs (`tail_work`): one per tile before the split part, and
    num_sms for it; `num_tiles` where the split would not shorten the kernel."""
    if not enabled(num_tiles, num_sms):
        return num_tiles
    return num_tiles - num_tiles % num_sms


@gluon.jit
def _split_part(num_tiles, units, G):
    """(first tile of the split part, its units, how many a program takes): the last
    (T mod G) + G tiles, at least one tile's units a program (G: the programs that share
    them)."""
    first = num_tiles - (num_tiles % G) - G
    total = (num_tiles - first) * units
    return first, total, gl.cdiv(total, G)


@gluon.jit
def _piece(p, w, first, total, per, units):
    """Piece w of the split part's program p: (tile, u0, u1, slot, side), as `work`."""
    a = p * per
    e = gl.minimum(a + per, total)
    t = a // units + w
    u0 = gl.maximum(a - t * units, 0)
    u1 = gl.minimum(e - t * units, units)
    # A piece that does not start at unit 0 began in the previous program; one that ends
    # early goes on in the next.
    slot = gl.where(u0 > 0, p - 1, gl.where(u1 < units, p, -1))
    side = gl.where(u0 > 0, 1, 0)
    return first + t, u0, u1, slot, side


@gluon.jit
def _pieces(p, total, per, units):
    """How many pieces of the split part program p runs (0 to 3)."""
    a = gl.minimum(p * per, total)
    e = gl.minimum(a + per, total)
    return gl.where(e > a, gl.cdiv(e, units) - a // units, 0)


@gluon.jit
def num_work(num_tiles, units, SPLIT: gl.constexpr, SNAKE: gl.constexpr = False):
    """How many pieces of work this program runs: whole tiles, then with SPLIT its 0-3
    pieces of the split part (SNAKE: the order of the whole tiles, see `work`)."""
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    if SPLIT:
        first, total, per = _split_part(num_tiles, units, G)
        return first // G + _pieces(pid, total, per, units)
    elif SNAKE:  # the ragged last wave's tiles go to the programs its direction reaches
        waves = num_tiles // G
        ragged = num_tiles % G
        return waves + gl.where(waves % 2 == 1, pid >= G - ragged, pid < ragged).to(gl.int32)
    else:
        return gl.cdiv(gl.maximum(num_tiles - pid, 0), G)


@gluon.jit
def work(w, num_tiles, units, SPLIT: gl.constexpr, SNAKE: gl.constexpr = False):
    """Piece `w` of this program: (tile, first unit, end unit, slot, side). `slot` is -1 for
    a whole tile; for a split one it numbers the pair of programs sharing it (the first of
    them), and `side` says which part this is (0: units from 0, 1: units to the end).
    SNAKE: whole tiles wave by wave in alternating directions (program p takes tile
    w G + p in even waves, w G + G - 1 - p in odd ones), so that over tiles sorted longest
    first no program gets the longest of every wave."""
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    tile = pid + w * G
    if SNAKE:
        tile = w * G + gl.where(w % 2 == 1, G - 1 - pid, pid)
    u0 = w * 0
    u1 = u0 + units
    slot = u0 - 1
    side = u0
    if SPLIT:
        first, total, per = _split_part(num_tiles, units, G)
        n_whole = first // G
        if w >= n_whole:
            tile, u0, u1, slot, side = _piece(pid, w - n_whole, first, total, per, units)
    return tile, u0, u1, slot, side


@gluon.jit
def tail_num_work(num_tiles, units, num_sms, SPLIT: gl.constexpr):
    """How many pieces of work this program of a `tail_grid` launch runs: its tile, or with
    SPLIT and a program of the last num_sms, its 0-3 pieces of the split part."""
    pid = gl.program_id(0)
    if SPLIT:
        first, total, per = _split_part(num_tiles, units, num_sms)
        return gl.where(pid < first, 1, _pieces(gl.maximum(pid - first, 0), total, per, units))
    else:
        return num_work(num_tiles, units, False)


@gluon.jit
def tail_work(w, num_tiles, units, num_sms, SPLIT: gl.constexpr):
    """Piece `w` of this program of a `tail_grid` launch: (tile, first unit, end unit, slot,
    side) as `work` gives them; slots number the split part's programs (0 .. num_sms - 1).
    Without SPLIT, program p takes tiles p, p + grid, ... (one each when the grid is one
    program a tile)."""
    pid = gl.program_id(0)
    tile, u0, u1, slot, side = work(w, num_tiles, units, False)
    if SPLIT:
        first, total, per = _split_part(num_tiles, units, num_sms)
        if pid >= first:
            tile, u0, u1, slot, side = _piece(pid - first, w, first, total, per, units)
    return tile, u0, u1, slot, side


__all__ = ["enabled", "num_work", "work", "tail_grid", "tail_num_work", "tail_work"]
