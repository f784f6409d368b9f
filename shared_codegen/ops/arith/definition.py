"""Elementwise arithmetic: constants, binary ops, comparisons, select, casts, pointer offsets.

Operands of a binary op already have one type (the frontends' semantic layers promote and
broadcast first), so the type rule is "the result has the operands' type" (i1 for compares).
Integer division and remainder truncate toward zero like C and PTX (`div.s32`), which is
Triton's semantics for `//` and `%` on integers.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import (IRType, PointerType, ScalarType, TensorType, float8e4nv,
                                     float8e5, int1, int64, same_shape_type, scalar_of)
from shared_codegen.layouts.relations import ANY_LAYOUT, SAME_LAYOUT
from shared_codegen.ops.arith.axis import (binary_axis_rule, cast_axis_rule, compare_axis_rule,
                                           rule_add_sub, rule_constant, rule_select)

# ---------------------------------------------------------------------------------------
# constants


class ConstantOp(OpDef):
    """`arith.constant {value}`: a scalar, or a tensor filled with one value (a splat).

    `{undef}`: a stand-in no path reads, such as the initial value of a loop-carried value
    that the first iteration sets before reading it (tile/passes/loop_flatten.py). It is a
    zero everywhere (ptxas prefers that to an undefined register, as Triton found), but the
    axis analysis knows everything of it, as Triton's does of `ub.poison`, so a merge keeps
    what the values actually read say."""

    name = "arith.constant"
    layout_rule = ANY_LAYOUT
    axis_rule = staticmethod(rule_constant)
    pure = cheap = True
    user_name = "gl.full"

    @staticmethod
    def build(b, value, ty: IRType, undef: bool = False):
        attrs = {"value": value, "undef": True} if undef else {"value": value}
        return b.create("arith.constant", [], [ty], attrs).result

    def verify(self, op):
        if op.operands:
            raise VerificationError("takes no operands", op)

    def interpret(self, op, frame):
        ty = op.result.type
        elem = scalar_of(ty)
        value = op.attrs["value"]
        if isinstance(elem, PointerType):
            dtype = np.dtype(np.int64)
        else:
            dtype = elem.np
        if isinstance(ty, TensorType):
            return [np.full(ty.shape, value, dtype=dtype)]
        return [np.asarray(value, dtype=dtype)[()]]


# ---------------------------------------------------------------------------------------
# binary ops


def _trunc_div(a, b):
    """C-style integer division (toward zero); division by zero gives 0 instead of raising."""
    a = np.asarray(a)
    b = np.asarray(b)
    safe_b = np.where(b == 0, 1, b).astype(b.dtype)
    q = a // safe_b
    adjust = ((a % safe_b) != 0) & ((a < 0) != (safe_b < 0))
    q = q + adjust.astype(q.dtype)
    return np.where(b == 0, 0, q).astype(a.dtype)


def _trunc_rem(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    safe_b = np.where(b == 0, 1, b).astype(b.dtype)
    q = _trunc_div(a, safe_b)
    return np.where(b == 0, 0, a - q * safe_b).astype(a.dtype)


def _udiv(a, b):
    safe_b = np.where(b == 0, 1, b).astype(np.asarray(b).dtype)
    return np.where(b == 0, 0, a // safe_b).astype(np.asarray(a).dtype)


def _urem(a, b):
    safe_b = np.where(b == 0, 1, b).astype(np.asarray(b).dtype)
    return np.where(b == 0, 0, a % safe_b).astype(np.asarray(a).dtype)


def _shift_amount(a, b):
    bits = np.asarray(a).dtype.itemsize * 8
    return np.asarray(b).astype(np.int64), bits


def _shl(a, b):
    amount, bits = _shift_amount(a, b)
    a = np.asarray(a)
    out = np.left_shift(a, np.minimum(amount, bits - 1).astype(a.dtype))
    return np.where(amount >= bits, 0, out).astype(a.dtype)


def _shr(a, b):
    amount, bits = _shift_amount(a, b)
    a = np.asarray(a)
    return np.right_shift(a, np.minimum(amount, bits - 1).astype(a.dtype)).astype(a.dtype)


def _remf(a, b):
    return np.fmod(a, b)


def _as_unsigned(fn):
    """Run an integer rule on the unsigned view of signed storage (for ui ops on i types)."""

    def rule(a, b):
        a = np.asarray(a)
        b = np.asarray(b)
        if a.dtype.kind == "u":
            return fn(a, b)
        udt = np.dtype(f"u{a.dtype.itemsize}")
        return fn(a.view(udt) if a.ndim else a.astype(udt), b.astype(udt)).astype(a.dtype)

    return rule


BINARY_RULES = {
    "arith.addi": np.add, "arith.addf": np.add,
    "arith.subi": np.subtract, "arith.subf": np.subtract,
    "arith.muli": np.multiply, "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    # IEEE round-to-nearest division (`tl.div_rn`); plain `/` on fp32 may be approximate.
    "tt.precise_divf": np.divide,
    "arith.divsi": _trunc_div, "arith.divui": _as_unsigned(_udiv),
    "arith.remsi": _trunc_rem, "arith.remui": _as_unsigned(_urem), "arith.remf": _remf,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.shli": _shl, "arith.shrsi": _shr, "arith.shrui": _as_unsigned(_shr),
    "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
    "arith.maxui": _as_unsigned(np.maximum), "arith.minui": _as_unsigned(np.minimum),
    # maxnum/minnum ignore a NaN operand; maximum/minimum propagate it (IEEE 754-2019).
    "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
    "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
}

# What the frontends' operators build, by operand kind (floating, signed, unsigned integer).
_OPERATORS = {
    "add": ("arith.addf", "arith.addi", "arith.addi"),
    "sub": ("arith.subf", "arith.subi", "arith.subi"),
    "mul": ("arith.mulf", "arith.muli", "arith.muli"),
    "truediv": ("arith.divf", None, None),
    "floordiv": (None, "arith.divsi", "arith.divui"),
    "mod": ("arith.remf", "arith.remsi", "arith.remui"),
    "and": (None, "arith.andi", "arith.andi"),
    "or": (None, "arith.ori", "arith.ori"),
    "xor": (None, "arith.xori", "arith.xori"),
    "lshift": (None, "arith.shli", "arith.shli"),
    "rshift_s": (None, "arith.shrsi", "arith.shrsi"),
    "rshift_u": (None, "arith.shrui", "arith.shrui"),
    "max": ("arith.maxnumf", "arith.maxsi", "arith.maxui"),
    "min": ("arith.minnumf", "arith.minsi", "arith.minui"),
    "maximum": ("arith.maximumf", None, None),
    "minimum": ("arith.minimumf", None, None),
}


def operator_op_name(operator: str, floating: bool, signed: bool) -> str:
    """The binary op that `operator` ("add", "floordiv", "max", ...) builds on operands of
    one kind; a KeyError for an operator the kind has not."""
    name = _OPERATORS[operator][0 if floating else 1 if signed else 2]
    if name is None:
        raise KeyError(operator)
    return name


FLOAT_BINARY = {k for k in BINARY_RULES if k.endswith("f") and k != "arith.andi"}
INT_BINARY = set(BINARY_RULES) - FLOAT_BINARY


# maximum/minimum that return NaN when either side is one (`propagate_nan=ALL`).
NAN_PROPAGATING = frozenset({"arith.maximumf", "arith.minimumf"})


class BinaryOp(OpDef):
    names = tuple(BINARY_RULES)
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(binary_axis_rule)
    spelling = {
        "arith.addi": "+", "arith.addf": "+", "arith.subi": "-", "arith.subf": "-",
        "arith.muli": "*", "arith.mulf": "*", "arith.divf": "/", "arith.divsi": "//",
        "arith.divui": "//", "arith.remsi": "%", "arith.remui": "%", "arith.remf": "%",
        "arith.andi": "&", "arith.ori": "|", "arith.xori": "^", "arith.shli": "<<",
        "arith.shrsi": ">>", "arith.shrui": ">>", "arith.maxsi": "maximum",
        "arith.maxui": "maximum", "arith.minsi": "minimum", "arith.minui": "minimum",
        "arith.maxnumf": "maximum", "arith.minnumf": "minimum", "tt.precise_divf": "div_rn",
        "arith.maximumf": "maximum", "arith.minimumf": "minimum",
    }
    # Integer math is index arithmetic; float math is not merged or recomputed.
    pure = cheap = frozenset(INT_BINARY)

    @staticmethod
    def build(b, name: str, lhs, rhs):
        return b.create(name, [lhs, rhs], [lhs.type]).result

    def verify(self, op):
        lhs, rhs = op.operands
        if lhs.type != rhs.type:
            raise VerificationError(f"operand types differ: {lhs.type} vs {rhs.type}", op)
        elem = scalar_of(lhs.type)
        want_float = op.name in FLOAT_BINARY
        if isinstance(elem, ScalarType) and elem.is_floating() != want_float:
            raise VerificationError(f"needs {'float' if want_float else 'integer'} operands, "
                                    f"got {elem}", op)
        if op.result.type != lhs.type:
            raise VerificationError(f"result type {op.result.type} != operand type", op)

    def interpret(self, op, frame):
        a = frame[op.operands[0]]
        b = frame[op.operands[1]]
        dtype = np.asarray(a).dtype
        with np.errstate(all="ignore"):
            out = BINARY_RULES[op.name](a, b)
        return [np.asarray(out).astype(dtype, copy=False)[()] if np.ndim(out) == 0
                else np.asarray(out).astype(dtype, copy=False)]


class AddPtrOp(OpDef):
    """`tt.addptr ptr, offset`: advance a pointer by `offset` elements (not bytes)."""

    name = "tt.addptr"
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(rule_add_sub)
    spelling = "+"
    pure = cheap = True

    @staticmethod
    def build(b, ptr, offset):
        return b.create("tt.addptr", [ptr, offset], [ptr.type]).result

    def verify(self, op):
        ptr, off = op.operands
        if not isinstance(scalar_of(ptr.type), PointerType):
            raise VerificationError(f"first operand must be a pointer, got {ptr.type}", op)
        if not scalar_of(off.type).is_int():
            raise VerificationError(f"offset must be an integer, got {off.type}", op)
        if isinstance(ptr.type, TensorType) != isinstance(off.type, TensorType) or (
                isinstance(ptr.type, TensorType) and ptr.type.shape != off.type.shape):
            raise VerificationError("pointer and offset shapes differ", op)

    def interpret(self, op, frame):
        ptr = np.asarray(frame[op.operands[0]], dtype=np.int64)
        off = np.asarray(frame[op.operands[1]]).astype(np.int64)
        size = scalar_of(op.operands[0].type).element.itemsize
        return [(ptr + off * size)[()]]


# ---------------------------------------------------------------------------------------
# comparisons and select

CMPI = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
    "sgt": np.greater, "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal,
    "ugt": np.greater, "uge": np.greater_equal,
}
# Ordered predicates are false when either side is NaN; `une` (Triton's `!=`) is true then.
CMPF = {
    "oeq": np.equal, "one": lambda a, b: np.not_equal(a, b) & ~np.isnan(a) & ~np.isnan(b),
    "olt": np.less, "ole": np.less_equal, "ogt": np.greater, "oge": np.greater_equal,
    "une": np.not_equal, "ueq": lambda a, b: np.equal(a, b) | np.isnan(a) | np.isnan(b),
}


INT_COMPARE, FLOAT_COMPARE = "arith.cmpi", "arith.cmpf"


class CompareOp(OpDef):
    names = (INT_COMPARE, FLOAT_COMPARE)
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(compare_axis_rule)
    pure = cheap = frozenset({"arith.cmpi"})

    @staticmethod
    def build(b, name: str, predicate: str, lhs, rhs):
        return b.create(name, [lhs, rhs], [same_shape_type(lhs.type, int1)],
                        {"predicate": predicate}).result

    def print_attrs(self, op):
        return f" {{predicate = {op.attrs['predicate']}}}"

    def verify(self, op):
        lhs, rhs = op.operands
        if lhs.type != rhs.type:
            raise VerificationError(f"operand types differ: {lhs.type} vs {rhs.type}", op)
        table = CMPI if op.name == "arith.cmpi" else CMPF
        if op.attrs.get("predicate") not in table:
            raise VerificationError(f"unknown predicate {op.attrs.get('predicate')!r}", op)

    def interpret(self, op, frame):
        a = np.asarray(frame[op.operands[0]])
        b = np.asarray(frame[op.operands[1]])
        pred = op.attrs["predicate"]
        if op.name == "arith.cmpi" and pred[0] == "u" and a.dtype.kind == "i":
            udt = np.dtype(f"u{a.dtype.itemsize}")
            a, b = a.astype(udt), b.astype(udt)
        if a.dtype.kind == "f" or a.dtype.name in ("bfloat16",) or "float8" in a.dtype.name:
            a, b = a.astype(np.float64), b.astype(np.float64)
        table = CMPI if op.name == "arith.cmpi" else CMPF
        with np.errstate(invalid="ignore"):
            return [np.asarray(table[pred](a, b), dtype=np.bool_)[()]]


class SelectOp(OpDef):
    name = "arith.select"
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(rule_select)
    pure = cheap = True

    @staticmethod
    def build(b, cond, x, y):
        return b.create("arith.select", [cond, x, y], [x.type]).result

    def verify(self, op):
        cond, x, y = op.operands
        if x.type != y.type:
            raise VerificationError(f"branch types differ: {x.type} vs {y.type}", op)
        if scalar_of(cond.type) != int1:
            raise VerificationError(f"condition must be i1, got {cond.type}", op)

    def interpret(self, op, frame):
        c, x, y = (frame[v] for v in op.operands)
        out = np.where(c, x, y)
        return [out.astype(np.asarray(x).dtype, copy=False)[()]]


# ---------------------------------------------------------------------------------------
# casts

BITCAST = "tt.bitcast"  # reinterprets the bits, where the other casts convert the value
FP_TO_FP = "tt.fp_to_fp"  # fp8 conversions and explicit rounding modes
CAST_OPS = ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
            "arith.fptoui", "arith.extsi", "arith.extui", "arith.trunci", BITCAST,
            FP_TO_FP, "tt.ptr_to_int", "tt.int_to_ptr")
# The casts of index arithmetic (cheap to recompute per use).
INDEX_CASTS = ("arith.extsi", "arith.extui", "arith.trunci", "tt.int_to_ptr", "tt.ptr_to_int")

# Saturating limits of the fp8 formats: Triton converts with `cvt.rn.satfinite`, so values
# beyond the largest finite number clamp instead of becoming NaN/inf.
_FP8_MAX = {float8e4nv: 448.0, float8e5: 57344.0}


def _cast_value(x, src: IRType, dst: IRType, op_name: str):
    x = np.asarray(x)
    if op_name == "tt.bitcast":
        if isinstance(dst, PointerType) or isinstance(src, PointerType):
            return x.astype(np.int64)
        return x.view(dst.np) if x.ndim else x.reshape(1).view(dst.np)[0]
    if op_name == "tt.ptr_to_int":
        return x.astype(dst.np)
    if op_name == "tt.int_to_ptr":
        return x.astype(np.int64)
    if op_name in ("arith.extui", "arith.uitofp") and x.dtype.kind == "i":
        x = x.astype(np.dtype(f"u{x.dtype.itemsize}"))
    if op_name in ("arith.extsi", "arith.sitofp") and x.dtype.kind == "u":
        x = x.astype(np.dtype(f"i{x.dtype.itemsize}"))
    if isinstance(dst, ScalarType) and dst in _FP8_MAX:
        limit = _FP8_MAX[dst]
        x = np.clip(x.astype(np.float32), -limit, limit)
    if op_name in ("arith.fptosi", "arith.fptoui"):
        # Float -> int conversion on the GPU saturates and maps NaN to 0 (cvt.rzi.sat);
        # numpy's is undefined out of range, so clamp first.
        info = np.iinfo(dst.np) if dst != int1 else None
        xf = np.nan_to_num(x.astype(np.float64), nan=0.0)
        if info is not None:
            xf = np.clip(np.trunc(xf), info.min, info.max)
        return xf.astype(dst.np)
    if dst == int1:
        return x != 0
    return x.astype(dst.np)


class CastOp(OpDef):
    names = CAST_OPS
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(cast_axis_rule)
    pure = cheap = frozenset(INDEX_CASTS)

    @staticmethod
    def build(b, name: str, x, dst_elem: IRType, **attrs):
        return b.create(name, [x], [same_shape_type(x.type, dst_elem)], attrs).result

    def verify(self, op):
        src = op.operands[0].type
        dst = op.result.type
        if isinstance(src, TensorType) != isinstance(dst, TensorType) or (
                isinstance(src, TensorType) and src.shape != dst.shape):
            raise VerificationError(f"cast changes shape: {src} -> {dst}", op)
        if op.name == "tt.bitcast":
            s, d = scalar_of(src), scalar_of(dst)
            if s.bits != d.bits:
                raise VerificationError(f"bitcast between types of different widths: "
                                        f"{s} ({s.bits} bits) -> {d} ({d.bits} bits)", op)

    def interpret(self, op, frame):
        x = frame[op.operands[0]]
        src = scalar_of(op.operands[0].type)
        dst = scalar_of(op.result.type)
        with np.errstate(all="ignore"):
            out = _cast_value(x, src, dst, op.name)
        return [np.asarray(out)[()]]


def cast_op_name(src: IRType, dst: IRType) -> str:
    """Which cast op converts `src` to `dst` (scalars or pointers); '' when none is needed."""
    if src == dst:
        return ""
    if isinstance(src, PointerType) and isinstance(dst, PointerType):
        return "tt.bitcast"
    if isinstance(src, PointerType):
        return "tt.ptr_to_int"
    if isinstance(dst, PointerType):
        return "tt.int_to_ptr"
    if src.is_floating() and dst.is_floating():
        if src.is_fp8() or dst.is_fp8() or (src.is_bf16() and dst.is_fp16()) or (
                src.is_fp16() and dst.is_bf16()):
            return "tt.fp_to_fp"
        return "arith.extf" if dst.bits > src.bits else "arith.truncf"
    if src.is_int() and dst.is_floating():
        if src == int1:
            return "arith.uitofp"
        return "arith.sitofp" if src.is_int_signed() else "arith.uitofp"
    if src.is_floating() and dst.is_int():
        if dst == int1:
            return "arith.cmpf"  # x != 0, built by the caller
        return "arith.fptosi" if dst.is_int_signed() else "arith.fptoui"
    # int -> int
    if dst == int1:
        return "arith.cmpi"  # x != 0, built by the caller
    if dst.bits > src.bits:
        return "arith.extsi" if src.is_int_signed() and src != int1 else "arith.extui"
    if dst.bits < src.bits:
        return "arith.trunci"
    return "tt.bitcast"  # same width, different signedness: same bits


__all__ = ["ConstantOp", "BinaryOp", "AddPtrOp", "CompareOp", "SelectOp", "CastOp",
           "cast_op_name", "BINARY_RULES", "FLOAT_BINARY", "INT_BINARY", "int64",
           "operator_op_name", "INT_COMPARE", "FLOAT_COMPARE", "FP_TO_FP"]
