"""TMA gather4 / scatter4 (sm_100a): rows picked by a tensor of row offsets, Triton 3.6's
`ttng.async_tma_gather` / `ttng.async_tma_scatter` (Gluon's Blackwell
`tma.async_gather` / `tma.async_scatter`).

    ttng.async_tma_gather %desc, %x_offsets, %y_offset, %bar, %smem[, %pred]
    ttng.async_tma_scatter %desc, %x_offsets, %y_offset, %smem

`%desc` is a rank-2 descriptor whose block is one row, [1, M]; `%x_offsets` an N-element i32
tensor of row indices; `%smem` an [N, M] view in the descriptor's NVMMA layout. A gather
copies global row `x_offsets[i]`, columns `[y_offset, y_offset + M)`, into row i of `%smem`
(out-of-bounds elements read zero, or NaN for padding="nan") and completes N x M elements'
bytes on `%bar`; a scatter writes row i of `%smem` to that global row (clipped), one bulk
group like a TMA store. N is a multiple of 4 (each message moves four rows) and a row holds
at least 32 bytes (Triton's rule).

Interpreter: the load and store machinery of `definition.py` (landing, races, store groups)
over the gathered addresses. Lowering (`gather_scatter_lowering.py`): thread 0 issues one
`cp.async.bulk.tensor.2d...tile::gather4` / `tile::scatter4` message per four rows and box
column chunk (PTX ISA 9.7.9.27, PTX 8.6, sm_100a); the frontend hands it the offsets
replicated in every thread's registers.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError
from shared_codegen.ir.types import SharedMemoryType, TensorDescriptorType, TensorType, int1, int32
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.mbarrier.definition import check_barrier
from shared_codegen.ops.shared_memory.definition import offset_map
from shared_codegen.ops.tma.definition import _Engine, issue_load, issue_store

GATHER, SCATTER = "ttng.async_tma_gather", "ttng.async_tma_scatter"
# gather4 / scatter4 with a .shared::cluster / .shared::cta operand need PTX ISA 8.6.
GATHER_PTX_VERSION = (8, 6)


def check_gather(desc_ty, offsets_ty, smem_ty, what: str) -> None:
    """ValueError, in the user's terms, unless these types make a gather4 / scatter4."""
    if not isinstance(desc_ty, TensorDescriptorType):
        raise ValueError(f"tensor_desc must be a tensor descriptor, got {desc_ty}")
    block = list(desc_ty.block_shape)
    if len(block) != 2 or block[0] != 1:
        raise ValueError(f"the descriptor's block must be one row, [1, M], got {block}")
    if not isinstance(offsets_ty, TensorType) or len(offsets_ty.shape) != 1 or \
            offsets_ty.element != int32:
        raise ValueError(f"x_offsets must be a 1D int32 tensor, got {offsets_ty}")
    if not isinstance(smem_ty, SharedMemoryType) or len(smem_ty.shape) != 2:
        raise ValueError(f"{what} must be a 2D shared memory descriptor, got {smem_ty}")
    rows, cols = smem_ty.shape
    if rows != offsets_ty.shape[0]:
        raise ValueError(f"{what} must have as many rows as x_offsets ({offsets_ty.shape[0]}), "
                         f"got {list(smem_ty.shape)}")
    if rows % 4:
        raise ValueError(f"{what} has {rows} rows; TMA gather4/scatter4 moves rows in groups "
                         f"of 4")
    if cols != block[1] or smem_ty.element != desc_ty.element:
        raise ValueError(f"{what} is {list(smem_ty.shape)} x {smem_ty.element!r} but the "
                         f"descriptor's rows are {block[1]} x {desc_ty.element!r}")
    if cols * desc_ty.element.bits < 256:
        raise ValueError(f"{what} must have at least {256 // desc_ty.element.bits} columns for "
                         f"{desc_ty.element!r}, got {cols}")
    want = SharedMemoryType((rows, cols), desc_ty.element, desc_ty.layout, (rows, cols))
    if offset_map(smem_ty).dims != offset_map(want).dims:
        raise ValueError(f"{what} has layout {smem_ty.layout!r}, which places elements "
                         f"differently from the descriptor's {desc_ty.layout!r}")


