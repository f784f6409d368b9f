"""Elementwise math: exp, log, sqrt, trigonometry, erf, abs, floor/ceil, fma.

16-bit float inputs are computed in fp32 and rounded back, which is what the GPU lowering
does too (PTX has no fp16 `ex2.approx` with fp32 accuracy), so the interpreter and the device
agree to within the approximate instructions' error.
"""

from __future__ import annotations

import math

import numpy as np

from shared_codegen.analysis.axis_info import rule_elementwise
from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import scalar_of
from shared_codegen.layouts.relations import SAME_LAYOUT


def _erf(x):
    # numpy has no erf; math.erf per element keeps the dependency list short. Tiles are small.
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.fromiter((math.erf(v) for v in flat), dtype=np.float64, count=flat.size)
    return out.reshape(np.shape(x))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


UNARY_FLOAT_RULES = {
    "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
    "math.sqrt": np.sqrt, "math.rsqrt": _rsqrt, "math.sin": np.sin, "math.cos": np.cos,
    "math.erf": _erf, "math.floor": np.floor, "math.ceil": np.ceil, "math.absf": np.abs,
    "tt.precise_sqrt": np.sqrt,
}


class UnaryFloatOp(OpDef):
    names = tuple(UNARY_FLOAT_RULES)
    layout_rule = SAME_LAYOUT
    spelling = {"math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2",
                "math.sqrt": "sqrt", "tt.precise_sqrt": "sqrt_rn", "math.rsqrt": "rsqrt",
                "math.sin": "sin", "math.cos": "cos", "math.erf": "erf", "math.floor": "floor",
                "math.ceil": "ceil", "math.absf": "abs"}
    axis_rule = staticmethod(rule_elementwise)

    @staticmethod
    def build(b, name: str, x):
        return b.create(name, [x], [x.type]).result

    def verify(self, op):
        elem = scalar_of(op.operands[0].type)
        if not elem.is_floating():
            raise VerificationError(f"needs a float operand, got {elem}", op)
        if op.result.type != op.operands[0].type:
            raise VerificationError("result type must equal the operand type", op)

    def interpret(self, op, frame):
        x = np.asarray(frame[op.operands[0]])
        dtype = x.dtype
        compute = np.float64 if dtype == np.float64 else np.float32
        with np.errstate(all="ignore"):
            out = UNARY_FLOAT_RULES[op.name](x.astype(compute))
        return [np.asarray(out).astype(dtype)[()]]


class AbsIntOp(OpDef):
    name = "math.absi"
    layout_rule = SAME_LAYOUT
    spelling = "abs"
    axis_rule = staticmethod(rule_elementwise)

    @staticmethod
    def build(b, x):
        return b.create("math.absi", [x], [x.type]).result

    def interpret(self, op, frame):
        x = np.asarray(frame[op.operands[0]])
        return [np.abs(x).astype(x.dtype)[()]]


class FmaOp(OpDef):
    """`math.fma a, b, c` = a * b + c with one rounding."""

    name = "math.fma"
    layout_rule = SAME_LAYOUT
    spelling = "fma"
    axis_rule = staticmethod(rule_elementwise)

    @staticmethod
    def build(b, x, y, z):
        return b.create("math.fma", [x, y, z], [x.type]).result

    def verify(self, op):
        types = {v.type for v in op.operands}
        if len(types) != 1:
            raise VerificationError("operands of fma must have one type", op)

    def interpret(self, op, frame):
        x, y, z = (np.asarray(frame[v]) for v in op.operands)
        return [fma_rounded_once(x, y, z)[()]]


def fma_rounded_once(x, y, z):
    """x * y + z rounded once to the operands' dtype, as `fma.rn` does.

    float64 holds the product of two fp32 (or smaller) values exactly, but the add rounds: an
    error-free sum (TwoSum) finds the part that rounding dropped, and rounding to odd keeps it
    as a sticky bit so the final rounding to fp32 is the single correct one (53 >= 24 + 2).
    float64 operands need the exact rational product-sum (libdevice's `fma` rule)."""
    x, y, z = np.broadcast_arrays(x, y, z)
    dtype = x.dtype
    if dtype == np.float64:
        from shared_codegen.ops.extern.numpy_rules import fma_nearest

        return np.asarray(fma_nearest(x, y, z), dtype=dtype)
    with np.errstate(all="ignore"):
        product = x.astype(np.float64) * y.astype(np.float64)
        addend = z.astype(np.float64)
        total = product + addend
        back = total - product
        dropped = (product - (total - back)) + (addend - back)
        inexact = np.isfinite(total) & (dropped != 0)
        past_exact = ((total > 0) & (dropped < 0)) | ((total < 0) & (dropped > 0))
        toward_zero = np.where(past_exact, np.nextafter(total, 0.0), total)
        odd = (toward_zero.view(np.uint64) | np.uint64(1)).view(np.float64)
        return np.where(inexact, odd, total).astype(dtype)

