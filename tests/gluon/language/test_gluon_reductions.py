"""Gluon reductions and scans in the interpreter against numpy: results have
SliceLayout(axis, input layout), keep_dims gives the input layout back."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gl_test_util import FLOATS, L2, NP, assert_close, offsets_2d, rand

M, N = 16, 32


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _max_with_index(a, ia, b, ib):
    take_a = (a > b) | ((a == b) & (ia < ib))
    return gl.where(take_a, a, b), gl.where(take_a, ia, ib)


@gluon.jit
def reduce_kernel(x_ptr, out_ptr, OP: gl.constexpr, AXIS: gl.constexpr, M: gl.constexpr,
                  N: gl.constexpr, layout: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, layout))
    if OP == "sum":
        y = gl.sum(x, axis=AXIS)
    elif OP == "max":
        y = gl.max(x, axis=AXIS)
    elif OP == "min":
        y = x.min(axis=AXIS)
    elif OP == "reduce":
        y = gl.reduce(x, AXIS, _add)
    elif OP == "argmax":
        y = gl.argmax(x, axis=AXIS)
    elif OP == "argmin":
        y = gl.argmin(x, axis=AXIS)
    elif OP == "reduce_pair":
        idx = offsets_2d(M, N, layout)
        _, y = gl.reduce((x, idx), AXIS, _max_with_index)
    gl.static_assert(y.type.layout == gl.SliceLayout(AXIS, layout))
    n: gl.constexpr = y.shape[0]
    gl.store(out_ptr + gl.arange(0, n, layout=y.type.layout), y)


REDUCTIONS = {
    "sum": np.sum, "max": np.max, "min": np.min, "reduce": np.sum, "argmax": np.argmax,
    "argmin": np.argmin,
    "reduce_pair": lambda x, axis: (np.argmax(x, axis=axis) * (N if axis == 0 else 1)
                                    + (np.arange(N) if axis == 0 else np.arange(M) * N)),
}


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reductions_match_numpy(op, dtype, axis):
    x = rand((M, N), dtype, 1)
    ref = REDUCTIONS[op](x.astype(np.float64), axis=axis)
    index_result = op in ("argmax", "argmin", "reduce_pair")
    if index_result:
        out_dtype = np.int32
    elif op in ("max", "min") and dtype != "float32":
        out_dtype = np.float32  # 16-bit max/min compute in fp32 (Triton's rule)
    else:
        out_dtype = NP[dtype]
    out = np.zeros(ref.shape, dtype=out_dtype)
    reduce_kernel[(1,)](x, out, OP=op, AXIS=axis, M=M, N=N, layout=L2)
    if index_result:
        np.testing.assert_array_equal(out, ref)
    else:
        if op in ("sum", "reduce") and dtype != "float32":
            # 32 additions rounded to 8 or 11 bits each: a few ulps of the partial sums.
            np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2, atol=0.15)
        else:
            assert_close(out, ref, "float32" if op in ("max", "min") else dtype)


@gluon.jit
def full_reduce_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    offs = offsets_2d(M, N, layout)
    x = gl.load(x_ptr + offs)
    total = gl.sum(x)
    kept = gl.max(x, axis=1, keep_dims=True)
    gl.static_assert(kept.type.layout == layout)
    everything = gl.sum(x, axis=None, keep_dims=True)
    gl.static_assert(everything.shape == [1, 1])
    gl.store(out_ptr + offs, x * 0 + total + kept - everything)


def test_full_and_keep_dims_reductions():
    x = rand((M, N), "float32", 2)
    out = np.zeros_like(x)
    full_reduce_kernel[(1,)](x, out, M=M, N=N, layout=L2)
    np.testing.assert_allclose(out, np.broadcast_to(x.max(1, keepdims=True), x.shape),
                               rtol=1e-4, atol=1e-4)


@gluon.jit
def scan_kernel(x_ptr, out_ptr, OP: gl.constexpr, AXIS: gl.constexpr, M: gl.constexpr,
                N: gl.constexpr, layout: gl.constexpr):
    offs = offsets_2d(M, N, layout)
    x = gl.load(x_ptr + offs)
    if OP == "cumsum":
        y = gl.cumsum(x, axis=AXIS)
    elif OP == "cumsum_reverse":
        y = gl.cumsum(x, axis=AXIS, reverse=True)
    elif OP == "associative_scan":
        y = gl.associative_scan(x, AXIS, _add)
    elif OP == "cumprod":
        y = gl.cumprod(x, axis=AXIS)
    gl.static_assert(y.type.layout == layout)
    gl.store(out_ptr + offs, y)


SCANS = {
    "cumsum": np.cumsum, "associative_scan": np.cumsum, "cumprod": np.cumprod,
    "cumsum_reverse": lambda x, axis: np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis),
}


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", list(SCANS))
def test_scans_match_numpy(op, axis):
    x = rand((M, N), "float32", 3, low=0.9, high=1.1) if op == "cumprod" else \
        rand((M, N), "float32", 3)
    out = np.zeros_like(x)
    scan_kernel[(1,)](x, out, OP=op, AXIS=axis, M=M, N=N, layout=L2)
    np.testing.assert_allclose(out, SCANS[op](x.astype(np.float64), axis=axis), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cumsum_of_16_bit_floats(dtype):
    x = rand((M, N), dtype, 4)
    out = np.zeros((M, N), dtype=np.float32 if dtype == "bfloat16" else NP[dtype])
    scan_kernel[(1,)](x, out, OP="cumsum", AXIS=1, M=M, N=N, layout=L2)
    assert_close(out, np.cumsum(x.astype(np.float64), axis=1), "bfloat16")
