"""Lowering of TMA gather4 / scatter4 (`gather_scatter.py`): thread 0 issues one message per
four rows and box column chunk. The row offsets arrive replicated (every thread holds all of
them in registers, the frontend's conversion), so thread 0 reads them from its own registers.
A message's shared address is the NVMMA layout's offset of its first element (row 4g, column
chunk start), as for tile copies (`lowering._boxes`); its coordinates are
{column, row0, row1, row2, row3} (PTX ISA 9.7.9.27: the tile::gather4 / tile::scatter4
operand order)."""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import I8, VOID, LoweringError
from shared_codegen.lowering.cross_thread import register_coords
from shared_codegen.ops.mbarrier.lowering import bar_address, sync_barrier, thread_zero
from shared_codegen.ops.shared_memory.definition import offset_map
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.tma.definition import box_shape
from shared_codegen.ops.tma.gather_scatter import AsyncTMAGatherOp, AsyncTMAScatterOp


def _emit(ctx, text, constraints, args) -> None:
    ctx.inline_asm(text, constraints + ",~{memory}", VOID, args, side_effects=True)


def _row_values(ctx, op, offsets):
    """Element i of the offsets tensor, from this thread's registers (all of them)."""
    ll = ctx.linear_layout(offsets.type)
    if any(any(v) for name in ("lane", "warp") for v in ll.bases.get(name, [])):
        raise LoweringError("TMA gather/scatter row offsets must be replicated in every "
                            "thread's registers", op)
    regs = ctx.get(offsets)
    by_row = {}
    for r, coord in enumerate(register_coords(ll)):
        by_row.setdefault(coord[0], regs[r])
    return [by_row[i] for i in range(offsets.type.shape[0])]


def _messages(ctx, op, desc, offsets, y_offset, smem):
    """Per message: its shared address and its {column, row0..row3} coordinates."""
    base, xor = ctx.get(smem)
    if not (hasattr(xor, "constant") and int(xor.constant) == 0):
        raise LoweringError("TMA gather/scatter needs a shared memory view that starts a "
                            "whole tile", op)
    rows_dim, cols_dim = offset_map(smem.type).dims
    width = box_shape(desc.type)[1]
    itemsize = desc.type.element.itemsize
    rows = _row_values(ctx, op, offsets)
    column = ctx.get(y_offset)
    out = []
    for group in range(len(rows) // 4):
        for start in range(0, smem.type.shape[1], width):
            offset = 0
            for dim, coord in ((rows_dim, 4 * group), (cols_dim, start)):
                for j, v in enumerate(dim.bits):
                    if coord >> j & 1:
                        offset ^= v
            addr = base if not offset else ctx.builder.gep(
                base, [ctx.i32(offset * itemsize)], source_etype=I8)
            col = column if not start else ctx.builder.add(column, ctx.i32(start))
            out.append((addr, [col] + rows[4 * group:4 * group + 4]))
    return out


@lowering_rule(AsyncTMAGatherOp)
def lower_tma_gather(op, ctx):
    desc, offsets, y_offset, bar, smem, pred = AsyncTMAGatherOp.parts(op)
    sync_shared(ctx, op, smem, "write", record=False, one_thread=True)  # as a tile TMA load
    sync_barrier(ctx, op, bar, "read", one_thread=True)
    lead = [thread_zero(ctx, pred), ctx.get(desc), bar_address(ctx, op, bar)]
    for dst, coords in _messages(ctx, op, desc, offsets, y_offset, smem):
        _emit(ctx, "@$0 cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4."
                   "mbarrier::complete_tx::bytes [$3], [$1, {$4, $5, $6, $7, $8}], [$2];",
              "b,l,l,l" + ",r" * 5, lead + [dst] + coords)
    return None


@lowering_rule(AsyncTMAScatterOp)
def lower_tma_scatter(op, ctx):
    desc, offsets, y_offset, smem = op.operands
    sync_shared(ctx, op, smem, "read", one_thread=True)  # every thread's writes first
    lead = [thread_zero(ctx), ctx.get(desc)]
    for src, coords in _messages(ctx, op, desc, offsets, y_offset, smem):
        _emit(ctx, "@$0 cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group "
                   "[$1, {$3, $4, $5, $6, $7}], [$2];", "b,l,l" + ",r" * 5,
              lead + [src] + coords)
    _emit(ctx, "@$0 cp.async.bulk.commit_group;", "b", [lead[0]])
    return None
