"""Elementwise math builtins (`tl.exp`, `tl.sqrt`, `tl.fma`, ...), as `triton.language.math`.

Transcendentals accept only fp32 and fp64, like Triton (libdevice's convention): fp16/bf16
inputs raise and the user casts explicitly, so precision is never lost silently.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin
from shared_codegen.ir.types import float32, float64, uint32, uint64
from shared_codegen.ops.arith.definition import BinaryOp
from shared_codegen.ops.math.definition import AbsIntOp, FmaOp, UnaryFloatOp
from tile.language import _types as T


def _check_float(x, fn: str, allowed=(float32, float64)):
    if x.dtype not in allowed:
        names = " or ".join(str(t) for t in allowed)
        raise TypeError(f"tl.{fn} expects {names} input, got {T.type_name(x.dtype)}; cast "
                        f"first, e.g. x.to(tl.float32)")


def _unary(fn_name: str, allowed=(float32, float64), doc=""):
    op_name = UnaryFloatOp.name_spelled(fn_name)

    def fn(x, _semantic=None):
        x = _semantic._operand(x)
        _check_float(x, fn_name, allowed)
        return _semantic.make_tensor(UnaryFloatOp.build(_semantic.builder, op_name, x.handle))

    fn.__name__ = fn.__qualname__ = fn_name
    fn.__doc__ = doc or f"Elementwise {fn_name} of `x`."
    return builtin(fn)


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log", doc="Elementwise natural logarithm of `x`.")
log2 = _unary("log2")
sqrt = _unary("sqrt", doc="Elementwise (fast, approximate) square root.")
sqrt_rn = _unary("sqrt_rn", (float32,), doc="Elementwise square root rounded to nearest (IEEE).")
rsqrt = _unary("rsqrt", doc="Elementwise 1 / sqrt(x).")
sin = _unary("sin")
cos = _unary("cos")
erf = _unary("erf", doc="Elementwise error function.")
floor = _unary("floor")
ceil = _unary("ceil")


@builtin
def abs(x, _semantic=None):
    """Elementwise absolute value (unsigned integers are returned unchanged)."""
    sem = _semantic
    x = sem._operand(x)
    ty = x.dtype
    if T.is_float(ty):
        return sem.make_tensor(UnaryFloatOp.build(sem.builder, UnaryFloatOp.name_spelled("abs"),
                                                 x.handle))
    if T.is_signed(ty):
        return sem.make_tensor(AbsIntOp.build(sem.builder, x.handle))
    if T.is_unsigned(ty):
        return x
    raise TypeError(f"tl.abs needs a number, got {T.type_name(ty)}")


@builtin
def fma(x, y, z, _semantic=None):
    """x * y + z with one rounding. Operands promote to one type like `+`."""
    sem = _semantic
    x, y = sem.binary_operands(x, y, sym="tl.fma")
    z, x = sem.binary_operands(z, x, sym="tl.fma")
    z, y = sem.binary_operands(z, y, sym="tl.fma")
    if not T.is_float(x.dtype):
        raise TypeError(f"tl.fma needs floating-point operands, got {T.type_name(x.dtype)}")
    return sem.make_tensor(FmaOp.build(sem.builder, x.handle, y.handle, z.handle))


@builtin
def umulhi(x, y, _semantic=None):
    """The most significant N bits of the 2N-bit product of N-bit integers read as unsigned
    (N = 32 or 64; signed operands are reinterpreted, as Triton's `__nv_umulhi` does)."""
    sem = _semantic
    x, y = sem.binary_operands(x, y, sym="tl.umulhi")
    ty = x.dtype
    if not T.is_int(ty) or ty.bits not in (32, 64):
        raise TypeError(f"tl.umulhi supports int32, int64, uint32 and uint64 operands, got "
                        f"{T.type_name(ty)}")
    if ty.bits == 64:
        return sem.bitcast(_umulhi64(sem, sem.bitcast(x, uint64), sem.bitcast(y, uint64)), ty)
    # Widen as unsigned (zero-extend through the same-width unsigned type), multiply,
    # keep the high half.
    wide = [sem.cast(sem.bitcast(v, uint32), uint64) for v in (x, y)]
    prod = sem._arith("mul", *wide)
    high = sem.binary("rshift", prod, 32)
    return sem.bitcast(sem.cast(high, uint32), ty)


def _umulhi64(sem, x, y):
    """High 64 bits of a 64x64-bit unsigned product from 32-bit halves: every partial product
    fits in 64 bits, and the middle column's carry is added exactly."""
    low_mask = sem.to_tensor(0xFFFFFFFF, like=uint64)

    def halves(v):
        return sem.binary("rshift", v, 32), sem.bitwise("and", v, low_mask)

    (x1, x0), (y1, y0) = halves(x), halves(y)
    def mul(a, b):
        return sem._arith("mul", a, b)

    lo_lo, hi_lo, lo_hi, hi_hi = mul(x0, y0), mul(x1, y0), mul(x0, y1), mul(x1, y1)
    middle = sem.add(sem.add(sem.bitwise("and", hi_lo, low_mask),
                             sem.bitwise("and", lo_hi, low_mask)),
                     sem.binary("rshift", lo_lo, 32))
    high = sem.add(hi_hi, sem.add(sem.binary("rshift", hi_lo, 32),
                                  sem.binary("rshift", lo_hi, 32)))
    return sem.add(high, sem.binary("rshift", middle, 32))


@builtin
def fdiv(x, y, ieee_rounding=False, _semantic=None):
    """Float division (`ieee_rounding` is accepted for Triton compatibility)."""
    sem = _semantic
    x, y = sem._operand(x), sem._operand(y)
    if not (T.is_float(x.dtype) and T.is_float(y.dtype)):
        raise TypeError("both operands of tl.fdiv must be floating point, got "
                        f"{T.type_name(x.dtype)} and {T.type_name(y.dtype)}")
    if ieee_rounding:
        return div_rn(x, y, _semantic=sem)
    return sem.truediv(x, y)


@builtin
def div_rn(x, y, _semantic=None):
    """fp32 division rounded to nearest."""
    sem = _semantic
    x, y = sem.binary_operands(x, y, sym="tl.div_rn")
    _check_float(x, "div_rn", (float32,))
    return sem.make_tensor(BinaryOp.build(sem.builder, BinaryOp.name_spelled("div_rn"), x.handle,
                                          y.handle))


__all__ = ["exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf",
           "floor", "ceil", "abs", "fma", "umulhi", "fdiv", "div_rn"]
