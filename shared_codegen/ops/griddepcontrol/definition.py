"""Grid dependency control, the device half of programmatic dependent launch (PDL, sm_90+;
PTX ISA, "Parallel Synchronization and Communication Instructions: griddepcontrol"):

    ttng.gdc_wait
    ttng.gdc_launch_dependents

A kernel launched with `launch_pdl=True` may start while the kernel before it on the stream
is still running. `gdc_wait` blocks until every prerequisite grid has completed and its memory
is visible; everything the kernel reads that the previous kernel wrote must come after it.
`gdc_launch_dependents` lets the next PDL launch on the stream be scheduled once every CTA of
this grid has issued it (or exited); it orders no memory. Without PDL both are harmless: the
previous grid has already finished, and no dependent is waiting to be scheduled.

Traits: neither op is pure, so no pass drops them. `gdc_wait` declares that it reads and
writes global memory: from the kernel's point of view the other grid's writes land there, so
a pass that moves global loads (the pipeliner issuing loads iterations early) must not move
them above it. `gdc_launch_dependents` has no memory effects.

Interpreter: launches run one after another, each to completion, so the previous kernel's
writes are always visible and there is nothing to wait for or to release: both ops do
nothing. Lowering (`lowering.py`) refuses targets before sm_90, where the instruction does not
exist.
"""

from __future__ import annotations

from shared_codegen.ir.core import MemoryEffect, OpDef
from shared_codegen.layouts.relations import NO_RELATION

GDC_WAIT, GDC_LAUNCH_DEPENDENTS = "ttng.gdc_wait", "ttng.gdc_launch_dependents"


class _GridDepControlOp(OpDef):
    """What both ops share: no operands, no results, nothing to do in the interpreter."""

    layout_rule = NO_RELATION

    @classmethod
    def build(cls, b):
        return b.create(cls.name, [], [])

    def interpret(self, op, frame):
        return []


class GdcWaitOp(_GridDepControlOp):
    """`ttng.gdc_wait`: wait for the prerequisite grids and see their memory."""

    name = GDC_WAIT
    user_name = "gdc_wait"
    memory_effects = frozenset({MemoryEffect.READ_GLOBAL, MemoryEffect.WRITE_GLOBAL})


class GdcLaunchDependentsOp(_GridDepControlOp):
    """`ttng.gdc_launch_dependents`: let the dependent grid be scheduled."""

    name = GDC_LAUNCH_DEPENDENTS
    user_name = "gdc_launch_dependents"


__all__ = ["GdcWaitOp", "GdcLaunchDependentsOp", "GDC_WAIT", "GDC_LAUNCH_DEPENDENTS"]
