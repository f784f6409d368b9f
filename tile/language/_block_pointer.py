"""Block pointers: `tl.make_block_ptr`, `tl.advance`, and `tl.load` / `tl.store` with
`boundary_check` and `padding_option`, with Triton 3.6's semantics.

    a_ptrs = tl.make_block_ptr(a, shape=(M, K), strides=(sak, 1), offsets=(pid_m * BM, 0),
                               block_shape=(BM, BK), order=(1, 0))
    for k in range(0, K, BK):
        a = tl.load(a_ptrs, boundary_check=(0, 1), padding_option="zero")
        a_ptrs = tl.advance(a_ptrs, (0, BK))

A block pointer is a frontend value (an aggregate whose runtime fields are the base pointer
and the shape, stride and offset scalars), so loops carry it like any aggregate. A load or
store through it becomes ordinary pointer arithmetic plus a bounds mask on the dims named
by `boundary_check` (`_block_access.py`), on every target and in the interpreter: what
Triton's RewriteTensorPointer pass does where it does not use TMA. Out-of-bounds elements of
a checked dim read as zero, or NaN with `padding_option="nan"`; unchecked dims are not
guarded, as in Triton. `order` is validated and kept (it only matters to TMA lowering).
"""

from __future__ import annotations

from typing import List

from shared_codegen.frontend.aggregates import aggregate
from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import int32, int64
from tile.language import _block_access as B
from tile.language import _types as T

__all__ = ["block_pointer", "make_block_ptr", "advance", "is_block_pointer"]


@aggregate
class block_pointer:
    """`tl.make_block_ptr(...)`'s value. Runtime fields: `base`, `shape_<d>`, `stride_<d>`,
    `offset_<d>`; compile-time: `block_shape`, `order`."""

    def __init__(self, base, shape, strides, offsets, block_shape, order):
        self.base = base
        for d, (s, st, off) in enumerate(zip(shape, strides, offsets)):
            setattr(self, f"shape_{d}", s)
            setattr(self, f"stride_{d}", st)
            setattr(self, f"offset_{d}", off)
        self.block_shape = tuple(block_shape)
        self.order = tuple(order)

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    def _dims(self, prefix: str) -> List[tensor]:
        return [getattr(self, f"{prefix}_{d}") for d in range(self.rank)]

    @property
    def shape(self) -> List[tensor]:
        return self._dims("shape")

    @property
    def strides(self) -> List[tensor]:
        return self._dims("stride")

    @property
    def offsets(self) -> List[tensor]:
        return self._dims("offset")

    @property
    def dtype(self):
        return self.base.dtype.element

    @builtin
    def advance(self, offsets, _semantic=None):
        """`tl.advance(self, offsets)`."""
        return advance_block_pointer(_semantic, self, offsets)

    def __repr__(self):
        return (f"block_pointer(<{list(self.block_shape)} x {T.type_name(self.dtype)}>, "
                f"order={list(self.order)})")


def is_block_pointer(x) -> bool:
    return isinstance(x, block_pointer)


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order, _semantic=None):
    """A pointer to the `block_shape` block at `offsets` of the tensor at `base` with the given
    global `shape` and `strides` (elements); `order` lists the dims from fastest-varying."""
    fn = "tl.make_block_ptr"
    sem = _semantic
    block = B.check_block_args(fn, base, block_shape, (("shape", shape), ("strides", strides),
                                                       ("offsets", offsets), ("order", order)))
    rank = len(block)
    if sorted(order) != list(range(rank)) or not all(isinstance(o, int) for o in order):
        raise ValueError(f"{fn}: `order` must be a permutation of {list(range(rank))}, got "
                         f"{list(order)}")
    return block_pointer(base, B.scalars(sem, shape, int64, fn, "shape"),
                         B.scalars(sem, strides, int64, fn, "strides"),
                         B.scalars(sem, offsets, int32, fn, "offsets"), block, order)


def advance_block_pointer(sem, ptr, offsets) -> block_pointer:
    fn = "tl.advance"
    if not is_block_pointer(ptr):
        raise TypeError(f"{fn}: `base` must be a block pointer (tl.make_block_ptr), got "
                        f"{T.describe(ptr)}")
    if not isinstance(offsets, (list, tuple)) or len(offsets) != ptr.rank:
        raise ValueError(f"{fn}: `offsets` must have {ptr.rank} entries (the block pointer's "
                         f"rank), got {offsets!r}")
    deltas = B.scalars(sem, offsets, int32, fn, "offsets")
    moved = [sem.add(o, d) for o, d in zip(ptr.offsets, deltas)]
    return block_pointer(ptr.base, ptr.shape, ptr.strides, moved, ptr.block_shape, ptr.order)


@builtin
def advance(base, offsets, _semantic=None):
    """The block pointer `base` moved by `offsets` (elements per dim)."""
    return advance_block_pointer(_semantic, base, offsets)


def _boundary_dims(boundary_check, rank: int, fn: str) -> List[int]:
    dims = boundary_check if isinstance(boundary_check, (list, tuple)) else (boundary_check,)
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < rank:
            raise ValueError(f"{fn}: `boundary_check` entries must be dims in [0, {rank}), "
                             f"got {d!r}")
        if d not in out:
            out.append(d)
    return sorted(out)


def load_block(sem, ptr: block_pointer, mask, other, boundary_check, padding_option, cache,
               evict, volatile) -> tensor:
    fn = "tl.load"
    if mask is not None or other is not None:
        raise ValueError(f"{fn}: `mask` and `other` cannot be given when loading through a "
                         f"block pointer; use `boundary_check` and `padding_option`")
    padding = B.check_padding(padding_option or "", ptr.dtype, fn)
    checked = _boundary_dims(boundary_check, ptr.rank, fn)
    addrs, inside = B.block_addresses(sem, ptr.base, ptr.shape, ptr.strides, ptr.offsets,
                                      list(ptr.block_shape), checked)
    other = None if inside is None else B.padding_value(sem, padding, ptr.dtype)
    return sem.load(addrs, inside, other, (), "", cache, evict, volatile)


def store_block(sem, ptr: block_pointer, value, mask, boundary_check, cache, evict) -> None:
    fn = "tl.store"
    if mask is not None:
        raise ValueError(f"{fn}: `mask` cannot be given when storing through a block pointer; "
                         f"use `boundary_check`")
    checked = _boundary_dims(boundary_check, ptr.rank, fn)
    value = B.block_value(sem, value, list(ptr.block_shape), ptr.dtype, fn)
    addrs, inside = B.block_addresses(sem, ptr.base, ptr.shape, ptr.strides, ptr.offsets,
                                      list(ptr.block_shape), checked)
    sem.store(addrs, value, inside, (), cache, evict)
