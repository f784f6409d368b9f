"""Evaluating a fuzzed program's nodes in numpy (see reference.py for what a Value carries)."""

from __future__ import annotations

import numpy as np

from .program import Program, is_float
from .reference import (EPS, NP, Value, _approx, _cast_value, _rounded, cast_values, f64,
                        round_float)
from .typing_rules import literal_dtype

ERRSTATE = dict(over="ignore", invalid="ignore", divide="ignore", under="ignore")


def _const(value, dtype: str, like: Value) -> Value:
    src = literal_dtype(value)
    arr = np.full(like.val.shape, value, dtype=NP[src] if src != "int1" else bool)
    val, unsure = cast_values(arr, src, dtype)
    return Value(val, np.zeros(val.shape), unsure, dtype, like.kind)


def _exact_float(fn, a: Value, b: Value, dtype: str, err) -> Value:
    with np.errstate(**ERRSTATE):
        r = round_float(fn(f64(a.val), f64(b.val)), dtype)
    return Value(r, _rounded(err, r, dtype), a.unsure | b.unsure, dtype, a.kind)


def _int_div(a, b, sym):
    """C division and remainder (truncate toward zero), as sdiv/srem/udiv/urem."""
    q = a // b
    r = a - q * b
    fix = (r != 0) & ((a < 0) != (b < 0))
    q = np.where(fix, q + 1, q).astype(a.dtype)
    return q if sym == "//" else (a - q * b).astype(a.dtype)


def binary(sym: str, a: Value, b: Value, ct: str, out: str) -> Value:
    a, b = _cast_value(a, ct), _cast_value(b, ct)
    unsure = a.unsure | b.unsure
    ea, eb = a.err, b.err
    if is_float(ct):
        x, y = f64(a.val), f64(b.val)
        with np.errstate(**ERRSTATE):
            if sym in ("+", "-"):
                return _exact_float(np.add if sym == "+" else np.subtract, a, b, ct, ea + eb)
            if sym == "*":
                return _exact_float(np.multiply, a, b, ct, np.abs(x) * eb + np.abs(y) * ea
                                    + ea * eb)
            if sym in ("/", "div_rn", "fdiv"):
                prop = np.where(np.abs(y) > eb, (ea + np.abs(x / y) * eb) /
                                (np.abs(y) - eb), np.inf)
                prop = np.where((ea == 0) & (eb == 0), 0.0, prop)
                r = _exact_float(np.divide, a, b, ct, prop)
                if sym != "div_rn" and ct == "float32":  # div.full.f32: ~2 ulp
                    r.err = _approx(r.err, r.val, ct)
                return r
            if sym == "%":
                r = _exact_float(np.fmod, a, b, ct, 0.0)
                # fmod jumps where x / y crosses an integer
                near = (ea > 0) | (eb > 0)
                r.unsure = r.unsure | near
                return r
            if sym in ("maximum", "minimum"):
                r = (np.maximum if sym == "maximum" else np.minimum)(a.val, b.val)
                nan = np.isnan(x) | np.isnan(y)
                return Value(r, np.maximum(ea, eb), unsure | nan, ct, a.kind)
            # comparisons: ordered except !=
            r = _compare(sym, x, y)
            close = (ea + eb > 0) & ~(np.abs(x - y) > ea + eb)
            return Value(r, np.zeros(r.shape), unsure | close, "int1", a.kind)
    x, y = a.val, b.val
    with np.errstate(**ERRSTATE):
        if sym == "+":
            r = x + y
        elif sym == "-":
            r = x - y
        elif sym == "*":
            r = x * y
        elif sym in ("//", "%"):
            r = _int_div(x, y, sym)
        elif sym == "/":
            raise AssertionError("integer / is typed as float32")
        elif sym == "&":
            r = x & y
        elif sym == "|":
            r = x | y
        elif sym == "^":
            r = x ^ y
        elif sym == "<<":
            r = np.left_shift(x, y.astype(x.dtype))
        elif sym == ">>":
            r = np.right_shift(x, y.astype(x.dtype))
        elif sym == "maximum":
            r = np.maximum(x, y)
        elif sym == "minimum":
            r = np.minimum(x, y)
        else:
            r = _compare(sym, x, y)
    r = np.asarray(r).astype(NP[out])
    return Value(r, np.zeros(r.shape), unsure, out, a.kind)


def _compare(sym, x, y):
    return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
            "==": np.equal, "!=": np.not_equal}[sym](x, y)


DERIVATIVE = {
    "exp": lambda x, r: np.abs(r), "exp2": lambda x, r: np.abs(r) * 0.7,
    "log": lambda x, r: 1.0 / np.abs(x), "log2": lambda x, r: 1.5 / np.abs(x),
    "sqrt": lambda x, r: 0.5 / np.abs(r), "sqrt_rn": lambda x, r: 0.5 / np.abs(r),
    "rsqrt": lambda x, r: 0.5 * np.abs(r) / np.abs(x), "sin": lambda x, r: 1.0,
    "cos": lambda x, r: 1.0, "erf": lambda x, r: 1.13, "sigmoid": lambda x, r: 0.25,
}
MATH_FN = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "floor": np.floor, "ceil": np.ceil,
}
EXACT_MATH = ("floor", "ceil", "sqrt_rn")


def _erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[np.float64])(x)


