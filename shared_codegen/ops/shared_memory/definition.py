"""Shared-memory descriptors: allocate, load, store and view (TTG's `local_*` / `memdesc_*`).

    %buf = ttg.local_alloc [%init] : !ttg.memdesc<2x64x64xfp16, #shared>
    %a   = ttg.memdesc_index %buf, %i : !ttg.memdesc<64x64xfp16, #shared>
    %t   = ttg.memdesc_trans %a {order = [1, 0]} : !ttg.memdesc<64x64xfp16, #shared1>
    %x   = ttg.local_load %t : tensor<64x64xfp16, #blocked>
    ttg.local_store %x, %a

Where an element lives
----------------------
A shared layout maps `offset` (element index inside the allocation) to tensor coordinates.
Its inverse gives, for every coordinate bit, the offset it contributes, and the offset of
an element is the XOR of its set bits' contributions: swizzles are part of the map, not a
special case. `offset_map(ty)` computes that map for any descriptor type from `(layout,
alloc_shape)` alone:

- The layout covers the trailing `layout.rank` dims of the allocation (its *tile*). Leading
  dims outside it, and leading non-power-of-two dims inside it, are *buffers*: whole tiles
  one after another (`gl.allocate_shared_memory(f16, [3, 64, 64], rank-2 layout)` is three
  64x64 tiles). A buffer dim contributes `index * stride`, a tile dim XORs bits.
- A view's dims are the allocation's trailing dims. `memdesc_index` and `memdesc_subslice`
  move the view's base (runtime: `base + index * stride`); a subslice of a tile dim keeps
  the low coordinate bits and XORs the offset of its start, which lowering folds into the
  base when no kept bit can touch it (row slices) and carries as a runtime XOR otherwise
  (column slices inside a swizzle atom). `memdesc_trans` / `memdesc_reshape` give the
  result a layout whose linear form is the permuted / reshaped one (a named family when one
  matches, else a `SharedLinearLayout`), so the type stays self-describing.
- `memdesc_reinterpret` sees the same bytes with another dtype, shape and layout; it needs a
  view that covers whole contiguous bytes (an allocation or an index of one).

The interpreter executes these maps on numpy offset arrays (`ops/shared_memory/interpreter.py`),
lowering on registers (`ops/shared_memory/lowering.py`); allocation offsets come from
`allocation.py` beside this file.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import ScalarType, SharedMemoryType, TensorType
from shared_codegen.layouts.relations import OWN_LAYOUTS

READ_SHARED = MemoryEffect.READ_SHARED
WRITE_SHARED = MemoryEffect.WRITE_SHARED

ALLOC, LOAD, STORE, DEALLOC = "ttg.local_alloc", "ttg.local_load", "ttg.local_store", \
    "ttg.local_dealloc"
INDEX, SUBSLICE, TRANS, RESHAPE, REINTERPRET = ("ttg.memdesc_index", "ttg.memdesc_subslice",
                                                "ttg.memdesc_trans", "ttg.memdesc_reshape",
                                                "ttg.memdesc_reinterpret")
VIEW_OPS = (INDEX, SUBSLICE, TRANS, RESHAPE, REINTERPRET)


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _log2(n: int) -> int:
    return int(n).bit_length() - 1


# ---- layouts ---------------------------------------------------------------------------------

def layout_rank(layout) -> int:
    from shared_codegen.layouts import LinearLayout
    if isinstance(layout, LinearLayout):
        return len(layout.out_dims)
    return int(layout.rank)


def alloc_alignment(layout) -> int:
    """Byte alignment of an allocation with this layout. NVMMA swizzles XOR address bits up
    to 1024 bytes (8 rows of 128 bytes), and TMA / wgmma apply them to *physical* addresses,
    so a swizzled tile must start on a 1024-byte boundary to mean what its layout says."""
    from shared_codegen.layouts import NVMMASharedLayout, SharedLinearLayout
    if isinstance(layout, NVMMASharedLayout):
        return 1024 if layout.swizzle_byte_width else 128
    if isinstance(layout, SharedLinearLayout):
        return max(16, int(layout.alignment))
    return 16


def is_shared_layout(layout) -> bool:
    from shared_codegen.layouts import LinearLayout, SharedLayout
    if isinstance(layout, SharedLayout):
        return True
    return isinstance(layout, LinearLayout) and layout.in_dims[:1] == ["offset"]


@dataclass(frozen=True)
class DimMap:
    """How one dim's coordinate becomes an element offset: `bits[j]` is the offset XORed in
    for coordinate bit j (a tile dim), or `stride` per step (a buffer dim)."""

    size: int
    bits: Optional[Tuple[int, ...]] = None
    stride: Optional[int] = None

    @property
    def mask(self) -> int:
        m = 0
        for v in self.bits or ():
            m |= v
        return m


@dataclass(frozen=True)
class OffsetMap:
    """Element offsets of a view, relative to the view's base: XOR of the tile dims' bits plus
    the buffer dims' `coord * stride`. `alloc_elems` is the allocation's size in elements;
    `slice_mask` the offset bits a subslice start of this view type can XOR in."""

    dims: Tuple[DimMap, ...]
    alloc_elems: int
    tile_elems: int
    slice_mask: int
    # PaddedSharedLayout: (log2 interval, log2 padding) pairs applied to the tile part of an
    # offset (`pad`); the tile dims' bits are then single offset bits, so the padded
    # address is a sum of per-bit terms.
    padding: Tuple[Tuple[int, int], ...] = ()

    def pad(self, offset):
        """The stored offset of linear tile offset `offset` (an int or an int array)."""
        out = offset
        for shift, pad in self.padding:
            out = out + ((offset >> shift) << pad)
        return out

    @property
    def view_mask(self) -> int:
        m = 0
        for d in self.dims:
            m |= d.mask
        return m

    @property
    def foldable(self) -> bool:
        """A subslice start XORs bits no element of the view sets: XOR == ADD, so lowering
        adds it to the base pointer."""
        return not (self.slice_mask & self.view_mask)

    def linear_bits(self):
        """Per dim the offset of each coordinate bit, buffer dims included when their stride
        is a power of two (then `coord * stride` is linear too); None if one is not."""
        out = []
        for d in self.dims:
            if d.bits is not None:
                out.append(d.bits)
            elif _pow2(d.stride) and _pow2(d.size):
                out.append(tuple(d.stride << j for j in range(_log2(d.size))))
            else:
                return None
        return out

    def element_offsets(self) -> np.ndarray:
        """The offset (in elements) of every element of the view, shaped like the view."""
        rank = len(self.dims)
        out = np.zeros([d.size for d in self.dims], dtype=np.int64)
        for i, d in enumerate(self.dims):
            c = np.arange(d.size, dtype=np.int64)
            if d.bits is not None:
                part = np.zeros(d.size, dtype=np.int64)
                for j, v in enumerate(d.bits):
                    part ^= ((c >> j) & 1) * v
                shape = [1] * rank
                shape[i] = d.size
                out ^= part.reshape(shape)
        if self.padding:
            out = self.pad(out)
        for i, d in enumerate(self.dims):
            if d.bits is None:
                shape = [1] * rank
                shape[i] = d.size
                out += (np.arange(d.size, dtype=np.int64) * d.stride).reshape(shape)
        return out


def _tile_split(layout, alloc_shape):
    """(buffer alloc dims, the layout's dims as alloc dims (None for padding), shape the
    layout is evaluated on)."""
    rank, a = layout_rank(layout), len(alloc_shape)
    pad = max(0, rank - a)
    full = [1] * pad + list(alloc_shape)
    nbuf = max(0, a - rank)
    buffers = list(range(nbuf))
    eval_shape = full[len(full) - rank:]
    # Leading non-power-of-two dims inside the layout (3 pipeline stages) are buffers too.
    for i in range(rank):
        if _pow2(eval_shape[i]):
            break
        eval_shape[i] = 1
        buffers.append(nbuf + i - pad)
    alloc_of = [nbuf + i - pad if nbuf + i - pad >= 0 else None for i in range(rank)]
    return buffers, alloc_of, eval_shape


@functools.lru_cache(maxsize=1024)
def _alloc_maps(layout, alloc_shape: tuple):
    """Per alloc dim a DimMap over the whole allocation, and (alloc elems, tile elems)."""
    from shared_codegen.layouts import to_linear_layout
    buffers, alloc_of, eval_shape = _tile_split(layout, alloc_shape)
    ll = to_linear_layout(layout, eval_shape)
    for vec in ll.bases.get("block", []):
        if any(vec):
            raise ValueError(f"{layout!r} spreads the tile over several CTAs; multi-CTA shared "
                             "memory is not supported")
    names = [f"dim{i}" for i in range(len(eval_shape))]
    if [ll.out_dim_size(n) for n in names] != list(eval_shape):
        raise ValueError(f"{layout!r} over {list(eval_shape)} covers "
                         f"{[ll.out_dim_size(n) for n in names]}")
    offsets = ll.sublayout(["offset"], names)
    if not offsets.is_surjective():
        raise ValueError(f"{layout!r} leaves elements of a {list(eval_shape)} tile without a "
                         "shared-memory offset")
    inverse = offsets.pseudo_invert()
    tile_elems = offsets.in_dim_size("offset")
    padding = _padding_of(layout)
    if padding:  # the tile's footprint: the last element's stored offset, plus one
        tile_elems = OffsetMap((), 0, 0, 0, padding).pad(tile_elems - 1) + 1
    maps = [None] * len(alloc_shape)
    for i, name in enumerate(names):
        if alloc_of[i] is None or alloc_of[i] in buffers:
            continue
        bits = tuple(inverse.apply({n: (1 << j if n == name else 0) for n in names})["offset"]
                     for j in range(_log2(eval_shape[i])))
        maps[alloc_of[i]] = DimMap(alloc_shape[alloc_of[i]], bits=bits)
    stride = tile_elems
    for d in sorted(buffers, reverse=True):
        maps[d] = DimMap(alloc_shape[d], stride=stride)
        stride *= alloc_shape[d]
    return tuple(maps), stride, tile_elems


def _padding_of(layout) -> tuple:
    from shared_codegen.layouts import PaddedSharedLayout
    return layout.padding_shifts if isinstance(layout, PaddedSharedLayout) else ()


def offset_map(ty: SharedMemoryType) -> OffsetMap:
    """The element -> offset map of a descriptor type (see the module docstring)."""
    maps, alloc_elems, tile_elems = _alloc_maps(ty.layout, tuple(ty.alloc_shape))
    first = len(maps) - len(ty.shape)
    dims, slice_mask = [], 0
    for size, m in zip(ty.shape, maps[first:]):
        if m.bits is None:
            dims.append(DimMap(size, stride=m.stride))
            continue
        keep = _log2(size)
        dims.append(DimMap(size, bits=m.bits[:keep]))
        for v in m.bits[keep:]:
            slice_mask |= v
    return OffsetMap(tuple(dims), alloc_elems, tile_elems, slice_mask, _padding_of(ty.layout))


def alloc_bytes(ty: SharedMemoryType) -> int:
    return offset_map(ty).alloc_elems * ty.element.itemsize


def is_whole(ty: SharedMemoryType) -> bool:
    """The view is a run of whole trailing dims of its allocation: contiguous bytes."""
    return tuple(ty.shape) == tuple(ty.alloc_shape[len(ty.alloc_shape) - len(ty.shape):])


# ---- derived layouts (memdesc_trans / memdesc_reshape) -----------------------------------

def _tile_bases(ty: SharedMemoryType):
    """(number of leading buffer view dims, the offset -> coordinate bases over the view's
    tile dims)."""
    from shared_codegen.layouts import to_linear_layout
    if _padding_of(ty.layout):
        raise ValueError("permuting or reshaping a PaddedSharedLayout view is not supported "
                         "yet")
    buffers, alloc_of, eval_shape = _tile_split(ty.layout, tuple(ty.alloc_shape))
    first = len(ty.alloc_shape) - len(ty.shape)
    view_buffers = [d - first for d in buffers if d >= first]
    if view_buffers != list(range(len(view_buffers))):
        raise ValueError("buffer dims must lead the view")
    ll = to_linear_layout(ty.layout, eval_shape)
    keep = [i for i, d in enumerate(alloc_of) if d is not None and d not in buffers]
    bases = [tuple(v[i] for i in keep) for v in ll.bases["offset"]]
    return len(view_buffers), bases


def _derive_layout(ty: SharedMemoryType, bases, tile_shape, candidates):
    """A named layout among `candidates` whose linear form has these offset bases over
    `tile_shape`, else a SharedLinearLayout with them."""
    from shared_codegen.layouts import SharedLinearLayout, to_linear_layout
    bases = [tuple(int(c) for c in v) for v in bases]
    for cand in candidates:
        try:
            if [tuple(v) for v in to_linear_layout(cand, list(tile_shape)).bases["offset"]] \
                    == bases:
                return cand
        except (ValueError, TypeError):
            continue
    return SharedLinearLayout(offset_bases=tuple(bases), alignment=alloc_alignment(ty.layout))


def trans_result(ty: SharedMemoryType, order) -> SharedMemoryType:
    from shared_codegen.layouts import NVMMASharedLayout, SwizzledSharedLayout
    nbuf, bases = _tile_bases(ty)
    if list(order[:nbuf]) != list(range(nbuf)):
        raise ValueError(f"order {list(order)} moves a buffer dim (the leading {nbuf} dims "
                         "lie outside the shared layout); index them first")
    tile_order = [o - nbuf for o in order[nbuf:]]
    new_bases = [tuple(v[i] for i in tile_order) for v in bases]
    prefix = list(ty.alloc_shape[:len(ty.alloc_shape) - len(ty.shape)])
    alloc_view = list(ty.alloc_shape[len(prefix):])
    new_alloc = prefix + [alloc_view[i] for i in order]
    tile_shape = new_alloc[len(new_alloc) - len(tile_order):]
    lay, cands = ty.layout, []
    if isinstance(lay, NVMMASharedLayout) and len(tile_order) == 2 and tile_order == [1, 0]:
        cands.append(dataclasses.replace(lay, transposed=not lay.transposed, rank=2))
    if isinstance(lay, SwizzledSharedLayout) and len(lay.order) == len(tile_order):
        cands.append(dataclasses.replace(lay, order=tuple(tile_order.index(d)
                                                          for d in lay.order)))
    layout = _derive_layout(ty, new_bases, tile_shape, cands)
    return SharedMemoryType(tuple(ty.shape[i] for i in order), ty.element, layout,
                            tuple(new_alloc))


def reshape_result(ty: SharedMemoryType, shape) -> SharedMemoryType:
    from shared_codegen.layouts import NVMMASharedLayout
    nbuf, bases = _tile_bases(ty)
    shape = tuple(int(s) for s in shape)
    if tuple(shape[:nbuf]) != tuple(ty.shape[:nbuf]):
        raise ValueError(f"the leading {nbuf} buffer dims {list(ty.shape[:nbuf])} must stay")
    old_tile, new_tile = list(ty.shape[nbuf:]), list(shape[nbuf:])
    if not all(_pow2(s) for s in new_tile):
        raise ValueError(f"reshaped tile dims must be powers of two, got {new_tile}")

    from shared_codegen.layouts.linear_layout import reshape_coords

    new_bases = [reshape_coords(v, old_tile, new_tile) for v in bases]
    cands = []
    if isinstance(ty.layout, NVMMASharedLayout) and not ty.layout.cga_layout:
        cands.append(dataclasses.replace(ty.layout, rank=len(new_tile)))
    layout = _derive_layout(ty, new_bases, new_tile, cands)
    prefix = tuple(ty.alloc_shape[:len(ty.alloc_shape) - len(ty.shape)])
    return SharedMemoryType(shape, ty.element, layout, prefix + shape)


# ---- ops -------------------------------------------------------------------------------------

def _memdesc(op, i=0) -> SharedMemoryType:
    ty = op.operands[i].type
    if not isinstance(ty, SharedMemoryType):
        raise VerificationError(f"operand #{i} must be a shared-memory descriptor, got {ty}", op)
    return ty


def _check_type(op, ty: SharedMemoryType, what="result"):
    if not isinstance(ty, SharedMemoryType):
        raise VerificationError(f"{what} must be a shared-memory descriptor, got {ty}", op)
    if not isinstance(ty.element, ScalarType):
        raise VerificationError(f"element type must be a scalar dtype, got {ty.element}", op)
    if not is_shared_layout(ty.layout):
        raise VerificationError(f"layout must be a shared layout (NVMMASharedLayout, "
                                f"SwizzledSharedLayout, SharedLinearLayout, "
                                f"PaddedSharedLayout), got "
                                f"{ty.layout!r}", op)
    if len(ty.alloc_shape) < len(ty.shape) or any(
            s > a for s, a in zip(ty.shape, ty.alloc_shape[len(ty.alloc_shape) - len(ty.shape):])):
        raise VerificationError(f"view shape {list(ty.shape)} does not fit in allocation "
                                f"shape {list(ty.alloc_shape)}", op)
    try:
        m = offset_map(ty)
    except ValueError as exc:
        raise VerificationError(f"{list(ty.shape)} x {ty.element} with {ty.layout!r}: {exc}",
                                op) from None
    for d, size in zip(m.dims, ty.shape):
        if d.bits is not None and not _pow2(size):
            raise VerificationError(f"dims inside the shared layout must be powers of two, got "
                                    f"shape {list(ty.shape)}", op)
    return m


class LocalAllocOp(OpDef):
    """`ttg.local_alloc [init]`: a new shared-memory allocation of the result type, filled
    from the optional register tensor `init` (`gl.allocate_shared_memory(..., value=x)`)."""

    name = ALLOC
    layout_rule = OWN_LAYOUTS
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, ty: SharedMemoryType, init=None):
        return b.create(ALLOC, [] if init is None else [init], [ty]).result

    def verify(self, op):
        verify_allocation(op, _check_type, _check_value)

    def interpret(self, op, frame):
        from shared_codegen.ops.shared_memory.interpreter import allocate
        view = allocate(op, frame)
        if op.operands:
            view.store(frame[op.operands[0]], frame, op)
        return [view]


def verify_allocation(op, check_type, check_value) -> None:
    """An allocation (of shared or tensor memory) is a whole view of itself, and its optional
    initial value matches it; `check_type` / `check_value` are the memory's own checks."""
    ty = op.result.type
    check_type(op, ty)
    if tuple(ty.shape) != tuple(ty.alloc_shape):
        raise VerificationError(f"an allocation's shape {list(ty.shape)} must equal its "
                                f"alloc_shape {list(ty.alloc_shape)}", op)
    if op.operands:
        check_value(op, op.operands[0].type, ty, "initial value")


