"""Lowering of the cluster ops (PTX ISA 9.7.13.2 barrier.cluster; 10.8 `%cluster_ctarank`).
Every thread executes them (`.aligned`: all threads of a warp together), as the CTA-wide
`bar.sync` is."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import I32, VOID
from shared_codegen.ops.cluster.definition import (ClusterArriveOp, ClusterCTARankOp,
                                                   ClusterWaitOp)


def cta_rank(ctx):
    """This CTA's rank in its cluster (i32), read once in the prologue; 0 without clusters."""
    if getattr(ctx, "num_ctas", 1) == 1:
        return ctx.i32(0)
    cached = getattr(ctx, "_cluster_cta_rank", None)
    if cached is None:
        asm = ir.InlineAsm(ir.FunctionType(I32, []), "mov.u32 $0, %cluster_ctarank;", "=r",
                           side_effect=False)
        cached = ctx._cluster_cta_rank = ctx.entry_builder.call(asm, [])
    return cached


@lowering_rule(ClusterCTARankOp)
def lower_cluster_cta_rank(op, ctx):
    return [cta_rank(ctx)]


@lowering_rule(ClusterArriveOp)
def lower_cluster_arrive(op, ctx):
    relaxed = ".relaxed" if op.attrs.get("relaxed") else ""
    ctx.inline_asm(f"barrier.cluster.arrive{relaxed}.aligned;", "~{memory}", VOID, [],
                   side_effects=True)
    return None


@lowering_rule(ClusterWaitOp)
def lower_cluster_wait(op, ctx):
    ctx.inline_asm("barrier.cluster.wait.aligned;", "~{memory}", VOID, [], side_effects=True)
    return None


__all__ = ["cta_rank"]
