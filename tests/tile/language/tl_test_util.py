"""Shared helpers of the tile-language tests: dtypes, random inputs, dtype-fit tolerances,
and a semantic object over a bare builder for tests that need no kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import tile.language as tl
from shared_codegen.ir import Builder, Function
from tile.language.semantic import TileSemantic

NP = {
    "int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
    "uint64": np.uint64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
    "float32": np.float32, "float64": np.float64,
}
TL = {name: getattr(tl, name) for name in NP}
FLOATS = ["float16", "bfloat16", "float32"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint32"]

# Tolerances fit to each dtype's precision (a few ulps of the inputs' magnitude).
TOL = {"float16": dict(rtol=2e-3, atol=2e-3), "bfloat16": dict(rtol=1.6e-2, atol=1.6e-2),
       "float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12)}


def rand(shape, dtype: str, seed=0, low=-4.0, high=4.0):
    rng = np.random.default_rng(seed)
    if dtype == "int1":
        return rng.random(shape) < 0.5
    npdt = np.dtype(NP[dtype])
    if npdt.kind in "iu":
        info = np.iinfo(npdt)
        lo, hi = max(int(low * 16), int(info.min)), min(int(high * 16), int(info.max))
        return rng.integers(lo, hi + 1, size=shape).astype(npdt)
    return rng.uniform(low, high, size=shape).astype(npdt)


def f64(x):
    return np.asarray(x).astype(np.float64)


def assert_close(actual, expected, dtype: str):
    """Compare in float64 with the dtype's tolerance; integers and bools exactly."""
    if dtype in TOL:
        np.testing.assert_allclose(f64(actual), f64(expected), **TOL[dtype])
    else:
        np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


def bare_semantic(*arg_types):
    """A semantic object building into a fresh function with arguments of `arg_types`."""
    fn = Function("k", list(arg_types))
    sem = TileSemantic(Builder(fn.body.block))
    return sem, [sem.make_tensor(a) for a in fn.args], fn
