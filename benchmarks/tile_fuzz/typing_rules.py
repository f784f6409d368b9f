"""Triton 3.6's typing rules, written out independently of our compiler so the fuzzer checks
them (semantic.py's computation_type_impl, integer_promote_impl, truediv, the sum dtype).

A Python number operand is a 'scalar' here (Triton's `numbers.Number`): it takes part in the
promotion only when its kind (bool < int < float) is above the tensor's.
"""

from __future__ import annotations

from .program import BITS, FLOATS, INTS, SIGNED, UNSIGNED, is_float

KIND = {"int1": 0, **{t: 1 for t in INTS}, **{t: 2 for t in FLOATS}}


def literal_dtype(value) -> str:
    if isinstance(value, bool):
        return "int1"
    if isinstance(value, int):
        return "int32" if -2**31 <= value < 2**31 else "int64"
    return "float32"


def is_signed(dtype: str) -> bool:
    """Triton counts int1 among the unsigned types (UINT_TYPES)."""
    return dtype in SIGNED


def integer_promote(a: str, b: str) -> str:
    if a == b:
        return a
    wa, wb = BITS[a], BITS[b]
    if is_signed(a) == is_signed(b):
        return a if wa >= wb else b
    unsigned, signed = (a, b) if not is_signed(a) else (b, a)
    return unsigned if BITS[unsigned] >= BITS[signed] else signed


def computation_type(a: str, b: str, a_literal=False, b_literal=False, div_or_mod=False):
    """The dtype both operands of an arithmetic op are cast to; None where Triton raises."""
    if a_literal != b_literal:
        scalar, tensor = (a, b) if a_literal else (b, a)
        if KIND[scalar] <= KIND[tensor]:
            if div_or_mod and tensor in ("float16", "bfloat16"):
                return "float32"
            return tensor
    if "float64" in (a, b):
        return "float64"
    if "float32" in (a, b):
        return "float32"
    if "float16" in (a, b):
        return "float32" if div_or_mod else "float16"
    if a == b == "bfloat16":
        return "float32" if div_or_mod else "bfloat16"
    if "bfloat16" in (a, b):
        return "float32"
    if div_or_mod and is_signed(a) != is_signed(b):
        return None  # "Cannot use /, //, or % with uint and int"
    return integer_promote(a, b)


ARITH = ("+", "-", "*")
COMPARE = ("<", "<=", ">", ">=", "==", "!=")
BITWISE = ("&", "|", "^")
SHIFT = ("<<", ">>")


def binary_result(sym: str, a: str, b: str, b_literal=False):
    """(computation dtype, result dtype) of `a <sym> b`; None where Triton refuses it."""
    if sym in ("maximum", "minimum"):
        # no bf16 max/min in hardware: tl.maximum / tl.minimum / tl.clamp take bf16 to fp32
        a, b = promote_bf16(a), promote_bf16(b)
    if sym in ARITH or sym in ("maximum", "minimum"):
        ct = computation_type(a, b, False, b_literal)
        return (ct, ct) if ct else None
    if sym == "/":
        ct = computation_type(a, b, False, b_literal, div_or_mod=True)
        if ct is None:
            return None
        ct = ct if is_float(ct) else "float32"
        return ct, ct
    if sym in ("//", "%"):
        ct = computation_type(a, b, False, b_literal, div_or_mod=True)
        if ct is None or (sym == "//" and is_float(ct)):
            return None
        return ct, ct
    if sym in ("div_rn", "fdiv"):
        return ("float32", "float32") if a == b == "float32" else None
    if sym in COMPARE:
        ct = computation_type(a, b, False, b_literal)
        return (ct, "int1") if ct else None
    if sym in BITWISE or sym in SHIFT:
        if is_float(a) or (not b_literal and is_float(b)):
            return None
        ct = computation_type(a, b, False, b_literal)
        return ct, ct
    raise ValueError(sym)


def promote_bf16(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


def sum_dtype(dtype: str) -> str:
    """tl.sum / tl.cumsum accumulate integers narrower than 32 bits in (u)int32."""
    if dtype in UNSIGNED and BITS[dtype] < 32:
        return "uint32"
    if dtype == "int1":
        return "uint32"
    if dtype in SIGNED and BITS[dtype] < 32:
        return "int32"
    return dtype


def minmax_dtype(dtype: str) -> str:
    """tl.max / tl.min (without indices) compute 8/16-bit types in fp32 / int32."""
    if BITS[dtype] < 32:
        return "float32" if is_float(dtype) else "int32"
    return dtype


def scan_dtype(fn: str, dtype: str) -> str:
    """tl.cumsum / tl.cumprod compute bf16 in fp32; cumsum also widens like tl.sum."""
    if dtype == "bfloat16":
        dtype = "float32"
    return sum_dtype(dtype) if fn == "cumsum" else dtype
