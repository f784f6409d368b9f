"""gluon/stream_k.py: the split schedule covers every unit of every tile exactly once, splits
a tile between at most two neighbouring programs that agree on its slot, and keeps the
plain persistent order without a split; the same for the tail schedule of a one-program-a-
tile grid."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon import stream_k

MAX_PIECES = gl.constexpr(64)


@gluon.jit
def _store_piece(at, piece):
    tile, u0, u1, slot, side = piece
    gl.store(at, tile)
    gl.store(at + 1, u0)
    gl.store(at + 2, u1)
    gl.store(at + 3, slot)
    gl.store(at + 4, side)


@gluon.jit
def _schedule_kernel(out_ptr, num_tiles, units, SPLIT: gl.constexpr, SNAKE: gl.constexpr):
    # One row of 5 ints per piece: tile, first unit, end unit, slot, side.
    row = out_ptr + gl.program_id(0) * (MAX_PIECES * 5)
    for w in range(stream_k.num_work(num_tiles, units, SPLIT, SNAKE)):
        _store_piece(row + w * 5, stream_k.work(w, num_tiles, units, SPLIT, SNAKE))


def _pieces(num_tiles, units, programs, split, snake=False):
    out = np.full((programs, MAX_PIECES.value, 5), -9, np.int32)
    _schedule_kernel[(programs,)](out, num_tiles, units, SPLIT=split, SNAKE=snake)
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


@pytest.mark.parametrize("num_tiles, programs, split", [
    (2048, 132, False), (2047, 132, False), (2112, 132, False), (10, 3, False), (2, 3, False),
    (2048, 132, True), (23, 4, True)])
def test_snake_deals_waves_in_alternate_directions(num_tiles, programs, split):
    # Each tile once; wave w's tiles go to programs 0, 1, ... when w is even and G - 1,
    # G - 2, ... when odd, so that over tiles sorted longest first the programs' loads even
    # out (here tile t takes num_tiles - t: the plain order leaves program 0 a wave's worth
    # of lengths above the last program; the snake, at most one tile's).
    by_program = _pieces(num_tiles, 4, programs, split, snake=True)
    seen = np.zeros(num_tiles, np.int32)
    for pid, pieces in enumerate(by_program):
        for tile, u0, u1, slot, side in pieces:
            seen[tile] += 1 if (u0, u1) == (0, 4) else 0
            if (u0, u1) == (0, 4) and slot == -1 and (not split or tile < num_tiles
                                                      - num_tiles % programs - programs):
                w = tile // programs
                assert tile - w * programs == (programs - 1 - pid if w % 2 else pid)
    whole = seen.astype(bool)
    assert (seen <= 1).all() and (whole.all() or split)
    if not split and num_tiles >= 2 * programs:
        length = lambda pieces: sum(num_tiles - p[0] for p in pieces)  # noqa: E731
        snake = [length(p) for p in by_program]
        plain = [length(p) for p in _pieces(num_tiles, 4, programs, False)]
        assert max(snake) - min(snake) <= num_tiles
        assert max(plain) - min(plain) >= (num_tiles // programs) * (programs - 1) // 2


def test_without_split_the_order_is_the_persistent_one():
    by_program = _pieces(10, 4, 3, False)
    assert by_program == [[(t, 0, 4, -1, 0) for t in range(pid, 10, 3)] for pid in range(3)]
    assert not stream_k.enabled(12, 3) and not stream_k.enabled(3, 4)


@gluon.jit
def _tail_schedule_kernel(out_ptr, num_tiles, units, num_sms, SPLIT: gl.constexpr):
    row = out_ptr + gl.program_id(0) * (MAX_PIECES * 5)
    for w in range(stream_k.tail_num_work(num_tiles, units, num_sms, SPLIT)):
        _store_piece(row + w * 5, stream_k.tail_work(w, num_tiles, units, num_sms, SPLIT))


@pytest.mark.parametrize("num_tiles, units, sms", [
    (2048, 64, 132), (2048, 128, 132), (9, 5, 4), (9, 3, 2), (48, 16, 5), (7, 1, 3),
])
def test_tail_schedule_gives_one_tile_a_program_then_splits_the_last(num_tiles, units, sms):
    # A one-tile-a-program grid: programs before the split part take their own tile; the
    # last `sms` programs share the split part, each unit once, a tile cut between two
    # neighbours that agree on its slot (numbered among the split part's programs).
    programs = stream_k.tail_grid(num_tiles, sms)
    first = num_tiles - num_tiles % sms - sms
    assert programs == first + sms
    out = np.full((programs, MAX_PIECES.value, 5), -9, np.int32)
    _tail_schedule_kernel[(programs,)](out, num_tiles, units, sms, SPLIT=True)
    by_program = [[tuple(int(x) for x in p) for p in row if p[0] != -9] for row in out]
    assert by_program[:first] == [[(pid, 0, units, -1, 0)] for pid in range(first)]
    seen = np.zeros((num_tiles, units), np.int32)
    split = {}
    for p, pieces in enumerate(by_program[first:]):
        assert sum(u1 - u0 for _, u0, u1, _, _ in pieces) <= -(-(num_tiles - first) * units
                                                               // sms)
        for tile, u0, u1, slot, side in pieces:
            assert first <= tile and 0 <= u0 < u1 <= units
            seen[tile, u0:u1] += 1
            if (u0, u1) != (0, units):
                assert (slot, side) == ((p, 0) if u0 == 0 else (p - 1, 1))
                split.setdefault(tile, []).append((slot, side))
            else:
                assert slot == -1
    assert (seen[first:] == 1).all() and not seen[:first].any()
    assert split or units == 1
    for parts in split.values():
        assert sorted(parts) == [(parts[0][0], 0), (parts[0][0], 1)]


def test_tail_grid_without_split_is_one_program_a_tile():
    assert stream_k.tail_grid(12, 3) == 12 and stream_k.tail_grid(3, 4) == 3
    out = np.full((5, MAX_PIECES.value, 5), -9, np.int32)
    _tail_schedule_kernel[(5,)](out, 5, 4, 3, SPLIT=False)
    assert [tuple(out[p, 0]) for p in range(5)] == [(p, 0, 4, -1, 0) for p in range(5)]
    assert (out[:, 1:] == -9).all()
