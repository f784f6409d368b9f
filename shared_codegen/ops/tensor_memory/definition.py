"""Tensor memory (Blackwell, sm_100a): allocation, views, and moves to and from registers.

    %acc = ttng.tmem_alloc [%init] {col_offset = 0} : !ttg.memdesc<128x64xf32, #tmem,
                                                                    #ttng.tensor_memory>
    %v   = ttng.tmem_load %acc : tensor<128x64xf32, #linear>
    ttng.tmem_store %acc, %v[, %pred]
    %b   = ttng.tmem_index %bufs, %i            (drops the leading buffer dim)
    %s   = ttng.tmem_subslice %acc {start = 32}  (columns [32, 32 + N) of a [M, N] view)
    %p   = ttng.tmem_reinterpret %acc : ...xf16, #tmem1...  (the same first column, another
                                                             type: FA's P over S)

Tensor memory (PTX ISA "Tensor Memory", in the tcgen05 chapter) is 128 lanes x 512 columns
of 32 bits per CTA. A `TensorMemoryLayout` places each element of a [M, N] buffer on a (lane, column): its
linear form maps (row, col) -> (dim0, dim1), `col` counting element-sized units (two 16-bit
elements share a 32-bit column when packed). Buffers of a [n, M, N] allocation follow each
other along the columns. Warp w may only reach lanes 32*(w%4) .. 32*(w%4)+31 (PTX ISA
9.7.16.5 "Issue Granularity"), so `tmem_load` / `tmem_store` check that their register
layout keeps every warp inside its quadrant (`get_tmem_reg_layout` gives such layouts).

Columns are planned by the `tensor_memory_allocation` stage (`allocation.py`), which records
`col_offset` on each `ttng.tmem_alloc`. Interpreter state is in `interpreter.py`, lowering in
`lowering.py`.
"""

from __future__ import annotations

import functools

import numpy as np

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import TensorMemoryType, TensorType, int1, int32
from shared_codegen.layouts import (TensorMemoryLayout, TensorMemoryScalesLayout,
                                    to_linear_layout)
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.shared_memory.definition import verify_allocation

ALLOC, LOAD, STORE, INDEX, SUBSLICE, REINTERPRET = (
    "ttng.tmem_alloc", "ttng.tmem_load", "ttng.tmem_store", "ttng.tmem_index",
    "ttng.tmem_subslice", "ttng.tmem_reinterpret")
TMEM_LANES, TMEM_COLUMNS = 128, 512
COL_OFFSET = "col_offset"  # attr the allocation stage records on ttng.tmem_alloc

READ_TMEM = MemoryEffect.READ_SHARED  # the barrier analysis treats TMEM like shared memory
WRITE_TMEM = MemoryEffect.WRITE_SHARED


# ---- the layout's cells ----------------------------------------------------------------------

def check_tmem_type(ty) -> None:
    """ValueError unless `ty` is a tensor-memory type this compiler handles."""
    if not isinstance(ty, TensorMemoryType):
        raise ValueError(f"expected a tensor memory descriptor, got {ty}")
    if isinstance(ty.layout, TensorMemoryScalesLayout):
        if len(ty.shape) != 2 or len(ty.alloc_shape) != 2:
            raise ValueError(f"scale factors in tensor memory (TensorMemoryScalesLayout) are "
                             f"[M, K // VEC] descriptors, got shape {list(ty.alloc_shape)}")
        if ty.element.bits != 8:
            raise ValueError(f"TensorMemoryScalesLayout holds 8-bit scale factors (uint8 e8m0 "
                             f"or float8e4nv), got {ty.element}")
        cell_map(ty.layout, tuple(ty.shape), ty.element.bits)
        return
    if not isinstance(ty.layout, TensorMemoryLayout):
        raise ValueError(f"tensor memory needs a TensorMemoryLayout or a "
                         f"TensorMemoryScalesLayout, got {ty.layout!r}")
    if len(ty.shape) not in (2, 3):
        raise ValueError(f"tensor memory descriptors are [M, N] or [buffers, M, N], got "
                         f"shape {list(ty.shape)}")
    if ty.element.bits not in (8, 16, 32):
        raise ValueError(f"tensor memory holds 8-, 16- or 32-bit elements, got {ty.element}")
    if ty.element.bits * ty.layout.col_stride > 32:
        raise ValueError(f"element bitwidth * col_stride must be <= 32 (one TMEM column), got "
                         f"{ty.element.bits} * {ty.layout.col_stride}")
    cell_map(ty.layout, tuple(ty.shape[-2:]), ty.element.bits)


