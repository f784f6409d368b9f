"""`ttng.tmem_copy` (tcgen05.cp, sm_100a): an asynchronous copy from shared to tensor memory.

    ttng.tmem_copy %src, %dst      (Gluon: tcgen05_copy(src_smem, dst_tmem))

The copy runs on the tensor-core pipe in order with the tcgen05 MMAs of the issuing thread
(PTX ISA "tcgen05.cp": a later tcgen05.mma sees its data; a `tcgen05.commit` tracks both), so
the interpreter queues it on the same `Tcgen05Machine` as an MMA: the source is captured at
issue (its bytes are the copy's until a wait observes the commit after it: writing them is a
race), the destination is written when the copy lands, at a seeded random point no later
than the commit that tracks it, and loads or stores of it before that wait are races.

What this compiler copies (Triton 3.6 supports the same for a `TensorMemoryLayout`
destination): a [M, N] 32-bit tensor into a TensorMemoryLayout with block M = 128 and
col_stride = 1, from a shared layout the tcgen05 descriptor reads K-major (N contiguous):
an NVMMASharedLayout, not transposed. Each `tcgen05.cp.cta_group::1.128x256b` moves 128
rows x 8 columns.

MX scale factors: a [M, S] 8-bit tensor (M a multiple of 128, S of 4) into a
`TensorMemoryScalesLayout`, with `tcgen05.cp.cta_group::1.32x128b.warpx4`: each moves 512
contiguous bytes of shared memory, 32 rows of 16 bytes, into lanes 0-31 x 4 columns and the
same in the other three quadrants. With the scale layout (`layouts/shared.py`) that is 128
rows x 4 scales, byte 16 * i + 4 * j + b holding row 32 * j + i, scale b: the "packed
block" shared layout upstream's tutorial 11 gets by unswizzling its TMA block
(`copy_lowering.plan_scales_copy` checks it element by element).
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError
from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType
from shared_codegen.layouts import TensorMemoryLayout, TensorMemoryScalesLayout
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.mbarrier.definition import progress
from shared_codegen.ops.tcgen05.definition import Tcgen05Machine, _Mma, _read_operand

COPY = "ttng.tmem_copy"
COPY_ROWS, COPY_COLUMNS = 128, 8  # the 128x256b shape: 128 lanes x 8 32-bit columns
SCALE_COPY_ROWS, SCALE_COPY_K = 128, 4  # 32x128b.warpx4: 128 scale rows x 4 scales


def check_tcgen05_copy(src, dst) -> None:
    """ValueError, in the user's terms, unless `src` (shared) -> `dst` (tensor memory) is a
    copy this compiler handles."""
    if not isinstance(src, SharedMemoryType):
        raise ValueError(f"tcgen05_copy: src must be a shared memory descriptor, got {src}")
    if not isinstance(dst, TensorMemoryType):
        raise ValueError(f"tcgen05_copy: dst must be a tensor memory descriptor, got {dst}")
    if isinstance(dst.layout, TensorMemoryScalesLayout):
        _check_scales_copy(src, dst)
        return
    if not isinstance(dst.layout, TensorMemoryLayout):
        raise ValueError(f"tcgen05_copy into {dst.layout!r} is not supported; the destination "
                         f"must have a TensorMemoryLayout or a TensorMemoryScalesLayout")
    if len(src.shape) != 2 or tuple(src.shape) != tuple(dst.shape):
        raise ValueError(f"tcgen05_copy: src {list(src.shape)} and dst {list(dst.shape)} must "
                         f"have the same [M, N] shape")
    if src.element != dst.element:
        raise ValueError(f"tcgen05_copy: src dtype {src.element} and dst dtype {dst.element} "
                         f"must match")
    if src.element.bits != 32:
        raise ValueError(f"tcgen05_copy into a TensorMemoryLayout copies 32-bit elements, got "
                         f"{src.element}")
    m, n = dst.shape
    if dst.layout.block[0] != COPY_ROWS or m % COPY_ROWS:
        raise ValueError(f"tcgen05_copy needs TensorMemoryLayout block M = 128 and M a multiple "
                         f"of 128 (it fills all 128 TMEM lanes), got block "
                         f"{list(dst.layout.block)} and shape {list(dst.shape)}")
    if dst.layout.col_stride != 1:
        raise ValueError(f"tcgen05_copy needs col_stride=1 for 32-bit elements, got "
                         f"{dst.layout.col_stride}")
    if n % COPY_COLUMNS:
        raise ValueError(f"tcgen05_copy moves 8 columns (256 bits) per row at a time; N must be "
                         f"a multiple of 8, got {n}")


def _check_scales_copy(src, dst) -> None:
    if len(src.shape) != 2 or tuple(src.shape) != tuple(dst.shape):
        raise ValueError(f"tcgen05_copy: src {list(src.shape)} and dst {list(dst.shape)} must "
                         f"have the same [M, K // VEC] shape")
    if src.element != dst.element:
        raise ValueError(f"tcgen05_copy: src dtype {src.element} and dst dtype {dst.element} "
                         f"must match")
    m, k = dst.shape
    if m % SCALE_COPY_ROWS or k % SCALE_COPY_K:
        raise ValueError(f"tcgen05_copy of scale factors moves 128 rows x 4 scales at a time "
                         f"(32x128b.warpx4); the shape must be a multiple of [128, 4], got "
                         f"{list(dst.shape)}")
    # The source layout is checked here, not only when lowering, so that the interpreter
    # refuses what the compiler cannot emit.
    from shared_codegen.ops.tcgen05.copy_lowering import plan_scales_copy
    plan_scales_copy(src, dst)


class _Copy(_Mma):
    """A copy queued on the tensor-core pipe: `a` is the source as captured at issue."""

    what = "tcgen05_copy"

    def _compute(self) -> None:
        self.d_view.write_raw(self.a.astype(self.d_ty.element.np), self.d_ty)
        self.landed = True


class TCGen5CopyOp(OpDef):
    """`ttng.tmem_copy [src, dst]`."""

    name = COPY
    layout_rule = OWN_LAYOUTS
    user_name = "tcgen05_copy"
    memory_effects = frozenset({MemoryEffect.READ_SHARED, MemoryEffect.WRITE_SHARED})

    @staticmethod
    def build(b, src, dst):
        return b.create(COPY, [src, dst], [])

    def print_attrs(self, op):
        return ""

    def verify(self, op):
        if len(op.operands) != 2:
            raise VerificationError("expected operands [src, dst]", op)
        try:
            check_tcgen05_copy(op.operands[0].type, op.operands[1].type)
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None

    def interpret(self, op, frame):
        src, dst = op.operands
        progress(frame)
        smem_reads = []
        data = _read_operand(frame, op, src, smem_reads)
        Tcgen05Machine.of(frame).issue(op, frame, np.array(data), None, frame[dst], dst.type,
                                       False, smem_reads, kind=_Copy)
        return []


__all__ = ["TCGen5CopyOp", "check_tcgen05_copy", "COPY_ROWS", "COPY_COLUMNS",
           "SCALE_COPY_ROWS", "SCALE_COPY_K"]
