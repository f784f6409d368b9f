"""Lowering of fence_async_shared: `fence.proxy.async.shared::{cta,cluster}` in every thread
(PTX ISA 9.7.13.4.18, membar/fence)."""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import VOID
from shared_codegen.ops.fence.definition import FenceAsyncSharedOp


@lowering_rule(FenceAsyncSharedOp)
def lower_fence_async_shared(op, ctx):
    space = "shared::cluster" if op.attrs.get("cluster") else "shared::cta"
    ctx.inline_asm(f"fence.proxy.async.{space};", "~{memory}", VOID, [],
                   side_effects=True)
    return None
