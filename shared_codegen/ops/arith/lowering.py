"""Lowering of `ops/arith.py`: constants, binary ops, compares, select, casts, tt.addptr.

Every rule is elementwise: a tensor's registers are transformed one by one (the operands of a
tensor op share one layout, so register r of each operand is the same element).
"""

from __future__ import annotations

from typing import Callable, List

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import PointerType, TensorType, scalar_of
from shared_codegen.ir.types import float16 as _F16_TYPE
from shared_codegen.ir.types import float32 as _F32_TYPE
from shared_codegen.lowering.context import (BF16, F16, F32, F64, I8, I16, I32, I64, LoweringError,
                                             llvm_type)
from shared_codegen.ops.arith.fp8_software import e5m2_to_f16, f32_to_e5m2, needs_software_fp8
from shared_codegen.ops.arith.definition import (AddPtrOp, BinaryOp, CastOp, CompareOp, ConstantOp,
                                                 SelectOp)


def elementwise(ctx, op, fn: Callable) -> List:
    """Apply `fn(*scalar_operands)` per register; the result has op.results[0]'s shape."""
    operands = [ctx.get(v) for v in op.operands]
    if not isinstance(op.results[0].type, TensorType):
        return [fn(*operands)]
    n = ctx.num_registers(op.results[0].type)
    cols = [o if isinstance(o, list) else [o] * n for o in operands]
    return [[fn(*(c[r] for c in cols)) for r in range(n)]]


# ---- constants ------------------------------------------------------------------------------

@lowering_rule(ConstantOp)
def lower_constant(op, ctx):
    ty = op.result.type
    c = ctx.constant(scalar_of(ty), op.attrs["value"])
    if isinstance(ty, TensorType):
        return [[c] * ctx.num_registers(ty)]
    return [c]


# ---- binary ops -----------------------------------------------------------------------------

_BUILDER_OPS = {
    "arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul", "arith.divsi": "sdiv",
    "arith.divui": "udiv", "arith.remsi": "srem", "arith.remui": "urem", "arith.andi": "and_",
    "arith.ori": "or_", "arith.xori": "xor", "arith.shli": "shl", "arith.shrsi": "ashr",
    "arith.shrui": "lshr", "arith.addf": "fadd", "arith.subf": "fsub", "arith.mulf": "fmul",
    "arith.divf": "fdiv", "arith.remf": "frem", "tt.precise_divf": "fdiv",
}
# With fp fusion on (LoweringContext.fp_fusion) these may fuse into one fma.rn.
_CONTRACTIBLE = frozenset({"arith.addf", "arith.subf", "arith.mulf"})
# min/max through LLVM intrinsics: NVPTX selects min/max.{s,u}32 and, for floats, max.f32
# (maxnum: a NaN operand is ignored) or max.NaN.f32 (maximum: NaN propagates, sm_80+).
_MINMAX = {
    "arith.maxsi": "llvm.smax", "arith.minsi": "llvm.smin", "arith.maxui": "llvm.umax",
    "arith.minui": "llvm.umin", "arith.maxnumf": "llvm.maxnum", "arith.minnumf": "llvm.minnum",
    "arith.maximumf": "llvm.maximum", "arith.minimumf": "llvm.minimum",
}


def _suffix(lty: ir.Type) -> str:
    if isinstance(lty, ir.IntType):
        return f"i{lty.width}"
    return {F16: "f16", BF16: "bf16", F32: "f32", F64: "f64"}[lty]


@lowering_rule(BinaryOp)
def lower_binary(op, ctx):
    elem = scalar_of(op.operands[0].type)
    if elem.is_fp8():
        raise LoweringError("arithmetic on fp8 values: convert to fp16/fp32 first", op)
    b = ctx.builder
    if op.name in _MINMAX:
        lty = llvm_type(elem)
        name = f"{_MINMAX[op.name]}.{_suffix(lty)}"
        return elementwise(ctx, op, lambda x, y: ctx.intrinsic(name, lty, [x, y]))
    if op.name == "arith.divf" and elem.is_fp32():
        # Triton's fp32 `/` is `div.full.f32` (PTX ISA 9.7.3.8: approximate, max 2 ulp), a
        # few instructions instead of the IEEE `div.rn.f32` subroutine; `tl.div_rn` keeps the
        # exact one (tt.precise_divf).
        return elementwise(ctx, op, lambda x, y: ctx.inline_asm(
            "div.full.f32 $0, $1, $2;", "=f,f,f", F32, [x, y]))
    method = getattr(b, _BUILDER_OPS[op.name])
    if elem.bits == 1 and op.name in ("arith.addi", "arith.subi"):
        method = b.xor  # i1 arithmetic wraps: add == sub == xor
    if ctx.fp_fusion and op.name in _CONTRACTIBLE:
        return elementwise(ctx, op, lambda x, y: method(x, y, flags=("contract",)))
    return elementwise(ctx, op, method)


# ---- compares and select --------------------------------------------------------------------

_ICMP = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
         "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}
