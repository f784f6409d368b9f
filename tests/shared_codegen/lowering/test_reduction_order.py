"""In-thread reductions: exactly associative combines (max/min, integer ops) are combined as a
balanced tree, float sums keep the left fold (Triton's order, and the interpreter's)."""

import re

import numpy as np

import gluon
from gluon import language as gl


@gluon.jit
def _row_reductions(x_ptr, i_ptr, max_ptr, sum_ptr, imax_ptr):
    # Each thread holds one whole row of 32: the reductions never leave the thread.
    layout: gl.constexpr = gl.BlockedLayout([1, 32], [32, 1], [4, 1], [1, 0])
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, layout))
    offs = gl.expand_dims(rows, 1) * 32 + gl.expand_dims(cols, 0)
    x = gl.load(x_ptr + offs)
    gl.store(max_ptr + rows, gl.max(x, axis=1))
    gl.store(sum_ptr + rows, gl.sum(x, axis=1))
    gl.store(imax_ptr + rows, gl.max(gl.load(i_ptr + offs), axis=1))


def _depth(ptx: str, opcode: str) -> int:
    """The longest chain of `opcode` instructions each fed by the one before."""
    depth = {}
    for dst, srcs in re.findall(rf"\b{re.escape(opcode)}\s+(%\w+),\s*([^;]+);", ptx):
        depth[dst] = 1 + max((depth.get(s.strip(), 0) for s in srcs.split(",")), default=0)
    return max(depth.values())


def test_max_is_a_tree_and_the_float_sum_a_fold():
    ptx = gluon.compile(_row_reductions, {"x_ptr": "*fp32:16", "i_ptr": "*i32:16",
                                          "max_ptr": "*fp32:16", "sum_ptr": "*fp32:16",
                                          "imax_ptr": "*i32:16"},
                        {}, target="sm_90a", num_warps=4).asm["ptx"]
    assert _depth(ptx, "max.f32") == 5      # log2(32), not 31
    assert _depth(ptx, "max.s32") == 5
    assert _depth(ptx, "add.f32") == 31     # rounding depends on the order: kept


def test_tree_reductions_compute_the_same_values():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 32)).astype(np.float32)
    x[3, 7] = np.nan  # max ignores a NaN operand (tl.max's default), whatever the grouping
    i = rng.integers(-1000, 1000, (128, 32)).astype(np.int32)
    mx, sm = np.zeros(128, np.float32), np.zeros(128, np.float32)
    imx = np.zeros(128, np.int32)
    _row_reductions[(1,)](x, i, mx, sm, imx, num_warps=4)
    assert np.array_equal(mx, np.fmax.reduce(x, axis=1))
    assert np.array_equal(imx, i.max(axis=1))
    assert np.allclose(sm[np.arange(128) != 3], np.nansum(x, axis=1)[np.arange(128) != 3],
                       rtol=1e-5, atol=1e-5)