def _check_value(op, vty, mty: SharedMemoryType, what: str):
    if not isinstance(vty, TensorType):
        raise VerificationError(f"{what} must be a register tensor, got {vty}", op)
    if tuple(vty.shape) != tuple(mty.shape):
        raise VerificationError(f"{what} shape {list(vty.shape)} and shared memory shape "
                                f"{list(mty.shape)} must match", op)
    if vty.element != mty.element:
        raise VerificationError(f"{what} dtype {vty.element!r} and shared memory dtype "
                                f"{mty.element!r} must match", op)


class LocalLoadOp(OpDef):
    """`ttg.local_load %mem`: the view's elements as a register tensor in the result's
    (distributed) layout."""

    name = LOAD
    layout_rule = OWN_LAYOUTS
    memory_effects = frozenset({READ_SHARED})

    @staticmethod
    def build(b, mem, layout):
        ty = mem.type
        return b.create(LOAD, [mem], [TensorType(tuple(ty.shape), ty.element, layout)]).result

    def verify(self, op):
        mty = _memdesc(op)
        _check_value(op, op.result.type, mty, "result")
        # None: tile IR before layout assignment, which picks the register layout.
        if is_shared_layout(op.result.type.layout):
            raise VerificationError(f"local_load needs a distributed result layout, got "
                                    f"{op.result.type.layout!r}", op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]].load(frame, op)]


