"""Lowering of `ttng.tmem_copy` to `tcgen05.cp.cta_group::1.128x256b` (sm_100a).

PTX ISA "tcgen05.cp": one instruction, issued by one thread, copies a 128-row x 256-bit
matrix from shared memory, described by a shared-memory matrix descriptor, to 128 TMEM lanes
x 8 consecutive 32-bit columns. The descriptor reads the source like the A operand of a tf32
MMA with M = 128 and one K step of 8 elements (K-major, 32 bytes per row), so the operand
planner of tcgen05_mma (`plan_smem_operand`) finds the descriptor form and checks, element
for element, that the hardware reads the bytes the shared layout puts there.

  Step 1. For each 128-row block and each 8-column group of the [M, N] source: the TMEM
          column of its first element (`cell_map` of the destination layout), which must
          hold row r of the block on lane r and the 8 columns consecutively.
  Step 2. Order pending generic writes to the source first (`sync_shared`, then a CTA
          barrier with the tcgen05 thread-sync fences, as for tcgen05_mma), then thread 0
          issues one tcgen05.cp per (block, group).

MX scale factors (a `TensorMemoryScalesLayout` destination) go by
`tcgen05.cp.cta_group::1.32x128b.warpx4` instead: 512 contiguous source bytes (32 rows of
16, the no-swizzle K-major canonical layout, SBO = 128) to lanes 0-31 x 4 columns of every
quadrant, i.e. 128 scale rows x 4 scales; `plan_scales_copy` checks every element's source
byte and TMEM cell.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import LoweringError
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.layouts import TensorMemoryScalesLayout
from shared_codegen.ops.tcgen05.copy import (COPY_COLUMNS, COPY_ROWS, SCALE_COPY_K,
                                             SCALE_COPY_ROWS, TCGen5CopyOp)
from shared_codegen.ops.tcgen05.lowering import _asm, _fit, _TcDescriptors
from shared_codegen.ops.tensor_memory.definition import cell_map
from shared_codegen.ops.tensor_memory.lowering import require_tcgen05
from shared_codegen.ops.wgmma.lowering import SmemPlan, operand_bits, smem_start


def plan_tcgen05_copy(src_ty, dst_ty) -> Tuple[SmemPlan, List[Tuple[int, int]]]:
    """(descriptor plan, [(TMEM column, descriptor start byte)] per instruction) for copying
    `src_ty` (shared) into `dst_ty` (tensor memory); ValueError in the user's terms."""
    m, n = dst_ty.shape
    lanes, units, _ = cell_map(dst_ty.layout, (m, n), dst_ty.element.bits)
    bits = operand_bits(src_ty, 1)
    origins = [(m0, n0) for m0 in range(0, m, COPY_ROWS) for n0 in range(0, n, COPY_COLUMNS)]
    try:
        plan = _fit(bits, src_ty.element.itemsize, COPY_ROWS, COPY_COLUMNS, origins, "src")
    except ValueError as exc:
        raise ValueError(str(exc).replace("tcgen05_mma cannot read src",
                                          "tcgen05_copy cannot read src")) from None
    if not plan.k_major:
        raise ValueError("tcgen05_copy reads its source with N contiguous in shared memory; "
                         "the source layout is transposed (M contiguous)")
    steps = []
    want_lanes = np.arange(COPY_ROWS)[:, None]
    want_cols = np.arange(COPY_COLUMNS)[None, :]
    for m0, n0 in origins:
        tile_lanes = lanes[m0:m0 + COPY_ROWS, n0:n0 + COPY_COLUMNS]
        tile_cols = units[m0:m0 + COPY_ROWS, n0:n0 + COPY_COLUMNS]
        col = int(tile_cols[0, 0])
        if not (np.all(tile_lanes == want_lanes) and np.all(tile_cols == col + want_cols)):
            raise ValueError(f"tcgen05_copy: rows [{m0}, {m0 + COPY_ROWS}) x columns "
                             f"[{n0}, {n0 + COPY_COLUMNS}) of the destination are not 128 "
                             f"lanes x 8 consecutive columns of tensor memory "
                             f"({dst_ty.layout!r})")
        steps.append((col, smem_start(bits, plan, m0, n0)))
    return plan, steps


