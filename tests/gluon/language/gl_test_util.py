"""Shared helpers of the Gluon language tests: layouts, dtypes, inputs, and a runner that
traces a kernel and returns its CompilationError (or None)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import gluon
from gluon import language as gl
from shared_codegen.frontend.errors import CompilationError

NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
      "int32": np.int32, "int64": np.int64, "int8": np.int8, "uint32": np.uint32}
FLOATS = ["float16", "bfloat16", "float32"]
TOL = {"float16": dict(rtol=2e-3, atol=2e-3), "bfloat16": dict(rtol=1.6e-2, atol=1.6e-2),
       "float32": dict(rtol=1e-5, atol=1e-6)}

# A 1-D layout covering 128 elements with 4 warps (tensors of 64 replicate it), and a 2-D
# one covering 8 x 16 (tensors of 16 x 32 repeat it in registers).
L1 = gl.BlockedLayout([1], [32], [4], [0])
L2 = gl.BlockedLayout([1, 2], [4, 8], [2, 2], [1, 0])
# The same 2-D tensor spread the other way: converting between them moves data.
L2T = gl.BlockedLayout([2, 1], [8, 4], [2, 2], [0, 1])


def rand(shape, dtype: str, seed=0, low=-4.0, high=4.0):
    rng = np.random.default_rng(seed)
    npdt = np.dtype(NP[dtype])
    if npdt.kind in "iu":
        return rng.integers(max(-64, int(np.iinfo(npdt).min)), 64, size=shape).astype(npdt)
    return rng.uniform(low, high, size=shape).astype(npdt)


def f64(x):
    return np.asarray(x).astype(np.float64)


def assert_close(actual, expected, dtype):
    np.testing.assert_allclose(f64(actual), f64(expected), **TOL.get(dtype, {}))


@gluon.jit
def offsets_2d(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    """Row-major offsets of an M x N tile in `layout`."""
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


def compile_error(kernel, *args, **kwargs) -> str:
    """The message of the CompilationError that running `kernel[(1,)](*args)` raises."""
    try:
        kernel[(1,)](*args, **kwargs)
    except CompilationError as exc:
        return str(exc)
    raise AssertionError("expected a CompilationError")