class LocalStoreOp(OpDef):
    """`ttg.local_store %value, %mem`: write a register tensor into the view."""

    name = STORE
    layout_rule = OWN_LAYOUTS
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, value, mem):
        return b.create(STORE, [value, mem], [])

    def verify(self, op):
        _check_value(op, op.operands[0].type, _memdesc(op, 1), "stored value")

    def interpret(self, op, frame):
        frame[op.operands[1]].store(frame[op.operands[0]], frame, op)
        return []


class LocalDeallocOp(OpDef):
    """`ttg.local_dealloc %mem`: the allocation is dead from here on (optional: liveness
    already ends at the last use). Accessing it afterwards is an error in the interpreter."""

    name = DEALLOC
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, mem):
        return b.create(DEALLOC, [mem], [])

    def verify(self, op):
        _memdesc(op)

    def interpret(self, op, frame):
        frame[op.operands[0]].buffer.free(op)
        return []

    def lower(self, op, ctx):
        return None


class MemDescIndexOp(OpDef):
    """`ttg.memdesc_index %mem, %i`: the view `mem[i]` (dim 0 dropped), `i` an i32."""

    name = INDEX
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, mem, index):
        ty = mem.type
        res = SharedMemoryType(tuple(ty.shape[1:]), ty.element, ty.layout,
                               tuple(ty.alloc_shape[len(ty.alloc_shape) - len(ty.shape) + 1:]))
        return b.create(INDEX, [mem, index], [res]).result

    def verify(self, op):
        src, res = _memdesc(op), op.result.type
        if len(src.shape) < 2:
            raise VerificationError(f"memdesc_index needs a view of rank >= 2, got "
                                    f"{list(src.shape)}", op)
        idx = op.operands[1].type
        if isinstance(idx, TensorType) or not getattr(idx, "is_int", lambda: False)() or \
                idx.bits != 32:
            raise VerificationError(f"index must be an i32 scalar, got {idx}", op)
        m = _check_type(op, src, "operand")
        if tuple(res.shape) != tuple(src.shape[1:]) or res.element != src.element:
            raise VerificationError(f"result must be {list(src.shape[1:])} x {src.element}, "
                                    f"got {res}", op)
        _check_type(op, res)
        if index_stride(m) is None:
            raise VerificationError(
                "dim 0 of this layout does not hold whole tiles (its offsets "
                f"{list(m.dims[0].bits)} interleave with the other dims'); memdesc_index "
                "needs the indexed dim outermost", op)
        want = SharedMemoryType(tuple(src.shape[1:]), src.element, src.layout,
                                tuple(src.alloc_shape[len(src.alloc_shape) - len(src.shape) + 1:]))
        if res != want or offset_map(res).dims != m.dims[1:]:
            raise VerificationError(f"result type {res} does not describe the indexed view "
                                    f"(expected {want})", op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]].index(int(frame[op.operands[1]]), frame, op)]


