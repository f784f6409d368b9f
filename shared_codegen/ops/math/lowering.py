"""Lowering of `ops/math.py`: PTX approximate instructions (PTX ISA 9.7.4, "Floating point
instructions": ex2/lg2/sin/cos/rsqrt/sqrt .approx) plus short polynomials for fp32 and below;
fp64 exp/log/sin/cos/erf call libdevice (linked by `lowering/libdevice.py`).

fp16/bf16 (and fp8) inputs are computed in fp32 and rounded back once, as Triton does.
Accuracy notes: `ex2.approx.ftz.f32` has ~2 ulp relative error (subnormal results flush to
zero); exp(x) = ex2(x * log2 e) adds
the rounding of the product (Triton's lowering, identical error). sin/cos first reduce the
argument modulo 2*pi (Cody-Waite, two constants) because sin.approx is only accurate on
[-pi, pi]. erf is a Taylor series for |x| < 0.5 and the Numerical Recipes erfc Chebyshev fit
(relative error < 1.2e-7 of erfc) elsewhere.
"""

from __future__ import annotations

import math

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import scalar_of
from shared_codegen.lowering.context import F32, F64, LoweringError, llvm_type
from shared_codegen.ops.arith.lowering import _suffix, convert_float, elementwise
from shared_codegen.ops.math.definition import AbsIntOp, FmaOp, UnaryFloatOp

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# 2*pi split so that k * TWO_PI_HI is exact for |k| < 2**11 (the high part has 12 zero bits).
TWO_PI_HI = 6.28125
TWO_PI_LO = 2 * math.pi - 6.28125
INV_TWO_PI = 1 / (2 * math.pi)


def _approx(ctx, instr: str, x: ir.Value) -> ir.Value:
    """`instr.approx.f32 d, a` through inline asm (no libdevice, and LLVM's intrinsics for
    these would want the `ftz` forms)."""
    return ctx.inline_asm(f"{instr} $0, $1;", "=f,f", F32, [x])


def _f32_exp2(ctx, x):
    # .ftz: results under 2^-126 flush to zero. Without it ptxas wraps every MUFU.EX2 in a
    # range test and two predicated multiplies (3 more instructions per exp, which an
    # exp-bound loop such as attention's softmax pays in full).
    return _approx(ctx, "ex2.approx.ftz.f32", x)


def _f32_exp(ctx, x):
    return _f32_exp2(ctx, ctx.builder.fmul(x, ir.Constant(F32, LOG2E)))


def _f32_log2(ctx, x):
    return _approx(ctx, "lg2.approx.f32", x)


def _f32_log(ctx, x):
    return ctx.builder.fmul(_f32_log2(ctx, x), ir.Constant(F32, LN2))


def _reduce_2pi(ctx, x):
    b = ctx.builder
    k = ctx.intrinsic("llvm.rint.f32", F32, [b.fmul(x, ir.Constant(F32, INV_TWO_PI))])
    nk = b.fneg(k)
    r = ctx.intrinsic("llvm.fma.f32", F32, [nk, ir.Constant(F32, TWO_PI_HI), x])
    return ctx.intrinsic("llvm.fma.f32", F32, [nk, ir.Constant(F32, TWO_PI_LO), r])


def _f32_sin(ctx, x):
    return _approx(ctx, "sin.approx.f32", _reduce_2pi(ctx, x))


def _f32_cos(ctx, x):
    return _approx(ctx, "cos.approx.f32", _reduce_2pi(ctx, x))


# erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)), n = 0..6 (error < 1e-9 at 0.5)
_ERF_TAYLOR = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
               for n in range(7)]
# Numerical Recipes erfcc: erfc(z) = t * exp(-z*z + P(t)), t = 1 / (1 + z/2), z >= 0.
_ERFC_P = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277]