def unary(fn: str, a: Value) -> Value:
    dtype = a.dtype
    if fn == "neg":
        if is_float(dtype):
            return Value(-a.val, a.err, a.unsure, dtype, a.kind)
        with np.errstate(**ERRSTATE):
            return Value(np.negative(a.val), a.err, a.unsure, dtype, a.kind)
    if fn == "abs":
        with np.errstate(**ERRSTATE):
            return Value(np.abs(a.val), a.err, a.unsure, dtype, a.kind)
    if fn == "not":
        r = np.logical_not(a.val) if dtype == "int1" else np.invert(a.val)
        return Value(r, a.err, a.unsure, dtype, a.kind)
    x, ea = f64(a.val), a.err
    with np.errstate(**ERRSTATE):
        r64 = _erf(x) if fn == "erf" else MATH_FN[fn](x)
        r = round_float(r64, dtype)
        unsure = a.unsure.copy()
        if fn in ("floor", "ceil"):
            step = np.floor if fn == "floor" else np.ceil
            unsure |= (ea > 0) & (step(x - ea) != step(x + ea))
            return Value(r, np.zeros(r.shape), unsure, dtype, a.kind)
        if fn in ("log", "log2", "sqrt", "sqrt_rn", "rsqrt"):
            # near the domain's edge (or a pole) the bound is meaningless
            unsure |= (ea > 0) & (np.abs(x) <= 2 * ea)
        prop = np.where(ea > 0, DERIVATIVE[fn](x, r64) * ea * 1.01, 0.0)
        if fn in ("exp", "exp2"):
            prop = np.where(ea > 0, prop * np.exp(np.minimum(ea, 50.0)) * 1.01, 0.0)
        prop = np.nan_to_num(prop, nan=np.inf)
        err = _rounded(prop, r, dtype) if fn in EXACT_MATH else _approx(prop, r, dtype)
        if fn in ("sin", "cos"):  # range reduction loses |x| * eps absolutely
            err = err + 4 * EPS[dtype] * np.abs(x)
        if fn in ("exp", "exp2"):  # the argument scaled by log2(e) first, one rounding
            err = err + 2 * EPS[dtype] * np.abs(x) * np.abs(r64)
    return Value(r, err, unsure, dtype, a.kind)


def where(c: Value, a: Value, b: Value, ct: str) -> Value:
    a, b = _cast_value(a, ct), _cast_value(b, ct)
    cond = c.val.astype(bool)
    r = np.where(cond, a.val, b.val).astype(NP[ct])
    err = np.where(cond, a.err, b.err)
    unsure = c.unsure | np.where(cond, a.unsure, b.unsure)
    return Value(r, err, unsure, ct, a.kind)


def fma(a: Value, b: Value, c: Value, ct: str) -> Value:
    a, b, c = (_cast_value(v, ct) for v in (a, b, c))
    x, y, z = f64(a.val), f64(b.val), f64(c.val)
    with np.errstate(**ERRSTATE):
        exact = _fma_nearest(x, y, z) if ct == "float64" else _fma_to_odd(x, y, z)
        r = round_float(exact, ct)
        prop = np.abs(x) * b.err + np.abs(y) * a.err + a.err * b.err + c.err
        err = _rounded(prop, r, ct)
    return Value(r, err, a.unsure | b.unsure | c.unsure, ct, a.kind)


def _fma_to_odd(x, y, z):
    """x*y+z from exact rationals, in float64 rounded to odd where inexact: float64 results
    only ever differ from round-to-nearest in the last bit, which the ops that use this
    (fp32 fma, rounded again by round_float) need as a sticky bit; float64 fma uses
    `_fma_nearest`."""
    from fractions import Fraction

    out = (x * y + z).astype(np.float64)
    flat, fx, fy, fz = (np.array(a.reshape(-1)) for a in np.broadcast_arrays(out, x, y, z))
    for i in range(flat.size):
        if not (np.isfinite(fx[i]) and np.isfinite(fy[i]) and np.isfinite(fz[i])):
            continue
        q = Fraction(float(fx[i])) * Fraction(float(fy[i])) + Fraction(float(fz[i]))
        if q == 0:
            continue
        near = float(q)
        if Fraction(near) == q or not np.isfinite(near):
            flat[i] = near
            continue
        if abs(Fraction(near)) > abs(q):
            near = float(np.nextafter(near, 0.0))
        flat[i] = (np.float64(near).view(np.uint64) | np.uint64(1)).view(np.float64)
    return flat.reshape(out.shape)


def _fma_nearest(x, y, z):
    from fractions import Fraction

    out = (x * y + z).astype(np.float64)
    flat, fx, fy, fz = (np.array(a.reshape(-1)) for a in np.broadcast_arrays(out, x, y, z))
    for i in range(flat.size):
        if np.isfinite(fx[i]) and np.isfinite(fy[i]) and np.isfinite(fz[i]):
            q = Fraction(float(fx[i])) * Fraction(float(fy[i])) + Fraction(float(fz[i]))
            if q != 0:
                flat[i] = float(q)
    return flat.reshape(out.shape)


def clamp(a: Value, lo: float, hi: float, dtype: str) -> Value:
    a = _cast_value(a, dtype)
    x = f64(a.val)
    r = round_float(np.clip(x, lo, hi), a.dtype)
    unsure = a.unsure | np.isnan(x)
    return Value(r, a.err, unsure, a.dtype, a.kind)


def load(program: Program, node, data: np.ndarray) -> Value:
    shape = {"2d": (program.block_m, program.block_n), "row": (program.block_n,),
             "col": (program.block_m,)}[node.kind]
    dtype = node.dtype
    block = np.full(shape, node.attr[0], dtype=np.int64)
    block, _ = cast_values(block, "int32", dtype)
    block = np.array(block, copy=True)
    block[tuple(slice(0, s) for s in data.shape)] = data
    return Value(block, np.zeros(shape), np.zeros(shape, bool), dtype, node.kind)
