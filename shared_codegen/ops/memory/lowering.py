"""Lowering of `ops/memory.py`: predicated, vectorized global loads/stores and atomics.

Accesses are inline PTX with a predicate register, as Triton emits them, because that gives
exact control over width, predication and cache qualifiers (PTX ISA 9.7.9.8 ld, 9.7.9.10 st,
9.7.13.5 atom):

    @%p ld.global.v4.b32 {%r0, %r1, %r2, %r3}, [%rd0 + 0];

A group of `vec` registers (see vectorize.py) moves as 1, 2 or 4 32-bit words (or one 8/16-bit
value). Masked loads first `mov` the `other` value (zero when absent) into the outputs, so a
false predicate leaves it there. Stores and atomics are predicated on the mask AND the
replication predicate (one writer per element when the layout replicates data across lanes or
warps) and skip registers that duplicate a lower register of the same thread.
"""

from __future__ import annotations

from typing import List, Optional

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import PointerType, TensorType, scalar_of
from shared_codegen.lowering.context import I8, I16, I32, I64, LoweringError, llvm_type
from shared_codegen.lowering.scratch import claim_scratch
from shared_codegen.lowering.vectorize import vector_width
from shared_codegen.ops.memory.definition import AtomicCASOp, AtomicRMWOp, LoadOp, StoreOp

_CACHE = {"": "", ".ca": ".ca", ".cg": ".cg", ".cv": ".cv", ".cs": ".cs", ".wb": ".wb",
          ".wt": ".wt"}
_EVICT = {"": "", "evict_normal": "", "evict_first": ".L1::evict_first",
          "evict_last": ".L1::evict_last"}


def _mem_bits(elem) -> int:
    """Bits an element occupies in memory (i1 is a byte, pointers 64 bits)."""
    if isinstance(elem, PointerType):
        return 64
    return max(8, elem.bits)


def _to_int(ctx, x: ir.Value, elem) -> ir.Value:
    """An element as the integer of its memory width."""
    b = ctx.builder
    bits = _mem_bits(elem)
    if isinstance(elem, PointerType):
        return b.ptrtoint(x, I64)
    if elem.bits == 1:
        return b.zext(x, I8)
    if elem.is_floating() and not elem.is_fp8():
        return b.bitcast(x, ir.IntType(bits))
    return x


def _from_int(ctx, x: ir.Value, elem) -> ir.Value:
    b = ctx.builder
    if isinstance(elem, PointerType):
        return b.inttoptr(x, llvm_type(elem))
    if elem.bits == 1:
        return b.icmp_unsigned("!=", x, ir.Constant(I8, 0))
    if elem.is_floating() and not elem.is_fp8():
        return b.bitcast(x, llvm_type(elem))
    return x


class _Access:
    """The shape of one vector access: `nwords` words of `word_bits` for `vec` elements."""

    def __init__(self, vec: int, elem):
        self.vec = vec
        self.elem = elem
        self.elem_bits = _mem_bits(elem)
        total = vec * self.elem_bits
        self.word_bits = 32 if total >= 32 else total
        self.nwords = total // self.word_bits
        self.word_type = I32 if self.word_bits == 32 else I16
        self.constraint = "r" if self.word_bits == 32 else "h"
        suffix = {32: "b32", 16: "b16", 8: "u8"}[self.word_bits]
        self.ptx_type = (f"v{self.nwords}." if self.nwords > 1 else "") + suffix

    def pack(self, ctx, elems: List[ir.Value]) -> List[ir.Value]:
        """vec elements -> nwords word values (little endian: element 0 in the low bits)."""
        b = ctx.builder
        ints = [_to_int(ctx, e, self.elem) for e in elems]
        ity = ir.IntType(self.elem_bits)
        if self.word_bits == 8:
            return [b.zext(ints[0], I16)]
        if self.vec == 1 and self.nwords == 1:
            return [ints[0]]
        vty = ir.VectorType(ity, self.vec)
        v = ir.Constant(vty, None)
        for i, x in enumerate(ints):
            v = b.insert_element(v, x, ir.Constant(I32, i))
        words = b.bitcast(v, ir.VectorType(self.word_type, self.nwords))
        return [b.extract_element(words, ir.Constant(I32, i)) for i in range(self.nwords)]

    def unpack(self, ctx, words: List[ir.Value]) -> List[ir.Value]:
        b = ctx.builder
        ity = ir.IntType(self.elem_bits)
        if self.word_bits == 8:
            ints = [b.trunc(words[0], I8)]
        elif self.vec == 1 and self.nwords == 1:
            ints = [words[0]]
        else:
            v = ir.Constant(ir.VectorType(self.word_type, self.nwords), None)
            for i, w in enumerate(words):
                v = b.insert_element(v, w, ir.Constant(I32, i))
            elems = b.bitcast(v, ir.VectorType(ity, self.vec))
            ints = [b.extract_element(elems, ir.Constant(I32, i)) for i in range(self.vec)]
        return [_from_int(ctx, x, self.elem) for x in ints]


