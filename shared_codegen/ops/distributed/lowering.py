"""Lowering of the distributed family: inline PTX with the memory-model qualifiers.

PTX ISA 8.0 memory consistency model: a `.release` store (or `red`) at `.sys` scope makes the
writes that precede it in its thread, and those its thread observed (cumulativity), visible
to any thread of the system that observes it with an `.acquire` load of the same scope. A
CTA-wide signal therefore first joins the CTA (`bar.sync`: every thread's writes precede the
barrier) and then lets one thread release. A wait is polled by every thread with its own
`ld.acquire`, so each thread's later loads are ordered after the signal without a barrier.

    dist.load   -> ld.{relaxed,acquire}.{cta,gpu,sys}.global.b32   (9.7.9.8)
    dist.store  -> st.{relaxed,release}.{scope}.global.b32          (9.7.9.10)
    dist.signal -> bar.sync; @tid0 st.release.sys.global.b32 / red.release.sys.global.add.u32
    dist.wait   -> loop: ld.acquire.sys.global.b32; setp; bra       (9.7.9.8, 9.7.12.4)
    dist.fence  -> fence.{acq_rel,sc}.{scope}                      (9.7.13.4)

Multimem (NVLink multicast) is not used: multicast is disabled on the machines we target.
"""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import TensorType, scalar_of
from shared_codegen.lowering.context import I32, I64, VOID, LoweringError, llvm_type
from shared_codegen.ops.distributed.definition import (ConsumeTokenOp, FenceOp, OrderedLoadOp,
                                                       OrderedStoreOp, SignalOp, SymmAtOp,
                                                       WAIT_SYMBOLS, WaitOp)
from shared_codegen.ops.memory.lowering import _from_int, _mem_bits, _regs, _to_int



def _access_type(elem, op) -> str:
    bits = _mem_bits(elem)
    if bits not in (32, 64):
        raise LoweringError(f"{op.opdef.user_name} moves 32- or 64-bit elements (flags, "
                            f"counters); got {elem}: load data with tl.load after a wait", op)
    return f"b{bits}"


@lowering_rule(SymmAtOp)
def lower_symm_at(op, ctx):
    ptr, bases, from_rank, to_rank = op.operands
    b = ctx.builder
    table = ctx.get(bases)

    def base_of(rank):
        index = b.sext(ctx.get(rank), I64) if scalar_of(rank.type).bits < 64 else ctx.get(rank)
        # The table never changes while the kernel runs: a plain (cached) load.
        return b.load(b.gep(table, [index], source_etype=I64), typ=I64)

    delta = b.sub(base_of(to_rank), base_of(from_rank))
    pty = llvm_type(scalar_of(ptr.type))
    tensor = isinstance(ptr.type, TensorType)
    regs = ctx.get(ptr) if tensor else [ctx.get(ptr)]
    moved = [b.inttoptr(b.add(b.ptrtoint(p, I64), delta), pty) for p in regs]
    return [moved if tensor else moved[0]]


@lowering_rule(OrderedLoadOp)
def lower_ordered_load(op, ctx):
    ptr, mask, other = OrderedLoadOp.parts(op)
    elem = scalar_of(op.result.type)
    kind = _access_type(elem, op)
    tensor = isinstance(ptr.type, TensorType)
    n = ctx.num_registers(ptr.type) if tensor else 1
    ptrs, masks, others = _regs(ctx, ptr, n), _regs(ctx, mask, n), _regs(ctx, other, n)
    ity = ir.IntType(_mem_bits(elem))
    c = "l" if ity.width == 64 else "r"
    instr = f"ld.{op.attrs['sem']}.{op.attrs['scope']}.global.{kind}"
    out = []
    for r in range(n):
        if masks is None:
            word = ctx.inline_asm(f"{instr} $0, [ $1 + 0 ];", f"={c},l,~{{memory}}", ity,
                                  [ptrs[r]], side_effects=True)
        else:
            fill = _to_int(ctx, others[r], elem) if others is not None else ir.Constant(ity, 0)
            word = ctx.inline_asm(f"mov.b{ity.width} $0, $3;\n@$2 {instr} $0, [ $1 + 0 ];",
                                  f"={c},l,b,{c},~{{memory}}", ity, [ptrs[r], masks[r], fill],
                                  side_effects=True)
        out.append(_from_int(ctx, word, elem))
    return [out if tensor else out[0]]


