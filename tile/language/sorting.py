"""`sort`, `topk`, `bitonic_merge` and `flip`, with Triton 3.6's names, parameters and
semantics, built from other ops as bitonic networks on a "hypercube" view of the tensor.

A tensor of 2^n elements reshaped to [2] * n puts every bit of an element's flat index in
its own dimension. The partner of an element across bit i (the element whose index differs
in that bit only) is then one `xor_sum` away: reducing the size-2 dimension with xor and
broadcasting back gives `x ^ partner`, so `x ^ xor_sum(x)` is the partner. A compare-and-swap
keeps the smaller or the larger of each pair; a bitonic sort is log n merge stages of such
steps (Batcher's network), and top-k drops the losing half of each pair once the first
log k stages have sorted runs of k (Shanbhag et al., "Efficient Top-K Query Processing on
Massively Parallel Hardware"). Like Triton, sorting works on the last dimension only; float
comparisons follow `>` (NaNs compare false).
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import int8, int16, int32, int64
from tile.language import _types as T
from tile.language.standard import max as _max
from tile.language.standard import min as _min
from tile.language.standard import xor_sum

_SIGNED_OF_BITS = {8: int8, 16: int16, 32: int32, 64: int64}


def _log2(n: int) -> int:
    return n.bit_length() - 1


def _as_bits(sem, x: tensor) -> tensor:
    """x reinterpreted as a signed integer of its width (xor needs integers)."""
    if x.dtype.bits == 1:
        return x
    return sem.bitcast(x, _SIGNED_OF_BITS[x.dtype.bits])


def _indicator(sem, n_dims: int, j: int) -> tensor:
    """[0, 1] along hypercube dim `n_dims - 1 - j` (bit j of the flat index)."""
    ar = sem.arange(0, 2)
    return sem.reshape(ar, [1] * (n_dims - j - 1) + [2] + [1] * j)


def _partner(sem, bits: tensor, axis: int) -> tensor:
    return sem.bitwise("xor", bits, xor_sum(bits, axis, keep_dims=True, _semantic=sem))


def _compare_and_swap(sem, x: tensor, flip, i: int) -> tensor:
    """One step across bit i: the left element of each pair keeps the smaller value (the
    larger where `flip` is set)."""
    n_dims = _log2(x.numel)
    bits = _as_bits(sem, x)
    y = _partner(sem, bits, n_dims - 1 - i)
    if y.dtype != x.dtype:
        y = sem.bitcast(y, x.dtype)
    is_right = _indicator(sem, n_dims, i)
    swap = sem.compare("ne", sem.compare("gt", x, y), sem.bitwise("xor", flip, is_right))
    return sem.where(swap, y, x)


def _merge_hypercube(sem, x: tensor, stage: int, order: int) -> tensor:
    """`stage` compare-and-swap rounds; `order` 0 ascending, 1 descending, 2 alternating
    (direction given by bit `stage` of the index, which builds bitonic runs)."""
    flip = _indicator(sem, _log2(x.numel), stage) if order == 2 else order
    for i in range(stage):
        x = _compare_and_swap(sem, x, flip, stage - 1 - i)
    return x


def _sort_dim(x, dim, fn: str) -> int:
    dim = T.plain_number(dim)
    rank = len(x.shape)
    if dim is None:
        return rank - 1
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"tl.{fn}: `dim` must be a compile-time int or None, got "
                        f"{T.describe(dim)}")
    if not -rank <= dim < rank or dim % rank != rank - 1:
        raise ValueError(f"tl.{fn}: only the last (minor) dimension is supported, got dim={dim} "
                         f"for a tensor of rank {rank}")
    return rank - 1


def _descending(value, fn: str) -> int:
    value = T.plain_number(value)
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise TypeError(f"tl.{fn}: `descending` must be a compile-time bool, got "
                        f"{T.describe(value)}")
    return int(value)


def _block(sem, x, fn: str) -> tensor:
    x = sem._operand(x, f"tl.{fn} input")
    if not x.is_block():
        raise ValueError(f"tl.{fn} needs a tensor, got {T.describe(x)}")
    return x


def _sort_impl(sem, x, k, dim, descending, fn: str) -> tensor:
    x = _block(sem, x, fn)
    _sort_dim(x, dim, fn)
    descending = _descending(descending, fn)
    n = x.shape[-1]
    log_n = _log2(n)
    if k is None:
        log_k = log_n
    else:
        k = T.plain_number(k)
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0 or k > n \
                or not T.is_power_of_two(k):
            raise ValueError(f"tl.{fn}: k must be a power of 2 between 1 and the size of the "
                             f"last dimension ({n}), got {T.describe(k)}")
        log_k = _log2(k)
    n_dims = _log2(x.numel)
    h = sem.reshape(x, [2] * n_dims if n_dims else [1])
    for i in range(1, log_k + 1):
        h = _merge_hypercube(sem, h, i, 2 if i < log_n else descending)
    # Top-k: keep the winning half of each pair of sorted runs, then merge what is left.
    reduce = _max if descending else _min
    for i in range(log_k + 1, log_n + 1):
        h = reduce(h, _log2(h.numel) - 1 - log_k, _semantic=sem)
        h = _merge_hypercube(sem, h, log_k, 2 if i < log_n else descending)
    return sem.reshape(h, x.shape[:-1] + [1 << log_k])


@builtin
def sort(x, dim=None, descending=0, _semantic=None):
    """Sort along the last dimension (the only one supported, as in Triton)."""
    return _sort_impl(_semantic, x, None, dim, descending, "sort")


@builtin
def topk(x, k, dim=None, _semantic=None):
    """The `k` largest elements along the last dimension, in descending order."""
    return _sort_impl(_semantic, x, k, dim, 1, "topk")


@builtin
def bitonic_merge(x, dim=None, descending=0, _semantic=None):
    """Sort the last dimension of a tensor whose rows are bitonic sequences."""
    sem = _semantic
    x = _block(sem, x, "bitonic_merge")
    _sort_dim(x, dim, "bitonic_merge")
    descending = _descending(descending, "bitonic_merge")
    n_dims = _log2(x.numel)
    h = sem.reshape(x, [2] * n_dims if n_dims else [1])
    h = _merge_hypercube(sem, h, _log2(x.shape[-1]), descending)
    return sem.reshape(h, x.shape)


@builtin
def flip(x, dim=None, _semantic=None):
    """Reverse the order of the elements along `dim` (default: the last dimension). Bit i of
    the index along `dim` is its own hypercube dim; flipping every such bit (swapping each
    pair with its partner) reverses the dimension."""
    sem = _semantic
    x = _block(sem, x, "flip")
    rank = len(x.shape)
    dim = T.plain_number(dim)
    if dim is None:
        dim = rank - 1
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"tl.flip: `dim` must be a compile-time int or None, got "
                        f"{T.describe(dim)}")
    if not -rank <= dim < rank:
        raise ValueError(f"tl.flip: dim {dim} is out of range for a tensor of rank {rank}")
    dim %= rank
    steps = _log2(x.shape[dim])
    if steps == 0:
        return x
    bits = _as_bits(sem, x)
    y = sem.reshape(bits, x.shape[:dim] + [2] * steps + x.shape[dim + 1:])
    for i in range(steps):
        y = _partner(sem, y, dim + i)
    y = sem.reshape(y, x.shape)
    return y if y.dtype == x.dtype else sem.bitcast(y, x.dtype)


__all__ = ["sort", "topk", "bitonic_merge", "flip"]