def index_stride(m: OffsetMap) -> Optional[int]:
    """Elements between consecutive indices of dim 0, when the index is plain address
    arithmetic (a buffer dim, or a tile dim whose bits sit above every other dim's)."""
    d0 = m.dims[0]
    if d0.bits is None:
        return d0.stride
    if m.padding:  # a padded tile dim: its rows are not evenly spaced in general
        return None
    if not d0.bits:
        return m.tile_elems
    s = d0.bits[0]
    if any(v != s << j for j, v in enumerate(d0.bits)):
        return None
    rest = 0
    for d in m.dims[1:]:
        rest |= d.mask
    return s if rest < s else None


class MemDescSubsliceOp(OpDef):
    """`ttg.memdesc_subslice %mem {offsets}`: the view `mem[o0:o0+s0, o1:o1+s1, ...]`, where
    the result's shape gives the sizes. Inside the layout, sizes must be powers of two and
    offsets multiples of them (so a slice is a fixed set of coordinate bits)."""

    name = SUBSLICE
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, mem, offsets, shape):
        ty = mem.type
        res = SharedMemoryType(tuple(int(s) for s in shape), ty.element, ty.layout,
                               tuple(ty.alloc_shape))
        return b.create(SUBSLICE, [mem], [res],
                        {"offsets": tuple(int(o) for o in offsets)}).result

    def verify(self, op):
        src, res = _memdesc(op), op.result.type
        m = _check_type(op, src, "operand")
        _check_type(op, res)
        offs = op.attrs["offsets"]
        if len(offs) != len(src.shape) or len(res.shape) != len(src.shape):
            raise VerificationError(f"offsets {list(offs)} and result shape {list(res.shape)} "
                                    f"need one entry per dim of {list(src.shape)}", op)
        if res.alloc_shape != src.alloc_shape or res.layout != src.layout or \
                res.element != src.element:
            raise VerificationError("a subslice keeps the element type, layout and alloc "
                                    "shape", op)
        for d, (o, s, full, dm) in enumerate(zip(offs, res.shape, src.shape, m.dims)):
            if o < 0 or o + s > full:
                raise VerificationError(f"dim {d}: [{o}, {o + s}) is outside [0, {full})", op)
            if dm.bits is not None and o % s:
                raise VerificationError(f"dim {d}: offset {o} must be a multiple of the slice "
                                        f"size {s} (the dim is inside the shared layout)", op)

    def print_attrs(self, op):
        return format_attrs({"offsets": list(op.attrs["offsets"])})

    def interpret(self, op, frame):
        return [frame[op.operands[0]].subslice(op.attrs["offsets"], op.result.type.shape)]


