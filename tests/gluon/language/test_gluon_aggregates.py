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


def test_reassigning_an_aggregate_in_a_runtime_loop_is_refused_by_name():
    @gluon.jit
    def kernel(out_ptr, n):
        tile = Tile.make(0, 128)
        for i in range(n):
            tile = tile.advanced(128)
        store_scaled(out_ptr, tile, Scale(1))

    with pytest.raises(CompilationError, match="aggregate `tile` is reassigned inside a "
                                               "runtime loop"):
        kernel[(1,)](np.zeros(512, np.int32), 2)
