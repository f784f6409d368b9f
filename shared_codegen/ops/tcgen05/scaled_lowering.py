"""Lowering of `ttng.tc_gen5_mma_scaled` to the block-scaled tcgen05.mma (sm_100a).

    tcgen05.mma.cta_group::1.kind::{mxf8f6f4,mxf4,mxf4nvf4}.block_scale.scale_vec::{1X,2X,4X}
        [d], a_desc, b_desc, idesc, [a_scale], [b_scale], enable_input_d;

(PTX ISA "tcgen05.mma"), issued by one thread, multiplies a 128 x K-step tile of A by a
K-step x N tile of B, each K-step row of A (column of B) scaled by `scale_vec` factors read
from tensor memory at [a_scale] ([b_scale]), into 128 TMEM lanes x N columns of D.

  Step 1. Shared operands: the descriptors of tcgen05_mma (`lowering.py`), the operand read
          as bytes: every kind moves 32 bytes of K per instruction (32 8-bit elements, 64
          e2m1 two to a byte, or 32 fp4-padded e2m1 of a mixed `.kind::mxf8f6f4`, whose
          padded bytes `hardware_bits` counts). The block-scaled kinds read A and B K-major
          here (`.kind::mxf4*` cannot transpose; 8-bit MN-major is not planned).
  Step 2. Scale factors (`plan_scale_step`): for the first scale s0 of the step, its TMEM
          column and byte (the `TensorMemoryScalesLayout` cell map). The hardware reads row r
          of the 128 (or N) rows at lane r % 32, column + r // 32, bytes id .. id + scales
          per instruction - 1, the scale-factor figures of the PTX ISA; every row is checked
          against the layout. The byte is the instruction descriptor's scale ID (0-3 for 1X,
          0 or 2 for 2X, 0 for 4X).
  Step 3. The instruction descriptor (PTX ISA "Instruction descriptor" for the block-scaled
          kinds): B scale ID in bits 4-5, A / B formats in 7-9 / 10-12 (mxf8f6f4: e4m3 0,
          e5m2 1, e2m1 5; mxf4 kinds: e2m1 1), N >> 3 in 17-22, the scale format in bit 23
          (1: UE8M0, 0: UE4M3), M >> 4 in 24-28, A scale ID in 29-30. Triton's own lowering
          tests give the same words (e.g. 144708608 / 681579536 for e4m3 x e2m1, N = 128, scale
          IDs 0 and 1).
  Step 4. Emission as tcgen05_mma: pending shared writes ordered, the tcgen05 thread-sync
          fences around a CTA barrier, thread 0 (and `pred`) issues one instruction per
          (N tile, K step), then a tcgen05.commit per barrier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import I32, LoweringError
from shared_codegen.ops.mbarrier.lowering import sync_barrier
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.tcgen05.lowering import _asm, _fit, _TcDescriptors, commit
from shared_codegen.ops.tcgen05.scaled import (MAX_INSTR_N, ScaledKind, TCGen5MMAScaledOp,
                                               is_fp4_padded)
from shared_codegen.ops.tensor_memory.definition import cell_map
from shared_codegen.ops.tensor_memory.lowering import require_tcgen05
from shared_codegen.ops.wgmma.lowering import SmemPlan, operand_bits, smem_start

INSTR_K_BYTES = 32
# Format codes of the block-scaled instruction descriptor.
MXF8F6F4_CODES = {"e4m3": 0, "e5m2": 1, "e2m1": 5}
MXF4_E2M1 = 1
MXF4NVF4_PTX = (8, 7)


@dataclass(frozen=True)
class ScaledStep:
    n0: int
    k0: int           # first K element
    a_start: int      # bytes from a's view base
    b_start: int
    a_scale_col: int  # TMEM columns from the scale views' starts
    b_scale_col: int
    idesc: int


@dataclass
class ScaledPlan:
    kind: ScaledKind
    instr_n: int
    steps: List[ScaledStep]
    a: SmemPlan
    b: SmemPlan

    @property
    def opcode(self) -> str:
        return (f"tcgen05.mma.cta_group::1.kind::{self.kind.kind}.block_scale."
                f"scale_vec::{self.kind.scale_vec}")


def plan_scale_step(ty, row0: int, rows: int, s0: int, per_instr: int, what: str):
    """(TMEM column, scale ID) of scales [row0, row0 + rows) x [s0, s0 + per_instr) of the
    scale view `ty`, checked to be where the hardware reads them."""
    lanes, units, _ = cell_map(ty.layout, tuple(ty.shape), ty.element.bits)
    unit = int(units[row0, s0])
    col, sid = unit // 4, unit % 4
    r, j = np.meshgrid(np.arange(rows), np.arange(per_instr), indexing="ij")
    if sid + per_instr > 4 or not (np.all(lanes[row0 + r, s0 + j] == r % 32) and
                                   np.all(units[row0 + r, s0 + j] ==
                                          4 * (col + r // 32) + sid + j)):
        raise ValueError(f"{what} rows [{row0}, {row0 + rows}) x scales [{s0}, "
                         f"{s0 + per_instr}) are not where tcgen05.mma reads its scale factors "
                         f"(row r on lane r % 32, column r // 32, {per_instr} consecutive "
                         f"bytes); {ty.layout!r}")
    return col, sid


def hardware_bits(ty, k_dim: int):
    """Byte offsets of each coordinate bit of a shared operand as the MMA reads it, K counted
    in the bytes the hardware steps through: bytes of 8-bit and of packed e2m1 operands; for
    an fp4-padded operand, its padded bytes (16 per 16 elements: 8 of packed pairs, then 8
    unused), so a K step of 32 elements is 32 bytes there too."""
    bits_mn, bits_k = operand_bits(ty, k_dim)
    if not is_fp4_padded(ty):
        return bits_mn, bits_k
    # Packed byte j sits at padded byte (j // 8) * 16 + j % 8: bit 3 of the padded position
    # is the unused half (8 bytes on, inside the 16-byte chunk a swizzle moves whole).
    if len(bits_k) > 3 and bits_k[3] & 15:
        raise ValueError(f"the fp4-padded operand's layout does not pad each 8 bytes to 16: "
                         f"{ty.layout!r}")
    return bits_mn, list(bits_k[:3]) + [8] + list(bits_k[3:])


def instruction_descriptor(kind: ScaledKind, a_type: str, b_type: str, m: int, n: int,
                           a_id: int, b_id: int) -> int:
    """Step 3 (K-major A and B)."""
    if kind.kind == "mxf8f6f4":
        a_code, b_code = MXF8F6F4_CODES[a_type], MXF8F6F4_CODES[b_type]
    else:
        a_code = b_code = MXF4_E2M1
    return (b_id << 4) | (a_code << 7) | (b_code << 10) | ((n >> 3) << 17) | \
        (int(kind.ue8m0) << 23) | ((m >> 4) << 24) | (a_id << 29)


def plan_tcgen05_scaled(a_ty, b_ty, d_ty, sa_ty, sb_ty, kind: ScaledKind, a_type: str,
                        b_type: str) -> ScaledPlan:
    """Steps 1-3 (pure Python; ValueError in the user's terms)."""
    m, n = d_ty.shape
    _, units, _ = cell_map(d_ty.layout, tuple(d_ty.shape), d_ty.element.bits)
    if not np.array_equal(units[0], np.arange(n)):
        raise ValueError(f"the accumulator's tensor memory must hold column n of D in TMEM "
                         f"column n (fp32, col_stride=1), got {d_ty.layout!r}")
    instr_n = min(n, MAX_INSTR_N)
    if n % instr_n:
        raise ValueError(f"tcgen05_mma_scaled N={n} above {MAX_INSTR_N} must be a multiple of it")
    ks = range(0, kind.k // kind.instr_k * INSTR_K_BYTES, INSTR_K_BYTES)
    n0s = range(0, n, instr_n)
    a_bits, b_bits = hardware_bits(a_ty, 1), hardware_bits(b_ty, 0)
    try:
        a_plan = _fit(a_bits, 1, m, INSTR_K_BYTES, [(0, k0) for k0 in ks], "a")
        b_plan = _fit(b_bits, 1, instr_n, INSTR_K_BYTES,
                      [(n0, k0) for n0 in n0s for k0 in ks], "b")
    except ValueError as exc:
        raise ValueError(str(exc).replace("tcgen05_mma ", "tcgen05_mma_scaled ")) from None
    if not (a_plan.k_major and b_plan.k_major):
        raise ValueError("tcgen05_mma_scaled reads a and b K-major (K contiguous in shared "
                         "memory: b as the permute((1, 0)) of an [N, K] buffer)")
    per_instr = kind.scales_per_instr
    steps = []
    for n0 in n0s:
        for k0 in ks:
            s0 = k0 // INSTR_K_BYTES * kind.instr_k // kind.vec
            a_col, a_id = plan_scale_step(sa_ty, 0, m, s0, per_instr, "a_scale")
            b_col, b_id = plan_scale_step(sb_ty, n0, instr_n, s0, per_instr, "b_scale")
            steps.append(ScaledStep(n0, k0, smem_start(a_bits, a_plan, 0, k0),
                                    smem_start(b_bits, b_plan, n0, k0), a_col, b_col,
                                    instruction_descriptor(kind, a_type, b_type, m, instr_n,
                                                           a_id, b_id)))
    return ScaledPlan(kind, instr_n, steps, a_plan, b_plan)


@lowering_rule(TCGen5MMAScaledOp)
def lower_tc_gen5_mma_scaled(op, ctx):
    a, bm, d, sa, sb, use_acc, pred, bars, preds = TCGen5MMAScaledOp.parts(op)
    require_tcgen05(ctx, op, "tcgen05_mma_scaled")
    try:
        kind = TCGen5MMAScaledOp.kind(op)
        plan = plan_tcgen05_scaled(a.type, bm.type, d.type, sa.type, sb.type, kind,
                                   op.attrs["a_type"], op.attrs["b_type"])
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    if kind.kind == "mxf4nvf4":  # PTX ISA 8.7 added .kind::mxf4nvf4 and scale_vec::4X
        ctx.ptx_floor = max(getattr(ctx, "ptx_floor", None) or MXF4NVF4_PTX, MXF4NVF4_PTX)
    b = ctx.builder
    for v in (a, bm):
        sync_shared(ctx, op, v, "read")
    # Every thread's tcgen05.st of D and of the scales is ordered before the issue.
    _asm(ctx, "tcgen05.fence::before_thread_sync;", "", [])
    ctx.barrier()
    _asm(ctx, "tcgen05.fence::after_thread_sync;", "", [])
    issue = b.and_(ctx.thread_is_zero(), ctx.get(pred))
    a_desc = _TcDescriptors(ctx, op, a, plan.a)
    b_desc = _TcDescriptors(ctx, op, bm, plan.b)
    d_addr, sa_addr, sb_addr = ctx.get(d), ctx.get(sa), ctx.get(sb)
    use = b.zext(ctx.get(use_acc), I32)
    first_k = {}
    for step in plan.steps:
        first_k.setdefault(step.n0, step.k0)
    for step in plan.steps:
        enable = use if first_k[step.n0] == step.k0 else ctx.i32(1)
        _asm(ctx, "{\n.reg .pred en;\nsetp.ne.b32 en, $7, 0;\n"
                  f"@$0 {plan.opcode} [$1], $2, $3, $4, [$5], [$6], en;\n}}",
             "b,r,l,l,r,r,r,r",
             [issue, b.add(d_addr, ctx.i32(step.n0)), a_desc.at(step.a_start),
              b_desc.at(step.b_start), ctx.i32(step.idesc),
              b.add(sa_addr, ctx.i32(step.a_scale_col)),
              b.add(sb_addr, ctx.i32(step.b_scale_col)), enable])
    for bar, p in zip(bars, preds):
        sync_barrier(ctx, op, bar, "read")
        commit(ctx, op, bar, b.and_(issue, ctx.get(p)))
    return []


__all__ = ["plan_tcgen05_scaled", "plan_scale_step", "instruction_descriptor", "ScaledPlan",
           "ScaledStep"]
