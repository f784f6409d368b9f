"""Reductions and scans of the numpy reference (Triton 3.6's dtype rules, free order: float
sums carry a bound for any association order)."""

from __future__ import annotations

import numpy as np

from .program import is_float
from .reference import EPS, NP, TINY, Value, _cast_value, f64, round_float
from .typing_rules import minmax_dtype, scan_dtype, sum_dtype

BIG = {"float16": 65504.0, "bfloat16": 3.38e38, "float32": 3.4e38, "float64": 1.79e308}
SMALL = {"float16": 2.0**-14, "bfloat16": 2.0**-126, "float32": 2.0**-126, "float64": 2.0**-1022}
ERRSTATE = dict(over="ignore", invalid="ignore", divide="ignore", under="ignore")


def _axis_view(v: Value, axis):
    """(values, err, unsure) with the reduced axis last, flattened for axis=None."""
    if axis is None:
        return v.val.reshape(-1), v.err.reshape(-1), v.unsure.reshape(-1)
    return (np.moveaxis(v.val, axis, -1), np.moveaxis(v.err, axis, -1),
            np.moveaxis(v.unsure, axis, -1))


def reduce(fn: str, axis, v: Value, out_kind: str) -> Value:
    # a user combine function computes in the input's own type (no widening)
    plain = {"combine_add": "sum", "combine_max": "max"}.get(fn)
    if plain:
        fn = plain
    elif fn == "sum":
        v = _cast_value(v, sum_dtype(v.dtype))
    elif fn in ("max", "min"):
        v = _cast_value(v, minmax_dtype(v.dtype))
    elif fn in ("argmax", "argmin") and v.dtype == "bfloat16":
        v = _cast_value(v, "float32")
    x, e, u = _axis_view(v, axis)
    n = x.shape[-1]
    unsure = u.any(axis=-1)
    dtype = v.dtype
    with np.errstate(**ERRSTATE):
        if fn == "sum" and is_float(dtype):
            x64 = f64(x)
            r64 = x64.sum(axis=-1)
            r = round_float(r64, dtype)
            # any association order: each partial sum rounds once
            err = (e.sum(axis=-1) + n * EPS[dtype] * np.abs(x64).sum(axis=-1)
                   + n * TINY[dtype] + 2 * EPS[dtype] * np.abs(r64))
            err = np.where((n == 1) & (e.sum(axis=-1) == 0), 0.0, err)
            # a partial sum past the largest finite value overflows in some orders only
            unsure = unsure | (~np.isfinite(r64) | (np.abs(x64).sum(axis=-1) > BIG[dtype])) \
                & (err > 0)
            return Value(r, err, unsure, dtype, out_kind)
        if fn == "sum":
            r = x.sum(axis=-1, dtype=x.dtype)
        elif fn == "xor_sum":
            r = np.bitwise_xor.reduce(x, axis=-1)
        elif fn in ("max", "min"):
            r = x.max(axis=-1) if fn == "max" else x.min(axis=-1)
            if is_float(dtype):
                unsure = unsure | np.isnan(f64(x)).any(axis=-1)
                return Value(r, e.max(axis=-1), unsure, dtype, out_kind)
        else:  # argmax / argmin, ties to the smallest index
            x64 = f64(x) if is_float(dtype) else x
            r = (np.argmax(x64, axis=-1) if fn == "argmax" else np.argmin(x64, axis=-1))
            if is_float(dtype):
                best = np.take_along_axis(f64(x), r[..., None], -1)
                ebest = np.take_along_axis(e, r[..., None], -1)
                rivals = (np.abs(f64(x) - best) <= e + ebest) & (e + ebest > 0)
                rivals[..., :] &= np.arange(n) != r[..., None]
                unsure = unsure | rivals.any(axis=-1) | np.isnan(f64(x)).any(axis=-1)
            r = r.astype(np.int32)
            return Value(np.asarray(r), np.zeros(np.shape(r)), unsure, "int32", out_kind)
    r = np.asarray(r).astype(NP[dtype])
    return Value(r, np.zeros(r.shape), unsure, dtype, out_kind)