def subslice_offset(src: SharedMemoryType, offsets) -> Tuple[int, int]:
    """(elements added by buffer dims, offset XORed in by tile dims) of a subslice start.
    The start bits of a tile dim are above the view's kept bits, so they come from the
    allocation's map, not the view's."""
    maps = _alloc_maps(src.layout, tuple(src.alloc_shape))[0]
    first = len(maps) - len(src.shape)
    add, xor = 0, 0
    for o, m in zip(offsets, maps[first:]):
        if m.bits is None:
            add += o * m.stride
            continue
        for j, v in enumerate(m.bits):
            if o >> j & 1:
                xor ^= v
    return add, xor


class MemDescTransOp(OpDef):
    """`ttg.memdesc_trans %mem {order}`: the same elements with dims permuted (result dim i
    is operand dim order[i]); the result's layout is the permuted one."""

    name = TRANS
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, mem, order):
        res = trans_result(mem.type, tuple(int(o) for o in order))
        return b.create(TRANS, [mem], [res], {"order": tuple(int(o) for o in order)}).result

    def verify(self, op):
        src, order = _memdesc(op), tuple(op.attrs["order"])
        if sorted(order) != list(range(len(src.shape))):
            raise VerificationError(f"order {list(order)} is not a permutation of the "
                                    f"{len(src.shape)} dims", op)
        _check_type(op, op.result.type)
        try:
            want = trans_result(src, order)
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if offset_map(want) != offset_map(op.result.type) or want.shape != op.result.type.shape:
            raise VerificationError(f"result type {op.result.type} is not the permuted view "
                                    f"{want}", op)

    def print_attrs(self, op):
        return format_attrs({"order": list(op.attrs["order"])})

    def interpret(self, op, frame):
        return [frame[op.operands[0]].permute(op.attrs["order"])]

    def lower(self, op, ctx):
        return [ctx.get(op.operands[0])]


