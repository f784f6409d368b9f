"""Lowering of `ttg.fp4_to_fp` (`fp4.py`): per result register, the source byte that holds
its element (a register of the same thread: the result layout keeps both nibbles there) and
the nibble its `axis` coordinate's low bit names, decoded with integer arithmetic:
magnitude code m = 2e + f (e exponent, f mantissa bit) is (e == 0 ? f : (2 + f) << (e - 1))
halves, so value = that integer * 0.5, negated when the sign bit is set."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import llvm_type
from shared_codegen.lowering.cross_thread import register_coords
from shared_codegen.ops.movement.fp4 import Fp4ToFpOp
from shared_codegen.ops.movement.lowering import pick_elements

I8, F32 = ir.IntType(8), ir.FloatType()


def _decode(b, byte, high: bool):
    code = b.lshr(byte, ir.Constant(I8, 4)) if high else b.and_(byte, ir.Constant(I8, 0xF))
    exp = b.and_(b.lshr(code, ir.Constant(I8, 1)), ir.Constant(I8, 3))
    frac = b.and_(code, ir.Constant(I8, 1))
    normal = b.shl(b.add(frac, ir.Constant(I8, 2)),
                   b.sub(exp, ir.Constant(I8, 1)))
    is_sub = b.icmp_unsigned("==", exp, ir.Constant(I8, 0))
    halves = b.select(is_sub, frac, normal)
    value = b.fmul(b.uitofp(halves, F32), ir.Constant(F32, 0.5))
    negative = b.icmp_unsigned("!=", b.and_(code, ir.Constant(I8, 8)), ir.Constant(I8, 0))
    return b.select(negative, b.fneg(value), value)


@lowering_rule(Fp4ToFpOp)
def lower_fp4_to_fp(op, ctx):
    axis = op.attrs["axis"]
    src, res_ty = op.operands[0], op.result.type
    bytes_ = pick_elements(ctx, src.type, ctx.get(src), res_ty,
                           lambda c: tuple(x >> 1 if d == axis else x for d, x in enumerate(c)),
                           what="fp4_to_fp")
    out_ty = llvm_type(res_ty.element)
    b = ctx.builder
    out = []
    for byte, coord in zip(bytes_, register_coords(ctx.linear_layout(res_ty))):
        value = _decode(b, byte, bool(coord[axis] & 1))
        out.append(value if out_ty == F32 else b.fptrunc(value, out_ty))
    return [out]


__all__ = ["lower_fp4_to_fp"]
