"""Lowering of proton.record: nothing without a timeline; with one, an event stamped from one
lane per warp (shared_codegen/lowering/timeline.py)."""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ops.profile.definition import ProfileRecordOp


@lowering_rule(ProfileRecordOp)
def lower_profile_record(op, ctx):
    if ctx.timeline is not None:
        ctx.timeline.record(ctx, op.attrs["name"], op.attrs["is_start"])
    return None
