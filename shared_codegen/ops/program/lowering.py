"""Lowering of the program ops: program ids, CTA barriers, the warp vote, assertions (prints
are in `printing.py`)."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import I1, I32, LoweringError
from shared_codegen.ops.control.lowering import new_block
from shared_codegen.ops.program.definition import (LAUNCH_GRID, AssertOp, AssumeOp,
                                                   BarrierAnyOp, BarrierOp, ProgramIdOp)
from shared_codegen.ops.program.warp_vote import WarpAnyOp

_AXES = "xyz"


@lowering_rule(ProgramIdOp)
def lower_program_id(op, ctx):
    if op.name == LAUNCH_GRID:  # the hidden last parameter (lowering/lower.py)
        if getattr(ctx, "launch_grid", None) is None:
            raise LoweringError(f"{LAUNCH_GRID} in a kernel without the module attribute "
                                f"persistent_programs (tile/passes/persistent.py sets both)")
        return [ctx.launch_grid]
    sreg = "ctaid" if op.name == "tt.get_program_id" else "nctaid"
    if getattr(ctx, "num_ctas", 1) > 1:  # a program is a cluster (docs/clusters.md)
        sreg = "clusterid" if op.name == "tt.get_program_id" else "nclusterid"
    return [ctx.intrinsic(f"llvm.nvvm.read.ptx.sreg.{sreg}.{_AXES[op.attrs['axis']]}", I32, [])]


@lowering_rule(BarrierOp)
def lower_barrier(op, ctx):
    ctx.barrier()
    return None


def _or_of_own_elements(op, ctx) -> ir.Value:
    """The OR of the i1 operand's elements this thread holds."""
    b = ctx.builder
    value = ctx.get(op.operands[0])
    mine = None
    for r in value if isinstance(value, list) else [value]:
        if r.type != I1:
            r = b.icmp_unsigned("!=", r, ir.Constant(r.type, 0))
        mine = r if mine is None else b.or_(mine, r)
    return mine


@lowering_rule(BarrierAnyOp)
def lower_barrier_any(op, ctx):
    """Each thread ORs its own elements; `bar.red.or.pred` ORs the threads'."""
    return [ctx.barrier_or(_or_of_own_elements(op, ctx))]


@lowering_rule(WarpAnyOp)
def lower_warp_any(op, ctx):
    """Each thread ORs its own elements; `vote.sync.any.pred` ORs the warp's 32 threads (all
    of them run here: a Gluon kernel's scalars are the same in a warp)."""
    return [ctx.intrinsic("llvm.nvvm.vote.any.sync", I1,
                          [ctx.i32(-1), _or_of_own_elements(op, ctx)])]


@lowering_rule(AssertOp)
def lower_assert(op, ctx):
    """Trap when any element of the condition is false in any thread. PTX `trap` aborts the
    kernel; the host sees CUDA_ERROR_LAUNCH_FAILED. (The message is not printed yet: that
    needs `__assertfail`, a PTX system call.)"""
    b = ctx.builder
    cond = ctx.get(op.operands[0])
    regs = cond if isinstance(cond, list) else [cond]
    ok = None
    for r in regs:
        if r.type != I1:
            r = b.icmp_unsigned("!=", r, ir.Constant(r.type, 0))
        ok = r if ok is None else b.and_(ok, r)
    fail = new_block(ctx, "assert.fail")
    cont = new_block(ctx, "assert.ok")
    b.cbranch(ok, cont, fail)
    b.position_at_end(fail)
    ctx.intrinsic("llvm.trap", ir.VoidType(), [])
    b.unreachable()
    b.position_at_end(cont)
    return None


@lowering_rule(AssumeOp)
def lower_assume(op, ctx):
    cond = ctx.get(op.operands[0])
    for r in cond if isinstance(cond, list) else [cond]:
        ctx.intrinsic("llvm.assume", ir.VoidType(), [r])
    return None


__all__ = ["lower_program_id", "lower_barrier", "lower_barrier_any", "lower_warp_any",
           "lower_assert", "lower_assume"]
