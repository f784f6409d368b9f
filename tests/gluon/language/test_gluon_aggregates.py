"""`@gluon.aggregate` classes (Triton's `_aggregate`): built from runtime values inside
kernels, `@gluon.jit` methods bound to the instance, passed to and returned from jitted
functions; reassigning one inside a runtime loop is refused by name."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from shared_codegen.frontend.errors import CompilationError
from tile.language.core import _aggregate

LAYOUT = gl.BlockedLayout([1], [32], [4], [0])


@gluon.aggregate
class Tile:
    start: gl.tensor
    size: gl.constexpr

    @gluon.jit
    def offsets(self):
        return self.start + gl.arange(0, self.size, LAYOUT)

    @gluon.jit
    def advanced(self, by):
        return Tile(self.start + by, self.size)

    @gluon.jit
    def make(pid, SIZE: gl.constexpr):
        return Tile(pid * SIZE, SIZE)


@_aggregate  # the 3.6 import path
class Scale:
    factor: gl.tensor

    @gluon.constexpr_function
    def __init__(self, factor):
        self.factor = factor


@gluon.jit
def store_scaled(out_ptr, tile, scale):
    offs = tile.offsets()
    gl.store(out_ptr + offs, offs * scale.factor)


@gluon.jit
def aggregate_kernel(out_ptr, factor, SIZE: gl.constexpr):
    tile = Tile.make(gl.program_id(0), SIZE)
    store_scaled(out_ptr, tile, Scale(factor))
    tile = tile.advanced(2 * SIZE)  # reassigned outside runtime control flow: fine
    store_scaled(out_ptr, tile, Scale(factor + 1))


def test_aggregates_hold_runtime_values_and_bind_their_methods():
    out = np.zeros(4 * 128, np.int32)
    aggregate_kernel[(2,)](out, 3, 128)
    offs = np.arange(256)
    np.testing.assert_array_equal(out[:256], offs * 3)
    np.testing.assert_array_equal(out[256:], (offs + 256) * 4)
    gluon.compile(aggregate_kernel, {"out_ptr": "*i32:16", "factor": "i32"}, {"SIZE": 128})


@gluon.aggregate
class Counter:
    index: gl.tensor
    phase: gl.tensor
    num: gl.constexpr

    @gluon.jit
    def create(NUM: gl.constexpr):
        return Counter(gl.to_tensor(0), gl.to_tensor(0), NUM)

    @gluon.jit
    def next(self):
        wrap = self.index + 1 == self.num
        return Counter(gl.where(wrap, 0, self.index + 1), gl.where(wrap, self.phase ^ 1,
                                                                   self.phase), self.num)


@gluon.jit
def counter_loop_kernel(out_ptr, n):
    counter = Counter.create(3)
    tile = Tile.make(0, 128)
    for i in range(n):  # both aggregates are loop-carried
        gl.store(out_ptr + 2 * i, counter.index)
        gl.store(out_ptr + 2 * i + 1, counter.phase)
        counter = counter.next()
        tile = tile.advanced(1)
    gl.store(out_ptr + 2 * n + tile.offsets() * 0, tile.start)


def test_aggregates_are_carried_through_runtime_loops():
    out = np.zeros(2 * 7 + 1, np.int32)
    counter_loop_kernel[(1,)](out, 7)
    index = [i % 3 for i in range(7)]
    phase = [(i // 3) & 1 for i in range(7)]
    np.testing.assert_array_equal(out[:-1:2], index)
    np.testing.assert_array_equal(out[1:-1:2], phase)
    assert out[-1] == 7
    ptx = gluon.compile(counter_loop_kernel, {"out_ptr": "*i32", "n": "i32"}).asm["ptx"]
    assert "st.global" in ptx


def test_an_aggregate_whose_constexpr_field_changes_in_a_loop_is_refused_by_name():
    @gluon.jit
    def kernel(out_ptr, n):
        counter = Counter.create(3)
        for i in range(n):
            counter = Counter(counter.index, counter.phase, 4)
        gl.store(out_ptr, counter.index)

    with pytest.raises(CompilationError, match="aggregate `counter` cannot be carried through "
                                               "the loop: its field `num` changes from 3 to 4"):
        kernel[(1,)](np.zeros(4, np.int32), 2)


@gluon.jit
def counter_branch_kernel(out_ptr, n):
    counter = Counter.create(3)
    for i in range(n):
        if i % 2 == 0:  # advanced on even iterations only
            counter = counter.next()
        gl.store(out_ptr + i, counter.index + 10 * counter.phase)


def test_an_aggregate_assigned_in_a_runtime_if_is_yielded_by_the_if():
    out = np.zeros(8, np.int32)
    counter_branch_kernel[(1,)](out, 8)
    want, index, phase = [], 0, 0
    for i in range(8):
        if i % 2 == 0:
            index, phase = (0, phase ^ 1) if index + 1 == 3 else (index + 1, phase)
        want.append(index + 10 * phase)
    np.testing.assert_array_equal(out, want)
    gluon.compile(counter_branch_kernel, {"out_ptr": "*i32", "n": "i32"})