class MemDescReshapeOp(OpDef):
    """`ttg.memdesc_reshape %mem`: the same elements in row-major order with another shape;
    the view must cover its allocation's trailing dims whole."""

    name = RESHAPE
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, mem, shape):
        return b.create(RESHAPE, [mem], [reshape_result(mem.type, shape)]).result

    def verify(self, op):
        src, res = _memdesc(op), op.result.type
        _check_type(op, res)
        if src.numel != res.numel:
            raise VerificationError(f"reshape {list(src.shape)} -> {list(res.shape)} changes "
                                    "the number of elements", op)
        if not is_whole(src):
            raise VerificationError(f"cannot reshape a subslice ({list(src.shape)} of "
                                    f"{list(src.alloc_shape)})", op)
        try:
            want = reshape_result(src, res.shape)
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if offset_map(want) != offset_map(res):
            raise VerificationError(f"result type {res} is not the reshaped view {want}", op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]].reshape(op.result.type.shape)]

    def lower(self, op, ctx):
        return [ctx.get(op.operands[0])]


def _root_allocation(value):
    """The type of the `local_alloc` a view comes from through view ops, or None (a block
    argument, a partition's capture)."""
    while value.defining_op is not None and value.defining_op.name in VIEW_OPS:
        value = value.defining_op.operands[0]
    op = value.defining_op
    return value.type if op is not None and op.name == ALLOC else None