@lowering_rule(OrderedStoreOp)
def lower_ordered_store(op, ctx):
    ptr, value = op.operands[:2]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    elem = scalar_of(value.type)
    kind = _access_type(elem, op)
    tensor = isinstance(ptr.type, TensorType)
    n = ctx.num_registers(ptr.type) if tensor else 1
    ptrs, vals, masks = _regs(ctx, ptr, n), _regs(ctx, value, n), _regs(ctx, mask, n)
    rep = ctx.replication_predicate(ptr.type if tensor else None)
    free_regs = ctx.free_variable_masks(ptr.type).get("register", 0) if tensor else 0
    c = "l" if _mem_bits(elem) == 64 else "r"
    instr = f"st.{op.attrs['sem']}.{op.attrs['scope']}.global.{kind}"
    b = ctx.builder
    if not tensor and op.attrs["sem"] == "release":
        # One thread stores for the program: the others' earlier writes join it first, and
        # the release is cumulative over them (as for dist.signal).
        ctx.barrier()
    for r in range(n):
        if r & free_regs:
            continue  # a register repeating one the thread already stores
        pred = rep
        if masks is not None:
            pred = masks[r] if pred is None else b.and_(pred, masks[r])
        args = [ptrs[r], _to_int(ctx, vals[r], elem)]
        constraints = f"l,{c}"
        guard = ""
        if pred is not None:
            args.append(pred)
            constraints += ",b"
            guard = "@$2 "
        ctx.inline_asm(f"{guard}{instr} [ $0 + 0 ], $1;", constraints + ",~{memory}", VOID,
                       args, side_effects=True)
    return None


@lowering_rule(SignalOp)
def lower_signal(op, ctx):
    ptr, value = op.operands
    sem, scope = op.attrs["sem"], op.attrs["scope"]
    # Every thread's earlier writes precede the barrier; the releasing thread's store is
    # cumulative over what it observed, so the peer sees them all.
    ctx.barrier()
    if op.attrs["op"] == "set":
        asm = f"@$2 st.{sem}.{scope}.global.b32 [ $0 + 0 ], $1;"
    else:
        asm = f"@$2 red.{sem}.{scope}.global.add.u32 [ $0 + 0 ], $1;"
    ctx.inline_asm(asm, "l,r,b,~{memory}", VOID,
                   [ctx.get(ptr), ctx.get(value), ctx.replication_predicate(None)],
                   side_effects=True)
    return None


@lowering_rule(WaitOp)
def lower_wait(op, ctx):
    ptr, value = op.operands
    b = ctx.builder
    instr = f"ld.{op.attrs['sem']}.{op.attrs['scope']}.global.b32"
    poll = b.append_basic_block(name="dist_wait_poll")
    done = b.append_basic_block(name="dist_wait_done")
    b.branch(poll)
    b.position_at_end(poll)
    seen = ctx.inline_asm(f"{instr} $0, [ $1 + 0 ];", "=r,l,~{memory}", I32, [ctx.get(ptr)],
                          side_effects=True)
    holds = b.icmp_signed(WAIT_SYMBOLS[op.attrs["cmp"]], seen, ctx.get(value))
    b.cbranch(holds, done, poll)
    b.position_at_end(done)
    return [seen]


@lowering_rule(ConsumeTokenOp)
def lower_consume_token(op, ctx):
    # The order is already in the code: the wait's loop (volatile asm with a memory clobber)
    # precedes every use of its token, and LLVM moves no memory access across it.
    return [ctx.get(op.operands[0])]


@lowering_rule(FenceOp)
def lower_fence(op, ctx):
    ctx.inline_asm(f"fence.{op.attrs['sem']}.{op.attrs['scope']};", "~{memory}", VOID, [],
                   side_effects=True)
    return None


__all__ = ["lower_symm_at", "lower_ordered_load", "lower_ordered_store", "lower_signal",
           "lower_wait", "lower_consume_token", "lower_fence"]
