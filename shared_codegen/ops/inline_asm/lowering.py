"""Lowering of `tt.elementwise_inline_asm`: one LLVM inline-asm call per `pack` registers of
the thread, with the operands packed as `definition.py` describes (narrow elements share a
32-bit register, first element lowest) and the results unpacked the same way."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import LoweringError, llvm_type
from shared_codegen.ops.inline_asm.definition import (ElementwiseInlineAsmOp, element_width,
                                                      per_register)


def _pack(b, values, width):
    """`values` (one register each) as one integer register of `len(values) * width` bits."""
    if len(values) == 1:
        return values[0]
    vec_ty = ir.VectorType(values[0].type, len(values))
    vec = ir.Constant(vec_ty, ir.Undefined)
    for k, v in enumerate(values):
        vec = b.insert_element(vec, v, ir.Constant(ir.IntType(32), k))
    return b.bitcast(vec, ir.IntType(width * len(values)))


def _unpack(b, reg, elem_ty, count):
    if count == 1:
        return [reg]
    vec = b.bitcast(reg, ir.VectorType(elem_ty, count))
    return [b.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(count)]


@lowering_rule(ElementwiseInlineAsmOp)
def lower_inline_asm(op, ctx):
    pack = op.attrs["packed_element"]
    # On scalars (inside a reduce or scan combine function) every value is one register.
    scalar = not hasattr(op.results[0].type, "shape")
    inputs = [[ctx.get(v)] if scalar else ctx.get(v) for v in op.operands]
    n = 1 if scalar else len(inputs[0]) if inputs else \
        len(ctx.register_coords(op.results[0].type))
    if n % pack:
        raise LoweringError(f"inline_asm_elementwise: each thread holds {n} element(s) of the "
                            f"result, which pack={pack} does not divide; use a layout with a "
                            f"multiple of {pack} elements per thread", op)
    out_tys = []
    for r in op.results:
        k = per_register(r.type, pack)
        elem = llvm_type(r.type.element if hasattr(r.type, "element") else r.type)
        reg_ty = elem if k == 1 else ir.IntType(element_width(r.type) * k)
        out_tys += [reg_ty] * (pack // k)
    ret_ty = out_tys[0] if len(out_tys) == 1 else ir.LiteralStructType(out_tys)
    b = ctx.builder
    outs = [[] for _ in op.results]
    for start in range(0, max(n, 1), pack):
        args = []
        for v, regs in zip(op.operands, inputs):
            k, width = per_register(v.type, pack), element_width(v.type)
            for j in range(0, pack, k):
                args.append(_pack(b, regs[start + j:start + j + k], width))
        call = ctx.inline_asm(op.attrs["asm_string"], op.attrs["constraints"], ret_ty, args,
                              side_effects=not op.attrs["pure"])
        regs = [call] if len(out_tys) == 1 else \
            [b.extract_value(call, i) for i in range(len(out_tys))]
        cursor = 0
        for r, out in zip(op.results, outs):
            k = per_register(r.type, pack)
            elem = llvm_type(r.type.element if hasattr(r.type, "element") else r.type)
            for _ in range(pack // k):
                out.extend(_unpack(b, regs[cursor], elem, k))
                cursor += 1
    return [out[0] for out in outs] if scalar else outs


__all__ = ["lower_inline_asm"]