_FCMP = {"oeq": (True, "=="), "one": (True, "!="), "olt": (True, "<"), "ole": (True, "<="),
         "ogt": (True, ">"), "oge": (True, ">="), "une": (False, "!="), "ueq": (False, "==")}


@lowering_rule(CompareOp)
def lower_compare(op, ctx):
    b = ctx.builder
    pred = op.attrs["predicate"]
    elem = scalar_of(op.operands[0].type)
    if op.name == "arith.cmpi":
        if isinstance(elem, PointerType):
            sym = _ICMP[pred]
            return elementwise(ctx, op, lambda x, y: b.icmp_unsigned(
                sym, b.ptrtoint(x, I64), b.ptrtoint(y, I64)))
        cmp = b.icmp_unsigned if pred[0] in "ue" or pred == "ne" else b.icmp_signed
        return elementwise(ctx, op, lambda x, y: cmp(_ICMP[pred], x, y))
    ordered, sym = _FCMP[pred]
    cmp = b.fcmp_ordered if ordered else b.fcmp_unordered
    if elem.is_fp8():
        return elementwise(ctx, op, lambda x, y: cmp(sym, fp8_to_f32(ctx, x, elem),
                                                       fp8_to_f32(ctx, y, elem)))
    return elementwise(ctx, op, lambda x, y: cmp(sym, x, y))


@lowering_rule(SelectOp)
def lower_select(op, ctx):
    return elementwise(ctx, op, ctx.builder.select)


# ---- fp8 conversions (PTX ISA 9.7.9.21 cvt; the e4m3/e5m2 forms need sm_89+, before that
# fp8_software converts e5m2 and refuses e4m3) -----------------------------------------------

def _fp8_name(elem) -> str:
    return "e4m3" if elem.name == "fp8e4nv" else "e5m2"


def fp8_to_f16(ctx, x: ir.Value, elem) -> ir.Value:
    """One fp8 byte -> half. `cvt.rn.f16x2.e4m3x2` converts two bytes at once; the high byte
    is zero here and its half dropped (see fp8_pairs_to_f16 for the paired form)."""
    return fp8_pairs_to_f16(ctx, [x], elem)[0]


def fp8_pairs_to_f16(ctx, xs: List[ir.Value], elem) -> List[ir.Value]:
    b = ctx.builder
    if needs_software_fp8(ctx, elem):
        return [e5m2_to_f16(ctx, x) for x in xs]
    out = []
    for i in range(0, len(xs), 2):
        lo = b.zext(xs[i], I16)
        packed = lo
        if i + 1 < len(xs):
            packed = b.or_(lo, b.shl(b.zext(xs[i + 1], I16), ir.Constant(I16, 8)))
        word = ctx.inline_asm(f"cvt.rn.f16x2.{_fp8_name(elem)}x2 $0, $1;", "=r,h", I32, [packed])
        out.append(b.bitcast(b.trunc(word, I16), F16))
        if i + 1 < len(xs):
            out.append(b.bitcast(b.trunc(b.lshr(word, ir.Constant(I32, 16)), I16), F16))
    return out


def fp8_to_f32(ctx, x, elem):
    return ctx.builder.fpext(fp8_to_f16(ctx, x, elem), F32)


def f32_pairs_to_fp8(ctx, xs: List[ir.Value], elem) -> List[ir.Value]:
    """fp32 -> fp8 with round-to-nearest-even and saturation to the largest finite value
    (`cvt.rn.satfinite.e4m3x2.f32 d, a, b` puts a in the high byte, b in the low byte)."""
    b = ctx.builder
    if needs_software_fp8(ctx, elem):
        return [f32_to_e5m2(ctx, x) for x in xs]
    out = []
    asm = f"cvt.rn.satfinite.{_fp8_name(elem)}x2.f32 $0, $1, $2;"
    for i in range(0, len(xs), 2):
        hi = xs[i + 1] if i + 1 < len(xs) else ir.Constant(F32, 0.0)
        half = ctx.inline_asm(asm, "=h,f,f", I16, [hi, xs[i]])
        out.append(b.trunc(half, I8))
        if i + 1 < len(xs):
            out.append(b.trunc(b.lshr(half, ir.Constant(I16, 8)), I8))
    return out


def convert_float(ctx, xs: List[ir.Value], src, dst) -> List[ir.Value]:
    """Convert registers between float types (fp8, fp16, bf16, fp32, fp64), rounding once
    where the hardware can: fp8 sources widen exactly to f16 first, fp8 results round from f32
    (exact for fp16/bf16 sources)."""
    b = ctx.builder
    if src == dst:
        return list(xs)
    if dst.is_fp8():
        if src.is_fp8():
            xs = [b.fpext(h, F32) for h in fp8_pairs_to_f16(ctx, xs, src)]
        elif src.bits == 64:
            xs = [b.fptrunc(x, F32) for x in xs]  # double rounding; PTX has no f64->fp8
        elif src.bits == 16:
            xs = [b.fpext(x, F32) for x in xs]
        return f32_pairs_to_fp8(ctx, xs, dst)
    if src.is_fp8():
        halves = fp8_pairs_to_f16(ctx, xs, src)
        return convert_float(ctx, halves, _F16_TYPE, dst)
    ldst = llvm_type(dst)
    if src.bits == dst.bits:  # fp16 <-> bf16: through f32, which holds both exactly
        return [b.fptrunc(b.fpext(x, F32), ldst) for x in xs]
    if dst.bits > src.bits:
        return [b.fpext(x, ldst) for x in xs]
    if src.bits == 32 and dst.bits == 16 and len(xs) > 1:
        return _f32_pairs_to_half(ctx, xs, ldst)
    return [b.fptrunc(x, ldst) for x in xs]