@functools.lru_cache(maxsize=256)
def cell_map(layout: TensorMemoryLayout, shape: tuple, bits: int):
    """(lanes, units, columns): for each element of a [M, N] buffer its TMEM lane and its
    column in element-sized units (numpy [M, N] arrays), and the 32-bit columns the buffer
    spans. Where rows alias (M = 64 blocks leave lanes 16-31 of each quadrant empty) the
    lowest lane is the element's."""
    try:
        ll = layout.to_linear_layout(list(shape))
    except ValueError as exc:
        raise ValueError(f"shape {list(shape)} does not fit {layout!r}: {exc}") from None
    rows, cols = ll.in_dim_size("row"), ll.in_dim_size("col")
    if rows > TMEM_LANES:
        raise ValueError(f"{layout!r} with shape {list(shape)} needs {rows} TMEM lanes; a CTA "
                         f"has {TMEM_LANES}")
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    out = ll.apply_array({"row": r.reshape(-1), "col": c.reshape(-1)})
    flat = out["dim0"] * shape[1] + out["dim1"]
    _, first = np.unique(flat, return_index=True)
    if first.size != shape[0] * shape[1]:
        raise ValueError(f"{layout!r} does not cover a {list(shape)} buffer")
    order = np.argsort(flat[first])
    lanes = r.reshape(-1)[first[order]].reshape(shape)
    units = c.reshape(-1)[first[order]].reshape(shape)
    columns = max(1, -(-cols * bits // 32))
    return lanes, units, columns


def lane_copies(layout) -> tuple:
    """Lane offsets at which tensor memory holds each element of `layout`: once (0,) for a
    TensorMemoryLayout, once per 32-lane quadrant for MX scale factors."""
    return getattr(layout, "LANE_COPIES", (0,))


def buffer_columns(ty: TensorMemoryType) -> int:
    """32-bit columns of one [M, N] buffer of `ty`'s allocation."""
    return cell_map(ty.layout, tuple(ty.alloc_shape[-2:]), ty.element.bits)[2]


def alloc_columns(ty: TensorMemoryType) -> int:
    """32-bit columns the whole allocation of `ty` spans."""
    n = ty.alloc_shape[0] if len(ty.alloc_shape) == 3 else 1
    return n * buffer_columns(ty)


def element_cells(ty: TensorMemoryType):
    """(lanes, byte offsets within the lane) of every element of an allocation of `ty`, numpy
    arrays of its alloc shape; buffers of a [n, M, N] allocation one after another."""
    lanes, units, _ = cell_map(ty.layout, tuple(ty.alloc_shape[-2:]), ty.element.bits)
    offs = units * ty.element.itemsize
    if len(ty.alloc_shape) == 3:
        n = ty.alloc_shape[0]
        step = 4 * buffer_columns(ty)
        lanes = np.broadcast_to(lanes, (n,) + lanes.shape).copy()
        offs = offs[None] + step * np.arange(n)[:, None, None]
    return lanes, offs


def check_reg_layout(reg_layout, ty: TensorMemoryType, what: str) -> None:
    """ValueError unless every warp of `reg_layout` only holds elements on its own quadrant of
    TMEM lanes (warp w: lanes 32*(w%4) .. 32*(w%4)+31, PTX ISA 9.7.16.5)."""
    shape = tuple(ty.shape)
    if len(lane_copies(ty.layout)) == 4:  # a copy in every quadrant: any warp reaches it
        return
    ll = to_linear_layout(reg_layout, list(shape))
    lanes, _, _ = cell_map(ty.layout, shape, ty.element.bits)
    sizes = {d: ll.in_dim_size(d) for d in ("register", "lane", "warp")}
    grids = np.meshgrid(*(np.arange(sizes[d]) for d in sizes), indexing="ij")
    inputs = {d: g.reshape(-1) for d, g in zip(sizes, grids)}
    out = ll.apply_array(inputs)
    rows = lanes[out["dim0"], out["dim1"]]
    warps = inputs["warp"]
    bad = np.nonzero(rows // 32 != warps % 4)[0]
    if bad.size:
        i = int(bad[0])
        w, row = int(warps[i]), int(rows[i])
        raise ValueError(f"{what}: the register layout puts element "
                         f"[{int(out['dim0'][i])}, {int(out['dim1'][i])}] (TMEM lane {row}) in "
                         f"warp {w}, which may only access lanes {32 * (w % 4)}..."
                         f"{32 * (w % 4) + 31}; use get_tmem_reg_layout(...) for the layout")


def _verify_type(op, ty) -> None:
    try:
        check_tmem_type(ty)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None


def _check_value(op, vty, mty: TensorMemoryType, what: str) -> None:
    if not isinstance(vty, TensorType):
        raise VerificationError(f"{what} must be a register tensor, got {vty}", op)
    if tuple(vty.shape) != tuple(mty.shape) or vty.element != mty.element:
        raise VerificationError(f"{what} {vty} must have the tensor memory's shape "
                                f"{list(mty.shape)} and dtype {mty.element}", op)
    if len(mty.shape) != 2:
        raise VerificationError(f"index a [buffers, M, N] tensor memory descriptor before "
                                f"moving data ({list(mty.shape)})", op)
    if vty.layout is None:
        return
    try:
        check_reg_layout(vty.layout, mty, what)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None


# ---- ops -------------------------------------------------------------------------------------

class TmemAllocOp(OpDef):
    """`ttng.tmem_alloc [init] {col_offset}`: a tensor-memory allocation of the result type
    (`allocate_tensor_memory`), filled from the optional register tensor `init`."""

    name = ALLOC
    layout_rule = OWN_LAYOUTS
    user_name = "allocate_tensor_memory"
    memory_effects = frozenset({WRITE_TMEM})

    @staticmethod
    def build(b, ty: TensorMemoryType, init=None):
        return b.create(ALLOC, [] if init is None else [init], [ty]).result

    def print_attrs(self, op):
        return format_attrs({k: v for k, v in op.attrs.items() if k == COL_OFFSET})

    def verify(self, op):
        verify_allocation(op, _verify_type, _check_value)

    def interpret(self, op, frame):
        from shared_codegen.ops.tensor_memory.interpreter import allocate
        view = allocate(op, frame)
        if op.operands:
            view.write(frame[op.operands[0]], op.result.type, frame, op)
        return [view]


class TmemLoadOp(OpDef):
    """`ttng.tmem_load %mem`: the view's elements in registers, in the result's layout
    (`tcgen05.ld` + `tcgen05.wait::ld`, PTX ISA "tcgen05.ld")."""

    name = LOAD
    layout_rule = OWN_LAYOUTS
    user_name = "tensor_memory_descriptor.load"
    memory_effects = frozenset({READ_TMEM})

    @staticmethod
    def build(b, mem, layout):
        ty = mem.type
        return b.create(LOAD, [mem], [TensorType(tuple(ty.shape), ty.element, layout)]).result

    def verify(self, op):
        mty = op.operands[0].type
        _verify_type(op, mty)
        _check_value(op, op.result.type, mty, "tmem load result")

    def interpret(self, op, frame):
        return [frame[op.operands[0]].read(op.operands[0].type, frame, op)]


class TmemStoreOp(OpDef):
    """`ttng.tmem_store %mem, %value[, %pred]` (`tcgen05.st` + `tcgen05.wait::st`)."""

    name = STORE
    layout_rule = OWN_LAYOUTS
    user_name = "tensor_memory_descriptor.store"
    memory_effects = frozenset({WRITE_TMEM})

    @staticmethod
    def build(b, mem, value, pred=None):
        return b.create(STORE, [mem, value] + ([] if pred is None else [pred]), [])

    def verify(self, op):
        if len(op.operands) not in (2, 3):
            raise VerificationError("expected operands [mem, value, pred?]", op)
        mty = op.operands[0].type
        _verify_type(op, mty)
        _check_value(op, op.operands[1].type, mty, "tmem store value")
        if len(op.operands) == 3 and op.operands[2].type != int1:
            raise VerificationError(f"pred must be an i1 scalar, got {op.operands[2].type}", op)

    def interpret(self, op, frame):
        if len(op.operands) == 3 and not bool(frame[op.operands[2]]):
            return []
        frame[op.operands[0]].write(frame[op.operands[1]], op.operands[0].type, frame, op)
        return []


class TmemIndexOp(OpDef):
    """`ttng.tmem_index %mem, %i`: buffer `i` of a [n, M, N] view (columns i * buffer
    columns on)."""

    name = INDEX
    layout_rule = OWN_LAYOUTS
    user_name = "tensor_memory_descriptor.index"
    pure = True

    @staticmethod
    def build(b, mem, index):
        ty = mem.type
        res = TensorMemoryType(tuple(ty.shape[1:]), ty.element, ty.layout, ty.alloc_shape)
        return b.create(INDEX, [mem, index], [res]).result

    def verify(self, op):
        src, idx = op.operands
        _verify_type(op, src.type)
        if len(src.type.shape) != 3:
            raise VerificationError(f"index needs a [buffers, M, N] descriptor, got "
                                    f"{list(src.type.shape)}", op)
        if idx.type != int32:
            raise VerificationError(f"index must be an i32 scalar, got {idx.type}", op)
        want = TensorMemoryType(tuple(src.type.shape[1:]), src.type.element, src.type.layout,
                                src.type.alloc_shape)
        if op.result.type != want:
            raise VerificationError(f"result type must be {want}", op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]].index(int(frame[op.operands[1]]), frame, op)]


def subslice_type(ty: TensorMemoryType, start: int, length: int) -> TensorMemoryType:
    """The [M, length] view of columns [start, start + length) of a [M, N] view, with the
    layout's block N narrowed to fit; ValueError unless it addresses exactly the parent's
    cells, shifted by whole 32-bit columns (what the lowering adds to the address)."""
    if len(ty.shape) != 2:
        raise ValueError(f"slice needs an [M, N] descriptor, got {list(ty.shape)}")
    if isinstance(ty.layout, TensorMemoryScalesLayout):
        raise ValueError("slice of scale factors in tensor memory (TensorMemoryScalesLayout) "
                         "is not supported; allocate one descriptor per MMA")
    m, n = ty.shape
    if not (0 < length and length & (length - 1) == 0 and 0 <= start and start + length <= n
            and start % length == 0):
        raise ValueError(f"slice [{start}, {start + length}) of N={n}: the length must be a "
                         f"power of two and the start a multiple of it inside N")
    lay = ty.layout
    sub = TensorMemoryLayout((lay.block[0], min(lay.block[1], length)), lay.col_stride,
                             lay.cta_split_num, lay.two_ctas)
    res = TensorMemoryType((m, length), ty.element, sub, ty.alloc_shape)
    bits = ty.element.bits
    lanes, units, _ = cell_map(lay, (m, n), bits)
    s_lanes, s_units, _ = cell_map(sub, (m, length), bits)
    part_lanes, part_units = lanes[:, start:start + length], units[:, start:start + length]
    shift = int(part_units[0, 0] - s_units[0, 0])
    if not (np.array_equal(part_lanes, s_lanes) and np.array_equal(part_units - shift, s_units)
            and (shift * bits) % 32 == 0):
        raise ValueError(f"slice [{start}, {start + length}) of {lay!r} is not a whole-column "
                         f"shift of a {lay.block[0]}x{length} buffer")
    return res


def subslice_columns(ty: TensorMemoryType, start: int) -> int:
    """32-bit columns between a [M, N] view's start and its slice at `start`."""
    lanes, units, _ = cell_map(ty.layout, tuple(ty.shape), ty.element.bits)
    return int(units[0, start]) * ty.element.bits // 32


class TmemSubsliceOp(OpDef):
    """`ttng.tmem_subslice %mem {start, length}`: columns [start, start + length) of N."""

    name = SUBSLICE
    layout_rule = OWN_LAYOUTS
    user_name = "tensor_memory_descriptor.slice"
    pure = True

    @staticmethod
    def build(b, mem, start: int, length: int):
        res = subslice_type(mem.type, start, length)
        return b.create(SUBSLICE, [mem], [res], {"start": int(start),
                                                 "length": int(length)}).result

    def print_attrs(self, op):
        return format_attrs(op.attrs)

    def verify(self, op):
        src = op.operands[0].type
        _verify_type(op, src)
        try:
            want = subslice_type(src, op.attrs["start"], op.attrs["length"])
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if op.result.type != want:
            raise VerificationError(f"result type must be {want}", op)

    def interpret(self, op, frame):
        start, length = op.attrs["start"], op.attrs["length"]
        return [frame[op.operands[0]].columns(start, length)]


class TmemReinterpretOp(OpDef):
    """`ttng.tmem_reinterpret %mem`: the view's first column seen as another type (dtype,
    shape, layout), which must fit in the allocation's columns."""

    name = REINTERPRET
    layout_rule = OWN_LAYOUTS
    user_name = "tensor_memory_descriptor._reinterpret"
    pure = True

    @staticmethod
    def build(b, mem, ty: TensorMemoryType):
        return b.create(REINTERPRET, [mem], [ty]).result

    def verify(self, op):
        src, res = op.operands[0].type, op.result.type
        _verify_type(op, src)
        _verify_type(op, res)
        if tuple(res.alloc_shape) != tuple(res.shape):
            raise VerificationError("a reinterpreted view is its own allocation shape", op)
        if alloc_columns(res) > alloc_columns(src):
            raise VerificationError(f"{res} spans {alloc_columns(res)} columns of tensor "
                                    f"memory, more than the {alloc_columns(src)} of {src}", op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]].reinterpret(op.result.type)]


__all__ = ["TmemAllocOp", "TmemLoadOp", "TmemStoreOp", "TmemIndexOp", "TmemSubsliceOp",
           "TmemReinterpretOp",
           "check_tmem_type", "check_reg_layout", "cell_map", "element_cells",
           "alloc_columns", "buffer_columns", "lane_copies", "subslice_type", "subslice_columns",
           "TMEM_LANES", "TMEM_COLUMNS", "COL_OFFSET"]