def scan(fn: str, axis: int, reverse: bool, v: Value) -> Value:
    if fn == "combine_max":
        return _running_max(axis, reverse, v)
    if fn == "combine_add":
        fn = "cumsum"  # in the input's own type
    else:
        v = _cast_value(v, scan_dtype(fn, v.dtype))
    dtype = v.dtype
    x, e, u = (np.moveaxis(a, axis, -1) for a in (v.val, v.err, v.unsure))
    if reverse:
        x, e, u = x[..., ::-1], e[..., ::-1], u[..., ::-1]
    n = x.shape[-1]
    unsure = np.logical_or.accumulate(u, axis=-1)
    with np.errstate(**ERRSTATE):
        if is_float(dtype):
            x64 = f64(x)
            steps = np.arange(1, n + 1)
            if fn == "cumsum":
                r64 = np.cumsum(x64, axis=-1)
                err = (np.cumsum(e, axis=-1) + steps * EPS[dtype] * np.cumsum(np.abs(x64), -1)
                       + steps * TINY[dtype] + 2 * EPS[dtype] * np.abs(r64))
            else:
                r64 = np.cumprod(x64, axis=-1)
                # a product's relative error grows by one rounding per factor; inexact
                # factors make it unbounded near zero, so those prefixes are not checked
                err = 2 * (steps + 1) * EPS[dtype] * np.abs(r64) + steps * TINY[dtype]
                unsure = unsure | np.logical_or.accumulate(e > 0, axis=-1)
            # past an overflow (or an underflow of a product) the order decides: unchecked
            if fn == "cumsum":
                out_of_range = np.cumsum(np.abs(x64), -1) > BIG[dtype]
            else:
                size = np.abs(r64)
                out_of_range = (size > BIG[dtype]) | ((size < SMALL[dtype]) & (size > 0))
            unsure = unsure | np.logical_or.accumulate(out_of_range, axis=-1)
            exact_first = (steps == 1) & (e == 0)
            err = np.where(exact_first, 0.0, err)
            r = round_float(r64, dtype)
            unsure = unsure | ~np.isfinite(r64) & (err > 0)
        else:
            op = np.cumsum if fn == "cumsum" else np.cumprod
            r = op(x, axis=-1, dtype=x.dtype)
            err = np.zeros(r.shape)
    if reverse:
        r, err, unsure = r[..., ::-1], err[..., ::-1], unsure[..., ::-1]
    back = (np.moveaxis(a, -1, axis) for a in (r, err, unsure))
    r, err, unsure = back
    return Value(np.asarray(r).astype(NP[dtype]), err, unsure, dtype, v.kind)


def dot(a: Value, b: Value, out_dtype: str) -> Value:
    """`tl.dot` of (M, K) x (K, N) tiles: int8 products accumulate exactly in int32 (wrapping);
    floats accumulate in fp32 in any order, fp32 inputs as tf32 (Triton's default
    input_precision), which keeps 10 mantissa bits of each operand."""
    unsure = (a.unsure.any(axis=1)[:, None] | b.unsure.any(axis=0)[None, :])
    if out_dtype == "int32":
        r = (a.val.astype(np.int64) @ b.val.astype(np.int64)).astype(np.int32)
        return Value(r, np.zeros(r.shape), unsure, "int32", "2d")
    x, y = f64(a.val), f64(b.val)
    k = x.shape[1]
    with np.errstate(**ERRSTATE):
        exact = x @ y
        size = np.abs(x) @ np.abs(y)
        operand = 2.0**-10 if a.dtype == "float32" else 0.0
        err = (np.abs(x) @ b.err + a.err @ np.abs(y) + a.err @ b.err
               + size * (2 * operand + (k + 1) * EPS["float32"]) + k * TINY["float32"])
        unsure = unsure | ~np.isfinite(size) | (size > BIG["float32"])
    return Value(round_float(exact, "float32"), err, unsure, "float32", "2d")


def sort_or_flip(op: str, attr: tuple, v: Value) -> Value:
    """`tl.sort(x, dim, descending)` / `tl.flip(x, dim)`. Sorting moves each element's error
    with it, and the k-th smallest of values each within e of the true ones is within max(e)
    of the true k-th smallest; NaN has no place in the order, so its row is unchecked."""
    dim = attr[0]
    if op == "flip":
        return Value(np.flip(v.val, dim).copy(), np.flip(v.err, dim).copy(),
                     np.flip(v.unsure, dim).copy(), v.dtype, v.kind)
    descending = attr[1]
    r = np.sort(v.val, axis=dim)
    if descending:
        r = np.flip(r, dim)
    err = np.broadcast_to(v.err.max(axis=dim, keepdims=True), v.err.shape).copy()
    unsure = v.unsure.any(axis=dim, keepdims=True)
    if is_float(v.dtype):
        unsure = unsure | np.isnan(f64(v.val)).any(axis=dim, keepdims=True)
    return Value(r.copy(), err, np.broadcast_to(unsure, v.unsure.shape).copy(), v.dtype, v.kind)


def _running_max(axis: int, reverse: bool, v: Value) -> Value:
    """An inclusive scan with `where(a > b, a, b)`: the running maximum (NaN: unchecked)."""
    x, e, u = (np.moveaxis(a, axis, -1) for a in (v.val, v.err, v.unsure))
    if reverse:
        x, e, u = x[..., ::-1], e[..., ::-1], u[..., ::-1]
    r = np.maximum.accumulate(x, axis=-1)
    err = np.maximum.accumulate(e, axis=-1)
    unsure = np.logical_or.accumulate(u, axis=-1)
    if is_float(v.dtype):
        unsure = unsure | np.logical_or.accumulate(np.isnan(f64(x)), axis=-1)
    if reverse:
        r, err, unsure = r[..., ::-1], err[..., ::-1], unsure[..., ::-1]
    r, err, unsure = (np.moveaxis(a, -1, axis) for a in (r, err, unsure))
    return Value(np.asarray(r).astype(NP[v.dtype]), err, unsure, v.dtype, v.kind)
