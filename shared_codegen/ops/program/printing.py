"""Lowering of `tt.print` (`tl.device_print`) to CUDA's `vprintf` system call (PTX ISA
"System calls": `vprintf(const char *format, void *args)`, arguments packed at their natural
alignment in a local buffer, floats promoted to double as in C varargs).

Each element is printed once: a replicated layout prints from the one thread of each group of
copies that stores would pick, and scalars print from thread 0 (Triton prints them from every
thread). The line formats are in `print_format.py`, which the interpreter uses too.
"""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import TensorType, float32, scalar_of
from shared_codegen.lowering.context import F64, I8, I32, I64
from shared_codegen.ops.arith.lowering import convert_float
from shared_codegen.ops.control.lowering import new_block
from shared_codegen.ops.program.definition import PrintOp
from shared_codegen.ops.program.print_format import (index_widths, line_format, program_format,
                                                     value_spec)

GENERIC_PTR = ir.PointerType()
_AXES = "xyz"


def _format_string(ctx, text: str) -> ir.Value:
    """A NUL-terminated constant in global memory, as a generic pointer for vprintf."""
    data = bytearray((text + "\n").encode("ascii")) + b"\0"
    ty = ir.ArrayType(I8, len(data))
    g = ir.GlobalVariable(ctx.module, ty, ctx.module.get_unique_name("printf_format"),
                          addrspace=1)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(ty, data)
    g.type = ir.PointerType(addrspace=1)  # opaque-pointer IR, as shared_base does
    return ctx.builder.addrspacecast(g, GENERIC_PTR)


def _vprintf_arg(ctx, value: ir.Value, elem, hex: bool) -> ir.Value:
    """`value` widened the way the format spec of `value_spec` reads it."""
    b = ctx.builder
    if getattr(elem, "address_space", None) is not None:
        return b.ptrtoint(value, I64)
    if hex:
        if elem.is_floating():
            value = b.bitcast(value, ir.IntType(elem.bits)) if elem.bits in (16, 32, 64) \
                else value  # fp8 registers are already i8
        return b.zext(value, I64 if elem.bits > 32 else I32) if elem.bits < 32 else value
    if elem.is_floating():
        if elem.bits < 32 or elem.is_bf16():
            value = convert_float(ctx, [value], elem, float32)[0]
        return b.fpext(value, F64) if value.type != F64 else value
    if elem.bits < 32:
        signed = elem.is_int_signed() and elem.bits > 1
        return (b.sext if signed else b.zext)(value, I32)
    return value


def _vprintf(ctx, fmt: ir.Value, args) -> None:
    b = ctx.builder
    buffer = ir.Constant(GENERIC_PTR, None)
    if args:
        struct = ir.LiteralStructType([a.type for a in args])
        slot = ctx.entry_builder.alloca(struct)
        slot.type = GENERIC_PTR  # opaque-pointer IR: llvmlite would type it `{...}*`
        for i, a in enumerate(args):
            b.store(a, b.gep(slot, [ctx.i32(0), ctx.i32(i)], source_etype=struct))
        buffer = slot
    vprintf = ctx.declare("vprintf", I32, [GENERIC_PTR, GENERIC_PTR])
    b.call(vprintf, [fmt, buffer])


def _guarded(ctx, pred, emit) -> None:
    """Run `emit()` in a block entered only where `pred` (an i1, or None: always) holds."""
    if pred is None:
        emit()
        return
    b = ctx.builder
    then, cont = new_block(ctx, "print.then"), new_block(ctx, "print.cont")
    b.cbranch(pred, then, cont)
    b.position_at_end(then)
    emit()
    b.branch(cont)
    b.position_at_end(cont)


@lowering_rule(PrintOp)
def lower_print(op, ctx):
    pid = [ctx.intrinsic(f"llvm.nvvm.read.ptx.sreg.ctaid.{a}", I32, []) for a in _AXES]
    prefix, hex = op.attrs["prefix"], op.attrs["hex"]
    if not op.operands:
        _guarded(ctx, ctx.thread_is_zero(),
                 lambda: _vprintf(ctx, _format_string(ctx, program_format(prefix)), pid))
        return None
    for i, v in enumerate(op.operands):
        elem = scalar_of(v.type)
        lowered = ctx.get(v)
        if isinstance(v.type, TensorType):
            ty = v.type
            registers = ctx.unique_registers(ty)
            pred = ctx.replication_predicate(ty)
            widths = index_widths(ty.shape)
        else:
            lowered, registers, pred, widths = [lowered], [0], ctx.thread_is_zero(), []
        text = line_format(prefix, widths, value_spec(elem, hex), i, len(op.operands))

        def emit(lowered=lowered, registers=registers, ty=v.type, elem=elem, text=text):
            fmt = _format_string(ctx, text)
            coords = ctx.element_coords(ty) if isinstance(ty, TensorType) else [[]]
            for r in registers:
                args = pid + list(coords[r]) + [_vprintf_arg(ctx, lowered[r], elem, hex)]
                _vprintf(ctx, fmt, args)

        _guarded(ctx, pred, emit)
    return None