def _horner(ctx, x, coeffs):
    """sum coeffs[i] * x**i with fma."""
    acc = ir.Constant(F32, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = ctx.intrinsic("llvm.fma.f32", F32, [acc, x, ir.Constant(F32, c)])
    return acc


def _f32_erf(ctx, x):
    b = ctx.builder
    z = ctx.intrinsic("llvm.fabs.f32", F32, [x])
    x2 = b.fmul(x, x)
    small = b.fmul(x, _horner(ctx, x2, _ERF_TAYLOR))
    t = b.fdiv(ir.Constant(F32, 1.0), b.fadd(ir.Constant(F32, 1.0),
                                            b.fmul(z, ir.Constant(F32, 0.5))))
    erfc = b.fmul(t, _f32_exp(ctx, b.fadd(b.fneg(b.fmul(z, z)), _horner(ctx, t, _ERFC_P))))
    large = b.fsub(ir.Constant(F32, 1.0), erfc)
    large = ctx.intrinsic("llvm.copysign.f32", F32, [large, x])
    return b.select(b.fcmp_ordered("<", z, ir.Constant(F32, 0.5)), small, large)


def _f32_sqrt(ctx, x):
    return _approx(ctx, "sqrt.approx.f32", x)


def _f32_precise_sqrt(ctx, x):
    return _approx(ctx, "sqrt.rn.f32", x)


def _f32_rsqrt(ctx, x):
    return _approx(ctx, "rsqrt.approx.f32", x)


_F32_RULES = {
    "math.exp": _f32_exp, "math.exp2": _f32_exp2, "math.log": _f32_log,
    "math.log2": _f32_log2, "math.sin": _f32_sin, "math.cos": _f32_cos, "math.erf": _f32_erf,
    "math.sqrt": _f32_sqrt, "tt.precise_sqrt": _f32_precise_sqrt, "math.rsqrt": _f32_rsqrt,
}
# Ops LLVM lowers natively at every float width (NVPTX: cvt.rmi/cvt.rpi, abs, fma).
_INTRINSIC_RULES = {"math.floor": "llvm.floor", "math.ceil": "llvm.ceil",
                    "math.absf": "llvm.fabs"}


# fp64 transcendentals have no PTX instruction: libdevice's double versions, linked at the
# LLVM step (`lowering/libdevice.py`).
_F64_LIBDEVICE = {"math.exp": "__nv_exp", "math.exp2": "__nv_exp2", "math.log": "__nv_log",
                  "math.log2": "__nv_log2", "math.sin": "__nv_sin", "math.cos": "__nv_cos",
                  "math.erf": "__nv_erf"}


def _f64_rule(ctx, op, x):
    if op.name in ("math.sqrt", "tt.precise_sqrt"):
        return ctx.inline_asm("sqrt.rn.f64 $0, $1;", "=d,d", F64, [x])
    if op.name == "math.rsqrt":
        return ctx.inline_asm("rsqrt.approx.f64 $0, $1;", "=d,d", F64, [x])
    if op.name in _F64_LIBDEVICE:
        return ctx.intrinsic(_F64_LIBDEVICE[op.name], F64, [x])
    raise LoweringError(f"{op.name} has no fp64 lowering", op)


@lowering_rule(UnaryFloatOp)
def lower_unary_float(op, ctx):
    elem = scalar_of(op.operands[0].type)
    lty = llvm_type(elem)
    if op.name in _INTRINSIC_RULES and not elem.is_fp8():
        name = f"{_INTRINSIC_RULES[op.name]}.{_suffix(lty)}"
        return elementwise(ctx, op, lambda x: ctx.intrinsic(name, lty, [x]))
    if elem.bits == 64:
        return elementwise(ctx, op, lambda x: _f64_rule(ctx, op, x))
    rule = _F32_RULES.get(op.name)
    if rule is None:  # floor/ceil/abs on fp8: through f32 below
        def rule(c, x):
            return c.intrinsic(f"{_INTRINSIC_RULES[op.name]}.f32", F32, [x])
    from shared_codegen.ir.types import float32

    def one(x):
        if elem.bits == 32:
            return rule(ctx, x)
        wide = convert_float(ctx, [x], elem, float32)[0]
        return convert_float(ctx, [rule(ctx, wide)], float32, elem)[0]

    return elementwise(ctx, op, one)


@lowering_rule(AbsIntOp)
def lower_absi(op, ctx):
    lty = llvm_type(scalar_of(op.operands[0].type))
    name = f"llvm.abs.{_suffix(lty)}"
    # is_int_min_poison = false: abs(INT_MIN) wraps to INT_MIN like PTX abs.s32 and numpy.
    return elementwise(ctx, op, lambda x: ctx.intrinsic(name, lty, [x, ir.Constant(
        ir.IntType(1), 0)]))


@lowering_rule(FmaOp)
def lower_fma(op, ctx):
    elem = scalar_of(op.operands[0].type)
    if elem.is_fp8():
        raise LoweringError("fma on fp8 values: convert to fp16/fp32 first", op)
    lty = llvm_type(elem)
    name = f"llvm.fma.{_suffix(lty)}"
    return elementwise(ctx, op, lambda x, y, z: ctx.intrinsic(name, lty, [x, y, z]))
