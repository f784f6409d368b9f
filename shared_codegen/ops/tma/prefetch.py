"""TMA prefetch into L2 (sm_90): `cp.async.bulk.prefetch.tensor`, PTX ISA 9.7.9.27.1.4.

    ttng.async_tma_prefetch %desc, %c0, %c1[, %pred]

Asks the TMA unit to bring the block at the coordinates (the descriptor's block, as a load
of it would read, out-of-bounds parts skipped) from global memory into L2, so that a later
load of it waits for L2 rather than DRAM. It is a hint: nothing is written, there is no
completion to wait for, and a kernel's results do not depend on it, so the interpreter only
checks its coordinates. Thread 0 issues one message per box of the block, as loads do.
Gluon: `tma.async_prefetch(desc, coord, pred=True)`; JAX's Mosaic GPU has the same
(`async_prefetch`), CUTLASS's SM90 TMA copies a `prefetch`.
"""

from __future__ import annotations

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, lowering_rule
from shared_codegen.ir.types import TensorDescriptorType, TensorType, int1, int32
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.mbarrier.lowering import thread_zero
from shared_codegen.ops.tma.lowering import _check_multicast_use, _emit, box_coordinates

PREFETCH = "ttng.async_tma_prefetch"


class AsyncTMAPrefetchOp(OpDef):
    """`ttng.async_tma_prefetch [desc, *coords, pred?]`: the block at `coords` into L2."""

    name = PREFETCH
    layout_rule = OWN_LAYOUTS
    user_name = "tma.async_prefetch"
    # It reads global memory (into L2) and must stay where the kernel put it.
    memory_effects = frozenset({MemoryEffect.READ_GLOBAL})

    @staticmethod
    def build(b, desc, coords, pred=None):
        operands = [desc] + list(coords) + ([pred] if pred is not None else [])
        return b.create(PREFETCH, operands, [], {"has_pred": pred is not None})

    @staticmethod
    def parts(op):
        rank = op.operands[0].type.rank
        pred = op.operands[1 + rank] if op.attrs.get("has_pred") else None
        return op.operands[0], op.operands[1:1 + rank], pred

    def print_attrs(self, op):
        return ""

    def verify(self, op):
        if not op.operands or not isinstance(op.operands[0].type, TensorDescriptorType):
            raise VerificationError(f"operand #0 must be a tensor descriptor, got "
                                    f"{op.operands[0].type if op.operands else 'nothing'}",
                                    op)
        desc, coords, pred = self.parts(op)
        if len(op.operands) != 1 + desc.type.rank + bool(pred is not None):
            raise VerificationError(f"expected operands [desc, {desc.type.rank} coordinates, "
                                    f"pred?], got {len(op.operands)} operands", op)
        for c in coords:
            if isinstance(c.type, TensorType) or c.type != int32:
                raise VerificationError(f"coordinates must be i32 scalars, got {c.type}", op)
        if pred is not None and pred.type != int1:
            raise VerificationError(f"pred must be an i1 scalar, got {pred.type}", op)

    def interpret(self, op, frame):
        desc, coords, pred = self.parts(op)
        for c in coords:  # a hint: nothing to do but read its operands
            int(frame[c])
        if pred is not None:
            bool(frame[pred])
        return []


@lowering_rule(AsyncTMAPrefetchOp)
def lower_tma_prefetch(op, ctx):
    desc, coords, pred = AsyncTMAPrefetchOp.parts(op)
    _check_multicast_use(ctx, op, desc)
    ty = desc.type
    rank = ty.rank
    lead = [thread_zero(ctx, pred), ctx.get(desc)]
    crd = ", ".join(f"${2 + i}" for i in range(rank))
    # One message per box, as a load of the block sends.
    for _, box_coords in box_coordinates(ctx, ty, ty.block_shape, [ctx.get(c) for c in coords]):
        _emit(ctx, f"@$0 cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile [$1, {{{crd}}}];",
              "b,l" + ",r" * rank, lead + box_coords)
    return None


__all__ = ["AsyncTMAPrefetchOp", "PREFETCH"]