# 32x128b.warpx4 reads 32 rows of 16 bytes, no swizzle: the K-major canonical layout of
# 8-row x 16-byte core matrices, 128 bytes apart (SBO); one core matrix wide in K, so LBO is
# never used (16 here).
SCALES_SMEM_PLAN = SmemPlan(swizzle=0, k_major=True, lbo=16, sbo=128, itemsize=1)


def plan_scales_copy(src_ty, dst_ty) -> List[Tuple[int, int]]:
    """[(TMEM column, source start byte)] per 32x128b.warpx4 copy of MX scale factors
    (`copy.py`); ValueError in the user's terms when the layouts do not fit it."""
    from shared_codegen.ops.shared_memory.definition import offset_map
    m, k = dst_ty.shape
    lanes, units, _ = cell_map(dst_ty.layout, (m, k), 8)
    offsets = offset_map(src_ty).element_offsets()
    i, j, b = np.meshgrid(np.arange(32), np.arange(4), np.arange(4), indexing="ij")
    steps = []
    for r0 in range(0, m, SCALE_COPY_ROWS):
        for k0 in range(0, k, SCALE_COPY_K):
            rows, cols = r0 + 32 * j + i, k0 + b
            col = int(units[r0, k0]) // 4
            if not (np.all(lanes[rows, cols] == i) and
                    np.all(units[rows, cols] == 4 * (col + j) + b)):
                raise ValueError(f"tcgen05_copy: scale rows [{r0}, {r0 + 128}) x "
                                 f"[{k0}, {k0 + 4}) are not 4 whole columns of tensor memory "
                                 f"({dst_ty.layout!r})")
            start = int(offsets[r0, k0])
            if start % 16 or not np.all(offsets[rows, cols] == start + 16 * i + 4 * j + b):
                raise ValueError(f"failed to find valid tcgen05.copy layout from shared memory "
                                 f"descriptor: scale rows [{r0}, {r0 + 128}) x [{k0}, {k0 + 4}) "
                                 f"of {src_ty.layout!r} must be 512 contiguous bytes holding "
                                 f"row r0 + 32 * j + i, scale k0 + b at byte 16 * i + 4 * j + b "
                                 f"(the unswizzled packed-block scale layout)")
            steps.append((col, start))
    return steps


def _lower_scales_copy(op, ctx, src, dst):
    try:
        steps = plan_scales_copy(src.type, dst.type)
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    sync_shared(ctx, op, src, "read")
    _asm(ctx, "tcgen05.fence::before_thread_sync;", "", [])
    ctx.barrier()
    _asm(ctx, "tcgen05.fence::after_thread_sync;", "", [])
    desc = _TcDescriptors(ctx, op, src, SCALES_SMEM_PLAN)
    issue = ctx.thread_is_zero()
    base = ctx.get(dst)
    for col, start in steps:
        _asm(ctx, "@$0 tcgen05.cp.cta_group::1.32x128b.warpx4 [$1], $2;", "b,r,l",
             [issue, ctx.builder.add(base, ctx.i32(col)), desc.at(start)])
    return []


@lowering_rule(TCGen5CopyOp)
def lower_tmem_copy(op, ctx):
    src, dst = op.operands
    require_tcgen05(ctx, op, "tcgen05_copy")
    if isinstance(dst.type.layout, TensorMemoryScalesLayout):
        return _lower_scales_copy(op, ctx, src, dst)
    try:
        plan, steps = plan_tcgen05_copy(src.type, dst.type)
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    sync_shared(ctx, op, src, "read")
    _asm(ctx, "tcgen05.fence::before_thread_sync;", "", [])
    ctx.barrier()
    _asm(ctx, "tcgen05.fence::after_thread_sync;", "", [])
    desc = _TcDescriptors(ctx, op, src, plan)
    b = ctx.builder
    issue = ctx.thread_is_zero()
    base = ctx.get(dst)
    for col, start in steps:
        _asm(ctx, "@$0 tcgen05.cp.cta_group::1.128x256b [$1], $2;", "b,r,l",
             [issue, b.add(base, ctx.i32(col)), desc.at(start)])
    return []


__all__ = ["plan_tcgen05_copy", "plan_scales_copy"]
