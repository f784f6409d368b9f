"""gluon/stream_k.py: the split schedule covers every unit of every tile exactly once, splits
a tile between at most two neighbouring programs that agree on its slot, and keeps the
plain persistent order without a split."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon import stream_k

MAX_PIECES = gl.constexpr(64)


@gluon.jit
def _schedule_kernel(out_ptr, num_tiles, units, SPLIT: gl.constexpr):
    # One row of 5 ints per piece: tile, first unit, end unit, slot, side.
    row = out_ptr + gl.program_id(0) * (MAX_PIECES * 5)
    for w in range(stream_k.num_work(num_tiles, units, SPLIT)):
        tile, u0, u1, slot, side = stream_k.work(w, num_tiles, units, SPLIT)
        gl.store(row + w * 5, tile)
        gl.store(row + w * 5 + 1, u0)
        gl.store(row + w * 5 + 2, u1)
        gl.store(row + w * 5 + 3, slot)
        gl.store(row + w * 5 + 4, side)


def _pieces(num_tiles, units, programs, split):
    out = np.full((programs, MAX_PIECES.value, 5), -9, np.int32)
    _schedule_kernel[(programs,)](out, num_tiles, units, SPLIT=split)
    return [[tuple(int(x) for x in piece) for piece in row if piece[0] != -9] for row in out]


@pytest.mark.parametrize("num_tiles, units, programs", [
    (2048, 128, 132), (2048, 32, 132), (9, 3, 4), (9, 3, 2), (48, 16, 5), (7, 1, 3),
])
def test_split_schedule_covers_each_unit_once(num_tiles, units, programs):
    assert stream_k.enabled(num_tiles, programs)
    by_program = _pieces(num_tiles, units, programs, True)
    seen = np.zeros((num_tiles, units), np.int32)
    split = {}
    for pid, pieces in enumerate(by_program):
        for tile, u0, u1, slot, side in pieces:
            assert 0 <= u0 < u1 <= units
            seen[tile, u0:u1] += 1
            if (u0, u1) == (0, units):
                assert slot == -1
            else:  # a part: this program and the next share the tile (slot = the first)
                assert (slot, side) == ((pid, 0) if u0 == 0 else (pid - 1, 1))
                split.setdefault(tile, []).append((slot, side))
    assert (seen == 1).all()
    assert split or units == 1  # a tile of one unit cannot be cut
    for parts in split.values():
        assert sorted(parts) == [(parts[0][0], 0), (parts[0][0], 1)]
    # No program takes more than the mean rounded up; whole waves first, in the persistent
    # order (program p: tiles p, p + G, ...).
    loads = [sum(u1 - u0 for _, u0, u1, _, _ in pieces) for pieces in by_program]
    assert max(loads) <= -(-num_tiles * units // programs)
    first = num_tiles - num_tiles % programs - programs
    for pid, pieces in enumerate(by_program):
        whole = [p[0] for p in pieces if p[0] < first]
        assert whole == list(range(pid, first, programs))


def test_without_split_the_order_is_the_persistent_one():
    by_program = _pieces(10, 4, 3, False)
    assert by_program == [[(t, 0, 4, -1, 0) for t in range(pid, 10, 3)] for pid in range(3)]
    assert not stream_k.enabled(12, 3) and not stream_k.enabled(3, 4)
