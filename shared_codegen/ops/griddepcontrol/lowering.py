"""Lowering of the grid dependency control ops: `griddepcontrol.wait;` and
`griddepcontrol.launch_dependents;` in every thread (PTX ISA, "Parallel Synchronization and
Communication Instructions: griddepcontrol"; sm_90+, PTX ISA 7.8).

Inline PTX with a memory clobber rather than LLVM's `llvm.nvvm.griddepcontrol.*` intrinsics:
the wait must keep later loads after it, and the clobber says so to LLVM whatever attributes
the intrinsic carries. Before sm_90 the instruction does not exist: Triton 3.6 emits it anyway
and ptxas rejects the module; here the compile stops first, naming the builtin and the
target."""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import VOID, LoweringError
from shared_codegen.lowering.smem_matrix import arch_of
from shared_codegen.ops.griddepcontrol.definition import GdcLaunchDependentsOp, GdcWaitOp


def _griddepcontrol(op, ctx, action: str):
    if arch_of(ctx) < 90:
        raise LoweringError(f"{op.opdef.user_name}() needs sm_90 or newer (griddepcontrol, "
                            f"programmatic dependent launch); the target is {ctx.target}. "
                            f"Call it only when compiling for sm_90+ (e.g. under a constexpr "
                            f"flag, as Triton's tutorial 11 does with USE_GDC)", op)
    ctx.inline_asm(f"griddepcontrol.{action};", "~{memory}", VOID, [], side_effects=True)


@lowering_rule(GdcWaitOp)
def lower_gdc_wait(op, ctx):
    _griddepcontrol(op, ctx, "wait")
    return None


@lowering_rule(GdcLaunchDependentsOp)
def lower_gdc_launch_dependents(op, ctx):
    _griddepcontrol(op, ctx, "launch_dependents")
    return None
