"""Addresses and bounds of one block of a strided tensor: what block pointers
(`tl.make_block_ptr`) and tensor descriptors (`tl.make_tensor_descriptor`) load and store.

A block of shape `block_shape` whose first element sits at `offsets` of a tensor with global
`shape` and `strides` (in elements) starting at `base` has, along dim d, the indices
`offsets[d] + arange(block_shape[d])`. Its pointers are `base + sum_d index_d * strides[d]`
and it is in bounds where `0 <= index_d < shape[d]` for every checked dim. Triton's
RewriteTensorPointer pass builds the same from its block pointers on targets without TMA; the
index arithmetic is 64-bit, as there, so large strides do not wrap.

Each dim's indices are computed as a 1-D vector and only then expanded and broadcast, so the
per-element work is one add (and one compare-and per checked dim).
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

from shared_codegen.frontend.values import tensor
from shared_codegen.ir.types import int64
from tile.language import _types as T

MAX_RANK = 5


def check_block_shape(block_shape, fn: str) -> List[int]:
    """`block_shape` as ints: compile-time, positive powers of two, at most
    TRITON_MAX_TENSOR_NUMEL elements in all."""
    if not isinstance(block_shape, (list, tuple)):
        raise TypeError(f"{fn}: `block_shape` must be a list of compile-time ints, got "
                        f"{T.describe(block_shape)}")
    out = []
    for d, size in enumerate(block_shape):
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"{fn}: `block_shape[{d}]` must be a compile-time int "
                            f"(tl.constexpr), got {T.describe(size)}")
        if size < 1 or size & (size - 1):
            raise ValueError(f"{fn}: `block_shape[{d}]` must be a power of 2, got {size}")
        out.append(size)
    if math.prod(out) > T.TRITON_MAX_TENSOR_NUMEL:
        raise ValueError(f"{fn}: `block_shape` {out} has {math.prod(out)} elements, more than "
                         f"TRITON_MAX_TENSOR_NUMEL ({T.TRITON_MAX_TENSOR_NUMEL})")
    return out


def check_block_args(fn: str, base, block_shape, sequences, max_rank=None) -> List[int]:
    """The checks block pointers and tensor descriptors share: `base` is a scalar pointer,
    `block_shape` is valid (and has 1 to `max_rank` dims when given), and each (name, seq) of
    `sequences` has one entry per dim. Returns the block shape as ints."""
    if not isinstance(base, tensor) or base.is_block() or not base.is_ptr():
        raise TypeError(f"{fn}: `base` must be a scalar pointer, got {T.describe(base)}")
    block = check_block_shape(block_shape, fn)
    rank = len(block)
    if max_rank is not None and not 1 <= rank <= max_rank:
        raise ValueError(f"{fn}: rank must be 1 to {max_rank}, got block_shape {block}")
    for what, seq in sequences:
        if not isinstance(seq, (list, tuple)) or len(seq) != rank:
            got = len(seq) if isinstance(seq, (list, tuple)) else T.describe(seq)
            raise ValueError(f"{fn}: `{what}` must have one entry per dim of `block_shape` "
                             f"{block} ({rank}), got {got}")
    return block


def scalars(sem, values, dtype, fn: str, what: str) -> List[tensor]:
    """Each of `values` (ints or integer scalars) as a `dtype` scalar tensor."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{fn}: `{what}` must be a list or tuple, got {T.describe(values)}")
    out = []
    for d, v in enumerate(values):
        x = sem.to_tensor(v, dtype) if T.is_number(v) else v
        if not isinstance(x, tensor) or x.is_block() or not T.is_int(x.dtype):
            raise TypeError(f"{fn}: `{what}[{d}]` must be an integer scalar, got "
                            f"{T.describe(v)}")
        out.append(x if x.dtype == dtype else sem.cast(x, dtype))
    return out


def check_padding(padding, element, fn: str, what: str = "padding_option") -> str:
    """'' / 'zero' / 'nan' (NaN only for floating-point elements)."""
    if padding not in ("", "zero", "nan"):
        raise ValueError(f"{fn}: `{what}` must be 'zero' or 'nan', got {padding!r}")
    if padding == "nan" and not element.is_floating():
        raise ValueError(f"{fn}: `{what}`='nan' needs a floating-point tensor, got "
                         f"{T.type_name(element)}")
    return padding


def _dim_indices(sem, offset: tensor, size: int, rank: int, d: int) -> tensor:
    """offset + arange(size) as i64, shaped [1, .., size, .., 1] (size at dim d)."""
    idx = sem.add(sem.cast(sem.arange(0, size), int64), offset)
    axes = [a for a in range(rank) if a != d]
    return sem.expand_dims(idx, axes) if axes else idx


def block_addresses(sem, base: tensor, shape: Sequence[tensor], strides: Sequence[tensor],
                    offsets: Sequence[tensor], block_shape: Sequence[int],
                    checked: Sequence[int]):
    """(pointers, in-bounds mask or None) of the block; `shape`, `strides` and `offsets` are
    scalars (cast to i64 here), `checked` the dims whose bounds are checked."""
    rank = len(block_shape)
    block = list(block_shape)
    ptrs: Optional[tensor] = None
    mask: Optional[tensor] = None
    for d in range(rank):
        idx = _dim_indices(sem, sem.cast(offsets[d], int64), block[d], rank, d)
        term = sem.binary("mul", idx, sem.cast(strides[d], int64))
        ptrs = term if ptrs is None else sem.add(ptrs, term)
        if d in checked:
            inside = sem.bitwise("and", sem.compare("ge", idx, sem.to_tensor(0, int64)),
                                 sem.compare("lt", idx, sem.cast(shape[d], int64)))
            mask = inside if mask is None else sem.bitwise("and", mask, inside)
    ptrs = sem.add(sem._broadcast_to(base, block), sem._broadcast_to(ptrs, block))
    if mask is not None:
        mask = sem._broadcast_to(mask, block)
    return ptrs, mask


def padding_value(sem, padding: str, element):
    """What out-of-bounds elements read: NaN for 'nan', else zero."""
    if padding == "nan":
        return sem.to_tensor(float("nan"), element)
    return sem.to_tensor(0, element)


def block_value(sem, value, block_shape, element, fn: str) -> tensor:
    """A value to store into the block: a scalar (broadcast) or a tensor of the block's
    shape, cast to the element type."""
    value = sem._operand(value, "value")
    if value.is_block() and list(value.shape) != list(block_shape):
        raise ValueError(f"{fn}: the value's shape {value.shape} must match the block shape "
                         f"{list(block_shape)}")
    return sem._broadcast_to(sem.cast(value, element), list(block_shape))


__all__ = ["check_block_shape", "scalars", "check_padding", "block_addresses", "padding_value",
           "block_value", "MAX_RANK"]