def _verify_common(op, desc, offsets, y_offset, smem, what):
    try:
        check_gather(desc.type, offsets.type, smem.type, what)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None
    if isinstance(y_offset.type, TensorType) or y_offset.type != int32:
        raise VerificationError(f"y_offset must be an i32 scalar, got {y_offset.type}", op)


def _rows(op, frame, desc, offsets, y_offset):
    """(addresses, in-bounds mask) of the gathered [N, M] elements."""
    tmap = frame[desc]
    rows = np.asarray(frame[offsets], dtype=np.int64).reshape(-1)
    cols = int(frame[y_offset]) + np.arange(desc.type.block_shape[1], dtype=np.int64)
    addr = tmap.address + rows[:, None] * tmap.strides[0] + cols[None, :] * tmap.strides[1]
    inside = ((rows >= 0) & (rows < tmap.shape[0]))[:, None] & \
        ((cols >= 0) & (cols < tmap.shape[1]))[None, :]
    return addr, inside


class AsyncTMAGatherOp(OpDef):
    """`ttng.async_tma_gather [desc, x_offsets, y_offset, bar, smem, pred?]`."""

    name = GATHER
    layout_rule = OWN_LAYOUTS
    user_name = "tma.async_gather"
    memory_effects = frozenset({MemoryEffect.READ_GLOBAL, MemoryEffect.WRITE_SHARED})

    @staticmethod
    def build(b, desc, x_offsets, y_offset, bar, smem, pred=None):
        _require_ptx(b)
        operands = [desc, x_offsets, y_offset, bar, smem] + ([pred] if pred is not None else [])
        return b.create(GATHER, operands, [], {"has_pred": pred is not None})

    @staticmethod
    def parts(op):
        ops = op.operands
        return ops[0], ops[1], ops[2], ops[3], ops[4], (ops[5] if op.attrs.get("has_pred")
                                                          else None)

    def print_attrs(self, op):
        return ""

    def verify(self, op):
        if len(op.operands) != 5 + bool(op.attrs.get("has_pred")):
            raise VerificationError("expected operands [desc, x_offsets, y_offset, bar, smem, "
                                    "pred?]", op)
        desc, offsets, y_offset, bar, smem, pred = self.parts(op)
        _verify_common(op, desc, offsets, y_offset, smem, "result")
        try:
            check_barrier(bar.type)
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if pred is not None and pred.type != int1:
            raise VerificationError(f"pred must be an i1 scalar, got {pred.type}", op)

    def interpret(self, op, frame):
        desc, offsets, y_offset, bar, smem, pred = self.parts(op)
        _Engine.of(frame).progress()
        if pred is not None and not bool(frame[pred]):
            return []
        addr, inside = _rows(op, frame, desc, offsets, y_offset)
        issue_load(op, frame, desc.type, frame[desc], addr, inside, smem, bar)
        return []


class AsyncTMAScatterOp(OpDef):
    """`ttng.async_tma_scatter [desc, x_offsets, y_offset, smem]`."""

    name = SCATTER
    layout_rule = OWN_LAYOUTS
    user_name = "tma.async_scatter"
    memory_effects = frozenset({MemoryEffect.READ_SHARED, MemoryEffect.WRITE_GLOBAL})

    @staticmethod
    def build(b, desc, x_offsets, y_offset, smem):
        _require_ptx(b)
        return b.create(SCATTER, [desc, x_offsets, y_offset, smem], [])

    def verify(self, op):
        if len(op.operands) != 4:
            raise VerificationError("expected operands [desc, x_offsets, y_offset, smem]", op)
        _verify_common(op, *op.operands, "src")

    def interpret(self, op, frame):
        desc, offsets, y_offset, smem = op.operands
        _Engine.of(frame).progress()
        addr, inside = _rows(op, frame, desc, offsets, y_offset)
        issue_store(op, frame, desc.type, addr, inside, smem)
        return []


def _require_ptx(b) -> None:
    module = getattr(b, "module", None)
    if module is not None:
        have = tuple(module.attrs.get("min_ptx_version") or (0, 0))
        module.attrs["min_ptx_version"] = max(have, GATHER_PTX_VERSION)


__all__ = ["AsyncTMAGatherOp", "AsyncTMAScatterOp", "check_gather", "GATHER", "SCATTER"]