class MemDescReinterpretOp(OpDef):
    """`ttg.memdesc_reinterpret %mem`: the view's bytes as another dtype, shape and layout
    (`desc._reinterpret`). The operand must cover whole contiguous bytes; the result starts
    where it starts and may reach on into the rest of its allocation, not past its end."""

    name = REINTERPRET
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, mem, element, shape, layout):
        shape = tuple(int(s) for s in shape)
        return b.create(REINTERPRET, [mem], [SharedMemoryType(shape, element, layout,
                                                              shape)]).result

    def verify(self, op):
        src, res = _memdesc(op), op.result.type
        _check_type(op, src, "operand")
        _check_type(op, res)
        if not is_whole(src):
            raise VerificationError(f"cannot reinterpret a subslice ({list(src.shape)} of "
                                    f"{list(src.alloc_shape)}): its bytes are not contiguous",
                                    op)
        # As in Triton, the new view may run past the operand into the rest of its
        # allocation (tutorial 07 reinterprets one B buffer of a ring as the two it starts);
        # only the allocation's end is a static bound, and the interpreter checks the
        # runtime start against it.
        root = _root_allocation(op.operands[0])
        if root is None:
            return
        have = alloc_bytes(root)
        need = alloc_bytes(res)
        if need > have:
            raise VerificationError(f"reinterpreting a view of a {have}-byte allocation "
                                    f"({list(root.shape)} x {root.element}) as "
                                    f"{list(res.shape)} x {res.element} needs {need} bytes",
                                    op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]].reinterpret(op.result.type, frame, op)]


