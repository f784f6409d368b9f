"""fp8 conversions for targets without the fp8 `cvt` forms (before sm_89), in integer and
fp16 arithmetic, as Triton 3.6 does for pre-Hopper GPUs.

Only float8e5 (e5m2) is convertible there: it is the top byte of an fp16 (same exponent
bias, 2 of fp16's 10 mantissa bits), so widening is a shift and narrowing is a rounding of the
fp16 bit pattern. float8e4nv has no such relation and Triton refuses it before sm_89; so do we.
"""

from __future__ import annotations

import re

from llvmlite import ir

from shared_codegen.lowering.context import F16, F32, I8, I16, LoweringError

# The fp8 `cvt` forms (cvt.rn.satfinite.e5m2x2.f32, cvt.rn.f16x2.e5m2x2) need sm_89+
# (PTX ISA 9.7.9.21).
FIRST_SM_WITH_FP8_CVT = 89
E5M2_MAX_FINITE = 0x7B  # 57344: where satfinite clamps
E5M2_NAN = 0x7F


def target_sm(ctx) -> int:
    match = re.match(r"sm_(\d+)", getattr(ctx, "target", "sm_90a") or "sm_90a")
    return int(match.group(1)) if match else 90


def needs_software_fp8(ctx, elem) -> bool:
    """True where fp8 `elem` must be converted in software; raises where it cannot be."""
    if target_sm(ctx) >= FIRST_SM_WITH_FP8_CVT:
        return False
    if elem.name == "fp8e4nv":
        raise LoweringError(f"fp8e4nv (tl.float8e4nv) data type is not supported on CUDA arch "
                            f"< 89 (target {ctx.target}); use tl.float8e5 or target sm_89+")
    return True


def _const16(value: int) -> ir.Constant:
    return ir.Constant(I16, value)


def e5m2_to_f16(ctx, byte: ir.Value) -> ir.Value:
    """e5m2 -> fp16, exact: the byte is the fp16's high byte."""
    b = ctx.builder
    return b.bitcast(b.shl(b.zext(byte, I16), _const16(8)), F16)


def f32_to_e5m2(ctx, x: ir.Value) -> ir.Value:
    """fp32 -> e5m2 rounded to nearest even, saturating to +-57344 (what
    `cvt.rn.satfinite.e5m2x2.f32` gives); NaN stays NaN.

    Step 1: fp32 -> fp16 rounded to odd (round to nearest, step back toward zero if that went
    away from x, and set the last bit when inexact), so the rounding of step 2 is the only one
    that counts (fp16 keeps 10 >= 2 + 2 mantissa bits: the classic double-rounding bound).
    Step 2: round the fp16 bit pattern to its high byte (add 0x7F plus the kept lowest bit,
    shift); the pattern is monotonic across subnormals, so no special case is needed."""
    b = ctx.builder
    half = b.fptrunc(x, F16)
    back = b.fpext(half, F32)
    inexact = b.fcmp_ordered("!=", back, x)
    fabs = "llvm.fabs.f32"
    went_away = b.fcmp_ordered(">", ctx.intrinsic(fabs, F32, [back]),
                               ctx.intrinsic(fabs, F32, [x]))
    bits = b.bitcast(half, I16)
    bits = b.select(b.and_(inexact, went_away), b.sub(bits, _const16(1)), bits)
    bits = b.select(inexact, b.or_(bits, _const16(1)), bits)
    sign = b.and_(bits, _const16(0x8000))
    magnitude = b.and_(bits, _const16(0x7FFF))
    keep_bit = b.and_(b.lshr(magnitude, _const16(8)), _const16(1))
    rounded = b.lshr(b.add(magnitude, b.add(_const16(0x7F), keep_bit)), _const16(8))
    saturated = b.select(b.icmp_unsigned(">", rounded, _const16(E5M2_MAX_FINITE)),
                         _const16(E5M2_MAX_FINITE), rounded)
    is_nan = b.icmp_unsigned(">", magnitude, _const16(0x7C00))
    byte = b.or_(b.select(is_nan, _const16(E5M2_NAN), saturated),
                 b.lshr(sign, _const16(8)))
    return b.trunc(byte, I8)
