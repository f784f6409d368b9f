"""Builtins that move data between elements: `join`, `split`, `cat`, `interleave`,
`gather`, `histogram`, the index helper `swizzle2d`, and `map_elementwise`, with Triton 3.6's names,
parameters and semantics. The typing rules are in `_movement.py`."""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, tensor
from tile.language.core import minimum


@builtin
def join(a, b, _semantic=None):
    """Join two tensors (broadcast together) in a new minor dimension of size 2; two scalars
    give a tensor of shape [2]. The inverse of `split`."""
    return _semantic.join(a, b)


@builtin
def split(a, _semantic=None):
    """Split a tensor in two along its last dimension, which must have size 2 (a tensor of
    shape [2] gives two scalars). The inverse of `join`."""
    return _semantic.split(a)


@builtin
def cat(input, other, can_reorder=False, _semantic=None):
    """Concatenate two rank-1 tensors of one type. Triton only allows `can_reorder=True`
    (the order of the result is the compiler's); ours keeps the order."""
    return _semantic.cat(input, other, can_reorder)


@builtin
def interleave(a, b, _semantic=None):
    """Interleave two tensors along their last dimension:
    `join(a, b).reshape(a.shape[:-1] + [2 * a.shape[-1]])`."""
    sem = _semantic
    c = sem.join(a, b)
    if len(c.shape) == 1:  # two scalars
        return c
    return sem.reshape(c, c.shape[:-2] + [2 * c.shape[-2]])


@builtin
def gather(src, index, axis, _semantic=None):
    """`out[i][j] = src[index[i][j]][j]` for axis 0 (and likewise for other axes): the result
    has the index's shape."""
    return _semantic.gather(src, index, axis)


@builtin
def histogram(input, num_bins, mask=None, _semantic=None):
    """Counts of the values of a 1-D integer tensor in bins of width 1 starting at 0 (an
    int32 tensor of `num_bins`); elements whose `mask` is false are not counted, and neither
    are values outside [0, num_bins)."""
    return _semantic.histogram(input, num_bins, mask)


@builtin
def map_elementwise(scalar_fn, *args, pack=1, _semantic=None):
    """Apply `scalar_fn` (a @jit function of scalars) to every element of `args` (broadcast
    together); the function may branch per element. With `pack=p` it receives p elements of
    each input at once and returns p of each result. Returns one tensor or a tuple."""
    return _semantic.map_elementwise(scalar_fn, args, pack)


def _is_value(x) -> bool:
    return isinstance(x, tensor)


@builtin
def swizzle2d(i, j, size_i, size_j, size_g, _semantic=None):
    """Map the indices of a row-major `size_i x size_j` matrix to those of a matrix that is
    column-major within each group of `size_g` rows (the grouped ordering of matmul tiles).
    Returns (new_i, new_j)."""
    sem = _semantic
    if not any(_is_value(v) for v in (i, j, size_i, size_j, size_g)):
        return _swizzle2d_numbers(i, j, size_i, size_j, size_g)
    ij = sem.add(sem.binary("mul", i, size_j), j)
    size_gj = sem.binary("mul", size_g, size_j) if _is_value(size_g) or _is_value(size_j) \
        else size_g * size_j
    group_id = sem.floordiv(ij, size_gj)
    off_i = sem.binary("mul", group_id, size_g)
    # The last group may have fewer rows.
    size_g = minimum(sem.sub(size_i, off_i), size_g, _semantic=sem)
    ij = sem.mod(ij, size_gj)
    new_i = sem.add(off_i, sem.mod(ij, size_g))
    new_j = sem.floordiv(ij, size_g)
    return new_i, new_j


def _swizzle2d_numbers(i, j, size_i, size_j, size_g):
    from tile.language import _types as T

    i, j, size_i, size_j, size_g = (T.plain_number(v) for v in (i, j, size_i, size_j, size_g))
    ij = i * size_j + j
    size_gj = size_g * size_j
    off_i = ij // size_gj * size_g
    size_g = min(size_i - off_i, size_g)
    ij %= size_gj
    return off_i + ij % size_g, ij // size_g


__all__ = ["join", "split", "cat", "interleave", "gather", "histogram", "swizzle2d",
           "map_elementwise"]