def _and(ctx, a: Optional[ir.Value], c: Optional[ir.Value]) -> Optional[ir.Value]:
    if a is None:
        return c
    if c is None:
        return a
    return ctx.builder.and_(a, c)


def _regs(ctx, value, n: int) -> Optional[List]:
    if value is None:
        return None
    low = ctx.get(value)
    return low if isinstance(low, list) else [low] * n


# ---- tt.load --------------------------------------------------------------------------------

@lowering_rule(LoadOp)
def lower_load(op, ctx):
    from shared_codegen.ops.memory.definition import LoadOp
    ptr, mask, other = LoadOp.parts(op)
    elem = scalar_of(op.result.type)
    tensor = isinstance(ptr.type, TensorType)
    n = ctx.num_registers(ptr.type) if tensor else 1
    ptrs = _regs(ctx, ptr, n)
    masks = _regs(ctx, mask, n)
    others = _regs(ctx, other, n)
    vec = vector_width(ptr, ctx, mask) if tensor else 1
    acc = _Access(vec, elem)
    cache = _CACHE.get(op.attrs.get("cache", ""), "")
    evict = _EVICT.get(op.attrs.get("evict", ""), "")
    volatile = ".volatile" if op.attrs.get("volatile") else ""
    out: List[ir.Value] = []
    for r in range(0, n, vec):
        pred = masks[r] if masks is not None else None
        if ctx.debug is not None:  # debug mode: an access outside its argument is skipped
            pred = ctx.debug.checked(ctx, op, "load", ptr, ptrs[r], elem, vec, pred)
        if pred is not None:
            fill = others[r:r + vec] if others is not None else [
                ctx.constant(elem, 0)] * vec
            fill_words = acc.pack(ctx, fill)
        else:
            fill_words = []
        words = _emit_load(ctx, acc, ptrs[r], pred, fill_words,
                           f"ld{volatile}.global{cache}{evict}.{acc.ptx_type}")
        out.extend(acc.unpack(ctx, words))
    return [out if tensor else out[0]]


def _emit_load(ctx, acc: _Access, addr, pred, fill_words, instr: str) -> List[ir.Value]:
    nw = acc.nwords
    outs = [f"${i}" for i in range(nw)]
    args = [addr]
    constraints = [f"={acc.constraint}"] * nw + ["l"]
    lines = []
    if pred is not None:
        args.append(pred)
        constraints.append("b")
        for i, w in enumerate(fill_words):
            args.append(w)
            constraints.append(acc.constraint)
            lines.append(f"mov.b{acc.word_bits if acc.word_bits > 8 else 16} "
                         f"{outs[i]}, ${nw + 2 + i};")
    guard = f"@${nw + 1} " if pred is not None else ""
    dst = "{" + ", ".join(outs) + "}" if nw > 1 else outs[0]
    lines.append(f"{guard}{instr} {dst}, [ ${nw} + 0 ];")
    ret = acc.word_type if nw == 1 else ir.LiteralStructType([acc.word_type] * nw)
    # Side effects: a load must not be reordered across stores or CSE'd with an earlier load
    # of the same address, which LLVM would otherwise do to a pure asm call.
    res = ctx.inline_asm("\n".join(lines), ",".join(constraints), ret, args, side_effects=True)
    if nw == 1:
        return [res]
    return [ctx.builder.extract_value(res, i) for i in range(nw)]


# ---- tt.store -------------------------------------------------------------------------------

@lowering_rule(StoreOp)
def lower_store(op, ctx):
    ptr, value = op.operands[:2]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    elem = scalar_of(value.type)
    tensor = isinstance(ptr.type, TensorType)
    n = ctx.num_registers(ptr.type) if tensor else 1
    ptrs = _regs(ctx, ptr, n)
    vals = _regs(ctx, value, n)
    masks = _regs(ctx, mask, n)
    vec = vector_width(ptr, ctx, mask) if tensor else 1
    acc = _Access(vec, elem)
    cache = _CACHE.get(op.attrs.get("cache", ""), "")
    evict = _EVICT.get(op.attrs.get("evict", ""), "")
    rep = ctx.replication_predicate(ptr.type if tensor else None)
    free_regs = ctx.free_variable_masks(ptr.type).get("register", 0) if tensor else 0
    instr = f"st.global{cache}{evict}.{acc.ptx_type}"
    for r in range(0, n, vec):
        if r & free_regs:
            continue  # this register repeats one the thread already stores
        pred = _and(ctx, masks[r] if masks is not None else None, rep)
        if ctx.debug is not None:  # debug mode: an access outside its argument is skipped
            pred = ctx.debug.checked(ctx, op, "store", ptr, ptrs[r], elem, vec, pred)
        words = acc.pack(ctx, vals[r:r + vec])
        nw = acc.nwords
        args = [ptrs[r]] + words
        constraints = ["l"] + [acc.constraint] * nw
        src = "{" + ", ".join(f"${1 + i}" for i in range(nw)) + "}" if nw > 1 else "$1"
        guard = ""
        if pred is not None:
            args.append(pred)
            constraints.append("b")
            guard = f"@${1 + nw} "
        ctx.inline_asm(f"{guard}{instr} [ $0 + 0 ], {src};", ",".join(constraints),
                       ir.VoidType(), args, side_effects=True)
    return None