def _f32_pairs_to_half(ctx, xs: List[ir.Value], ldst) -> List[ir.Value]:
    """f32 -> f16 / bf16 two at a time: a `<2 x float>` fptrunc, which NVPTX selects as one
    `cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32` (sm_80+, every target) writing both halves of
    a 32-bit register, where scalar conversions are two cvts and a PRMT to pack them
    (attention's P, every iteration: 96 SASS instructions became 32 at D = 64)."""
    b = ctx.builder
    pair_in, pair_out = ir.VectorType(F32, 2), ir.VectorType(ldst, 2)
    out = []
    for i in range(0, len(xs) - 1, 2):
        v = b.insert_element(b.insert_element(ir.Constant(pair_in, ir.Undefined), xs[i],
                                              ir.Constant(I32, 0)), xs[i + 1],
                             ir.Constant(I32, 1))
        h = b.fptrunc(v, pair_out)
        out += [b.extract_element(h, ir.Constant(I32, 0)),
                b.extract_element(h, ir.Constant(I32, 1))]
    if len(xs) % 2:
        out.append(b.fptrunc(xs[-1], ldst))
    return out


# ---- casts ----------------------------------------------------------------------------------

def _cast_one(ctx, op, x, src, dst):
    b = ctx.builder
    name = op.name
    ldst = llvm_type(dst)
    if name == "tt.ptr_to_int":
        return b.ptrtoint(x, ldst)
    if name == "tt.int_to_ptr":
        if src.bits < 64:
            x = b.zext(x, I64) if src.is_int_unsigned() else b.sext(x, I64)
        return b.inttoptr(x, ldst)
    if name == "tt.bitcast":
        if isinstance(src, PointerType) or llvm_type(src) == ldst:
            return x  # opaque pointers; fp8 <-> i8 share storage
        return b.bitcast(x, ldst)
    if name in ("arith.extsi",):
        return b.sext(x, ldst)
    if name == "arith.extui":
        return b.zext(x, ldst)
    if name == "arith.trunci":
        return b.trunc(x, ldst)
    if name in ("arith.sitofp", "arith.uitofp"):
        signed = name == "arith.sitofp" and src.bits > 1
        target = F32 if dst.is_fp8() else ldst
        y = b.sitofp(x, target) if signed else b.uitofp(x, target)
        return f32_pairs_to_fp8(ctx, [y], dst)[0] if dst.is_fp8() else y
    if name in ("arith.fptosi", "arith.fptoui"):
        if src.is_fp8():
            x, src = fp8_to_f32(ctx, x, src), _F32_TYPE
        # The saturating form matches PTX cvt.rzi (and the interpreter): out-of-range values
        # clamp and NaN becomes 0 instead of LLVM poison.
        kind = "fptosi" if name == "arith.fptosi" else "fptoui"
        return ctx.intrinsic(f"llvm.{kind}.sat.i{ldst.width}.{_suffix(llvm_type(src))}",
                             ldst, [x])
    raise LoweringError(f"unsupported cast {src} -> {dst}", op)


@lowering_rule(CastOp)
def lower_cast(op, ctx):
    src = scalar_of(op.operands[0].type)
    dst = scalar_of(op.result.type)
    x = ctx.get(op.operands[0])
    regs = x if isinstance(x, list) else [x]
    if op.name in ("arith.extf", "arith.truncf", "tt.fp_to_fp"):
        rounding = op.attrs.get("rounding", "rtne")
        if rounding not in ("rtne", ""):
            raise LoweringError(f"rounding mode {rounding!r} is not supported", op)
        out = convert_float(ctx, regs, src, dst)
    else:
        out = [_cast_one(ctx, op, r, src, dst) for r in regs]
    return [out if isinstance(x, list) else out[0]]


# ---- pointers -------------------------------------------------------------------------------

@lowering_rule(AddPtrOp)
def lower_addptr(op, ctx):
    """`ptr + offset` elements: a GEP over the element type, so LLVM knows the stride.
    i1 elements are bytes in memory (Triton's convention), fp8 are i8."""
    b = ctx.builder
    elem = scalar_of(op.operands[0].type).element
    etype = I8 if elem.bits <= 8 else llvm_type(elem)
    off_elem = scalar_of(op.operands[1].type)

    def gep(p, off):
        if off_elem.is_int_unsigned() and off_elem.bits < 64:
            off = b.zext(off, I64)  # a GEP index is signed
        return b.gep(p, [off], source_etype=etype)

    return elementwise(ctx, op, gep)
