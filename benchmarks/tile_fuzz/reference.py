"""The numpy reference of a fuzzed program, with dtype-faithful semantics and error bounds.

Every value is computed on the whole block (masked lanes hold the load's `other`, as on the
device) and carries, per element:

- `val`: the value in the node's dtype, computed the way Triton defines it: integers wrap;
  exactly rounded float ops (+ - * of any float type, fp64 division, casts, sqrt_rn, floor)
  compute in float64 and round once to the op's dtype, so they match the device bit for bit;
- `err`: a bound on how far a correct implementation may be from `val` (0 for exact ops on
  exact inputs; approximate math such as `ex2.approx`, fp32 `/` (`div.full`), and reductions
  whose order is free add their own part, and inputs' bounds propagate);
- `unsure`: the element cannot be checked: it depends on undefined behaviour (float to int out
  of range, NaN into max/min) or on a discontinuous op (floor, comparison, cast to int)
  whose input lies within its error bound of the jump.

`check` compares an output against it: exact where err is 0, within err elsewhere, and skips
unsure elements (counted, so a program that checks nothing is visible).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .program import Program, is_float

NP = {
    "int1": np.dtype(np.bool_), "int8": np.dtype(np.int8), "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32), "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16), "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64), "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16), "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64), "float8e4nv": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8e5": np.dtype(ml_dtypes.float8_e5m2),
}
EPS = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53,
       "float8e4nv": 2.0**-4, "float8e5": 2.0**-3}
TINY = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 0.0,
        "float8e4nv": 2.0**-9, "float8e5": 2.0**-16}
# Triton converts to fp8 with `cvt.rn.satfinite`: past the largest finite value it clamps.
FP8_MAX = {"float8e4nv": 448.0, "float8e5": 57344.0}
# Approximate math (`ex2.approx`, `lg2.approx`, `sin.approx`, `div.full`) in ulps of the result.
APPROX_ULPS = 8


@dataclass
class Value:
    val: np.ndarray
    err: np.ndarray  # float64 bound, same shape
    unsure: np.ndarray  # bool, same shape
    dtype: str
    kind: str


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def round_float(x64: np.ndarray, dtype: str) -> np.ndarray:
    """float64 -> `dtype` with one round-to-nearest-even (bf16 through round-to-odd fp32, so
    the two steps round like one)."""
    if dtype == "float64":
        return x64.astype(np.float64)
    if dtype in FP8_MAX:  # sources are fp16/bf16/fp32, exact in fp32: one rounding
        with np.errstate(invalid="ignore"):
            clipped = np.clip(x64, -FP8_MAX[dtype], FP8_MAX[dtype])
        return clipped.astype(np.float32).astype(NP[dtype])
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):
            return x64.astype(NP[dtype])
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = x64.astype(np.float32)
        back = f32.astype(np.float64)
        inexact = np.isfinite(x64) & (back != x64)
        # truncate toward zero, then force the last bit to 1 (round to odd)
        toward_zero = np.where(np.abs(back) > np.abs(x64),
                               np.nextafter(f32, np.float32(0)), f32)
        bits = toward_zero.view(np.uint32) | np.uint32(1)
        f32 = np.where(inexact, bits.view(np.float32), f32)
        return f32.astype(ml_dtypes.bfloat16)


def cast_values(val: np.ndarray, src: str, dst: str):
    """Triton's `x.to(dst)`: (values, unsure mask)."""
    unsure = np.zeros(val.shape, bool)
    if src == dst:
        return val.copy(), unsure
    if dst == "int1":
        return val != 0, unsure  # ints: `x != 0` (floats never reach here)
    if src == "int1":
        return val.astype(np.uint8).astype(NP[dst]), unsure
    if not is_float(src) and not is_float(dst):
        return val.astype(NP[dst]), unsure  # two's complement wrap / sign extension
    if not is_float(src):  # int -> float, one rounding
        if dst == "bfloat16":
            unsure = np.abs(val.astype(np.float64)) >= 2.0**53
            return round_float(val.astype(np.float64), dst), unsure
        with np.errstate(over="ignore"):
            return val.astype(NP[dst]), unsure
    x = f64(val)
    if is_float(dst):
        return round_float(x, dst), unsure
    # float -> int truncates; NaN and values out of range are undefined (LLVM poison)
    t = np.trunc(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0))
    info = np.iinfo(NP[dst])
    unsure = ~np.isfinite(x) | (t < float(info.min)) | (t >= float(info.max) + 1.0)
    t = np.where(unsure, 0.0, t)
    return t.astype(NP[dst]), unsure


def _cast_value(v: Value, dst: str) -> Value:
    val, unsure = cast_values(v.val, v.dtype, dst)
    unsure = unsure | v.unsure
    err = v.err
    if is_float(v.dtype) and not is_float(dst):
        # truncation is discontinuous: unsure where the bound straddles an integer
        x = f64(v.val)
        with np.errstate(invalid="ignore"):
            lo, hi = np.trunc(x - err), np.trunc(x + err)
        unsure = unsure | (lo != hi) & (err > 0)
        err = np.zeros(val.shape)
    elif is_float(dst):
        err = _rounded(err, val, dst)
    return Value(val, err, unsure, dst, v.kind)


def _rounded(err, val, dtype):
    """An error bound after one more rounding to `dtype` (only inexact inputs can make the
    device round differently from the reference: two inputs apart by d round to results
    apart by at most d and one ulp, 2 * EPS relative)."""
    if not is_float(dtype):
        return np.zeros(np.shape(val))
    with np.errstate(invalid="ignore", over="ignore"):
        extra = 2 * EPS[dtype] * np.abs(f64(val)) + TINY[dtype]
        return np.where(err > 0, err + extra, err)


def _approx(err, val, dtype):
    """A bound for an approximate op: its own ulps on top of the propagated part."""
    with np.errstate(invalid="ignore", over="ignore"):
        return err + APPROX_ULPS * EPS[dtype] * (np.abs(f64(val)) + 1.0) + TINY[dtype]


def broadcast(v: Value, kind: str, program: Program) -> Value:
    """`v` laid out for an expression of `kind` (the `[None, :]` / `[:, None]` of render)."""
    shape = {"2d": (program.block_m, program.block_n), "row": (program.block_n,),
             "col": (program.block_m,), "scalar": ()}[kind]

    def spread(a):
        if kind == "2d" and v.kind == "row":
            a = a[None, :]
        elif kind == "2d" and v.kind == "col":
            a = a[:, None]
        return np.broadcast_to(a, shape)

    return Value(spread(v.val), spread(v.err), spread(v.unsure), v.dtype, kind)