# ---- atomics --------------------------------------------------------------------------------

_SEM = {"acq_rel": ".acq_rel", "acquire": ".acquire", "release": ".release",
        "relaxed": ".relaxed"}
_SCOPE = {"gpu": ".gpu", "cta": ".cta", "sys": ".sys"}


def _atom_type(kind: str, elem, op) -> str:
    bits = _mem_bits(elem)
    if kind == "fadd":
        if elem.is_fp16():
            return "add.noftz.f16"
        if elem.is_bf16():
            return "add.noftz.bf16"
        if elem.bits in (32, 64):
            return f"add.f{elem.bits}"
    elif kind in ("and", "or", "xor", "xchg"):
        if bits in (32, 64):
            return f"{'exch' if kind == 'xchg' else kind}.b{bits}"
    elif kind == "add":
        if bits in (32, 64) and elem.is_int():
            return f"add.u{bits}"
    elif kind in ("max", "min", "umax", "umin"):
        if bits in (32, 64) and elem.is_int():
            signed = kind in ("max", "min") and elem.is_int_signed()
            return f"{kind.lstrip('u')}.{'s' if signed else 'u'}{bits}"
    raise LoweringError(f"atomic {kind} on {elem} is not supported by PTX atom", op)


def _atomic(ctx, op, kind_ptx: str, elem, ptr, operands, pred) -> ir.Value:
    """One `atom` on a single element; returns the old value (the `other` of a false predicate
    is undefined, as in Triton)."""
    lty = llvm_type(elem)
    bits = _mem_bits(elem)
    ity = ir.IntType(bits)
    c = "l" if bits == 64 else ("h" if bits == 16 else "r")
    sem = _SEM[op.attrs.get("sem", "acq_rel")]
    scope = _SCOPE[op.attrs.get("scope", "gpu")]
    ints = [_to_int(ctx, x, elem) for x in operands]
    args = [ptr] + ints
    constraints = [f"={c}", "l"] + [c] * len(ints)
    srcs = ", ".join(f"${2 + i}" for i in range(len(ints)))
    guard = ""
    if pred is not None:
        args.append(pred)
        constraints.append("b")
        guard = f"@${2 + len(ints)} "
    asm = f"{guard}atom{sem}{scope}.global.{kind_ptx} $0, [ $1 + 0 ], {srcs};"
    old = ctx.inline_asm(asm, ",".join(constraints), ity, args, side_effects=True)
    return _from_int(ctx, old, elem) if lty != ity else old


def _float_minmax(ctx, op, kind, elem, ptr, value, pred):
    """Float atomic max/min through integer atomics: for x >= 0 the float order is the signed
    integer order of the bits; for x < 0 it is the reverse unsigned order (Triton's trick)."""
    b = ctx.builder
    bits = elem.bits
    ity = ir.IntType(bits)
    as_int = b.bitcast(value, ity)
    nonneg = b.icmp_signed(">=", as_int, ir.Constant(ity, 0))
    pos_kind, neg_kind = ("max.s", "min.u") if kind == "max" else ("min.s", "max.u")
    p_pos = _and(ctx, pred, nonneg)
    p_neg = _and(ctx, pred, b.not_(nonneg))
    from shared_codegen.ir import types as T
    ielem = T.int32 if bits == 32 else T.int64
    old_pos = _atomic(ctx, op, f"{pos_kind}{bits}", ielem, ptr, [as_int], p_pos)
    old_neg = _atomic(ctx, op, f"{neg_kind}{bits}", ielem, ptr, [as_int], p_neg)
    return b.bitcast(b.select(nonneg, old_pos, old_neg), llvm_type(elem))


def _broadcast_results(ctx, op, ty, owned: List[ir.Value]) -> List[ir.Value]:
    """When several threads hold one element, only the owner ran the atomic; give every
    holder its old value through scratch shared memory (PTX ISA 9.7.9.8 ld.shared)."""
    if not op.result.type or not _has_uses(op):
        return owned
    elem = scalar_of(op.result.type)
    nbytes = _mem_bits(elem) // 8
    b = ctx.builder
    if ty is None:
        base = claim_scratch(ctx, nbytes)
        with b.if_then(ctx.replication_predicate(None)):
            b.store(owned[0], base)
        ctx.barrier()
        return [b.load(base, typ=llvm_type(elem))]
    shape = ty.shape
    numel = ty.numel
    rep = ctx.replication_predicate(ty)
    coords = ctx.element_coords(ty)
    offsets = []
    for regs in coords:
        flat = None
        stride = 1
        for d in reversed(range(len(shape))):
            term = b.mul(regs[d], ctx.i32(stride)) if stride != 1 else regs[d]
            flat = term if flat is None else b.add(flat, term)
            stride *= shape[d]
        offsets.append(flat)
    base = claim_scratch(ctx, numel * nbytes)
    with b.if_then(rep):
        for r, v in enumerate(owned):
            b.store(v, b.gep(base, [offsets[r]], source_etype=llvm_type(elem)))
    ctx.barrier()
    return [b.load(b.gep(base, [offsets[r]], source_etype=llvm_type(elem)),
                   typ=llvm_type(elem)) for r in range(len(owned))]


def _has_uses(op) -> bool:
    """Whether anything in the enclosing function reads op's result (no use lists in the IR;
    an unused atomic result needs no broadcast)."""
    block = op.outermost_op.parent
    if block is None or block.parent is None:  # not in a function: nothing known
        return True
    return bool(op.users())


@lowering_rule(AtomicRMWOp)
def lower_atomic_rmw(op, ctx):
    ptr, value = op.operands[:2]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    kind = op.attrs["kind"]
    elem = scalar_of(value.type)
    tensor = isinstance(ptr.type, TensorType)
    n = ctx.num_registers(ptr.type) if tensor else 1
    ptrs, vals, masks = _regs(ctx, ptr, n), _regs(ctx, value, n), _regs(ctx, mask, n)
    rep = ctx.replication_predicate(ptr.type if tensor else None)
    free_regs = ctx.free_variable_masks(ptr.type).get("register", 0) if tensor else 0
    float_minmax = elem.is_floating() and kind in ("max", "min")
    kind_ptx = None if float_minmax else _atom_type(kind, elem, op)
    owned = []
    for r in range(n):
        if r & free_regs:
            owned.append(owned[r & ~free_regs])
            continue
        pred = _and(ctx, masks[r] if masks is not None else None, rep)
        if ctx.debug is not None:  # debug mode: an access outside its argument is skipped
            pred = ctx.debug.checked(ctx, op, "atomic", ptr, ptrs[r], elem, 1, pred)
        if float_minmax:
            owned.append(_float_minmax(ctx, op, kind, elem, ptrs[r], vals[r], pred))
        else:
            owned.append(_atomic(ctx, op, kind_ptx, elem, ptrs[r], [vals[r]], pred))
    res = _broadcast_results(ctx, op, ptr.type if tensor else None, owned) if rep is not None \
        else owned
    return [res if tensor else res[0]]


@lowering_rule(AtomicCASOp)
def lower_atomic_cas(op, ctx):
    ptr, cmp, value = op.operands
    elem = scalar_of(value.type)
    if _mem_bits(elem) not in (16, 32, 64):
        raise LoweringError(f"atomic_cas on {elem}: PTX atom.cas takes 16/32/64-bit values", op)
    tensor = isinstance(ptr.type, TensorType)
    n = ctx.num_registers(ptr.type) if tensor else 1
    ptrs, cmps, vals = _regs(ctx, ptr, n), _regs(ctx, cmp, n), _regs(ctx, value, n)
    rep = ctx.replication_predicate(ptr.type if tensor else None)
    free_regs = ctx.free_variable_masks(ptr.type).get("register", 0) if tensor else 0
    owned = []
    for r in range(n):
        if r & free_regs:
            owned.append(owned[r & ~free_regs])
            continue
        pred = rep
        if ctx.debug is not None:  # debug mode: an access outside its argument is skipped
            pred = ctx.debug.checked(ctx, op, "atomic", ptr, ptrs[r], elem, 1, pred)
        owned.append(_atomic(ctx, op, f"cas.b{_mem_bits(elem)}", elem, ptrs[r],
                             [cmps[r], vals[r]], pred))
    res = _broadcast_results(ctx, op, ptr.type if tensor else None, owned) if rep is not None \
        else owned
    return [res if tensor else res[0]]


__all__ = ["lower_load", "lower_store", "lower_atomic_rmw", "lower_atomic_cas"]
