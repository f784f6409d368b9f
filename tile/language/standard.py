"""The standard library of the tile language: reductions, scans and small helpers, with
Triton 3.6's dtype rules (`triton/language/standard.py`):

- `sum` / `cumsum` accumulate integers narrower than 32 bits in int32 (uint32 when unsigned,
  and booleans count as unsigned); floats keep their type unless `dtype=` is given.
- `max` / `min` without indices compute 8/16-bit types in fp32 / int32; bf16 always goes to
  fp32 (no bf16 compare in hardware), so `max` of fp16 returns fp32.
- `argmax` / `argmin` break ties toward the smallest index (`tie_break_left=True`).

Triton writes these as @jit functions with combine functions; here they are builtins that
build the combine region directly through the semantic object, so they need no tracing.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import bfloat16, float32, int32, uint32
from tile.language import _types as T
from tile.language.math import exp


def _as_fp32_if_bf16(sem, x):
    return sem.cast(x, float32) if x.dtype == bfloat16 else x


def _tensor_input(sem, x, fn: str) -> tensor:
    if not isinstance(x, tensor):
        raise TypeError(f"tl.{fn} needs a tensor, got {T.describe(x)}")
    return x


# ---- small helpers -------------------------------------------------------------------------

@builtin
def cdiv(x, div, _semantic=None):
    """Ceiling division: (x + div - 1) // div."""
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return -(-x // div)
    sem = _semantic
    return sem.floordiv(sem.add(x, sem.sub(div, 1)), div)


@builtin
def sigmoid(x, _semantic=None):
    """1 / (1 + exp(-x)); like Triton, needs fp32 or fp64 input (through `tl.exp`)."""
    sem = _semantic
    e = exp(sem.unary("neg", sem._operand(x)), _semantic=sem)
    return sem.truediv(1, sem.add(1, e))


@builtin
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False, _semantic=None):
    """exp(x - max) / sum(exp(x - max)) along `dim` (default 0)."""
    sem = _semantic
    dim = 0 if dim is None else dim
    z = sem.sub(x, max(x, dim, keep_dims=keep_dims, _semantic=sem))
    num = exp(z, _semantic=sem)
    return sem.truediv(num, sum(num, dim, keep_dims=keep_dims, _semantic=sem))


@builtin
def zeros(shape, dtype, _semantic=None):
    return _semantic.full(shape, 0, dtype)


@builtin
def zeros_like(input, _semantic=None):
    x = _tensor_input(_semantic, input, "zeros_like")
    return _semantic.full(x.shape, 0, x.dtype)


@builtin
def ravel(x, can_reorder=False, _semantic=None):
    x = _tensor_input(_semantic, x, "ravel")
    return _semantic.reshape(x, [x.numel], can_reorder)


# ---- reductions ----------------------------------------------------------------------------

def _sum_dtype(in_dtype, dtype):
    if dtype is not None:
        return T.as_dtype(dtype)
    if T.is_int(in_dtype) and in_dtype.bits < 32:
        return int32 if T.is_signed(in_dtype) else uint32
    return None


def _reduce_simple(sem, x, axis, keep_dims, op: str, fn: str):
    def body(args):
        a, b = args
        return sem._arith(op, a, b)

    return sem.reduction([x], axis, body, keep_dims, what=f"tl.{fn}")[0]


@builtin
def sum(input, axis=None, keep_dims=False, dtype=None, _semantic=None):
    """Sum along `axis` (None: all). Integers narrower than 32 bits accumulate in (u)int32."""
    sem = _semantic
    x = _tensor_input(sem, input, "sum")
    out_dtype = _sum_dtype(x.dtype, dtype)
    if out_dtype is not None:
        x = sem.cast(x, out_dtype)
    return _reduce_simple(sem, x, axis, keep_dims, "add", "sum")


def _arg_body(sem, greater: bool, tie_break_left: bool):
    """Combine (value, index) pairs: keep the larger (smaller) value; on a tie the smaller
    index when `tie_break_left`."""

    def body(args):
        v1, i1, v2, i2 = args
        better = sem.compare("gt" if greater else "lt", v1, v2)
        if tie_break_left:
            tie = sem.bitwise("and", sem.compare("eq", v1, v2), sem.compare("lt", i1, i2))
            better = sem.bitwise("or", better, tie)
        return sem.where(better, v1, v2), sem.where(better, i1, i2)

    return body


def _reduce_with_indices(sem, x, axis, keep_dims, greater, tie_break_left, fn):
    rank = len(x.shape)
    flat = axis is None
    if flat:  # an extension: indices into the flattened tensor, like numpy
        x = sem.reshape(x, [x.numel])
    axis_n = 0 if flat else sem._wrap_axis(axis, rank, f"tl.{fn}")
    index = sem.arange(0, x.shape[axis_n])
    if len(x.shape) > 1:
        others = [d for d in range(len(x.shape)) if d != axis_n]
        index = sem._broadcast_to(sem.expand_dims(index, others), x.shape)
    body = _arg_body(sem, greater, bool(tie_break_left))
    values, indices = sem.reduction([x, index], axis_n, body, keep_dims and not flat,
                                    what=f"tl.{fn}")
    if flat and keep_dims:
        values, indices = (sem.expand_dims(t, list(range(rank))) for t in (values, indices))
    return values, indices


def _max_or_min(sem, input, axis, return_indices, tie_break_left, keep_dims, greater):
    fn = "max" if greater else "min"
    x = _as_fp32_if_bf16(sem, _tensor_input(sem, input, fn))
    if return_indices:
        return _reduce_with_indices(sem, x, axis, keep_dims, greater, tie_break_left,
                                    fn)
    if x.dtype.bits < 32:
        x = sem.cast(x, float32 if x.dtype.is_floating() else int32)
    return _reduce_simple(sem, x, axis, keep_dims, fn, fn)


@builtin
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False, _semantic=None):
    """Maximum along `axis` (None: all); with `return_indices`, also its index."""
    return _max_or_min(_semantic, input, axis, return_indices, return_indices_tie_break_left,
                       keep_dims, True)


@builtin
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False, _semantic=None):
    """Minimum along `axis` (None: all); with `return_indices`, also its index."""
    return _max_or_min(_semantic, input, axis, return_indices, return_indices_tie_break_left,
                       keep_dims, False)


@builtin
def argmax(input, axis=None, tie_break_left=True, keep_dims=False, _semantic=None):
    """Index (int32) of the maximum along `axis`; ties go to the smallest index. `axis=None`
    (an extension) indexes the flattened tensor."""
    return _max_or_min(_semantic, input, axis, True, tie_break_left, keep_dims, True)[1]


@builtin
def argmin(input, axis=None, tie_break_left=True, keep_dims=False, _semantic=None):
    return _max_or_min(_semantic, input, axis, True, tie_break_left, keep_dims, False)[1]


@builtin
def xor_sum(input, axis=None, keep_dims=False, _semantic=None):
    x = _tensor_input(_semantic, input, "xor_sum")
    if not T.is_int(x.dtype):
        raise TypeError(f"tl.xor_sum supports only integers, got {x.dtype}")
    return _reduce_simple(_semantic, x, axis, keep_dims, "xor", "xor_sum")


@builtin
def reduce_or(input, axis, keep_dims=False, _semantic=None):
    x = _tensor_input(_semantic, input, "reduce_or")
    if not T.is_int(x.dtype):
        raise TypeError(f"tl.reduce_or supports only integers, got {x.dtype}")
    return _reduce_simple(_semantic, x, axis, keep_dims, "or", "reduce_or")


# ---- scans ---------------------------------------------------------------------------------

def _scan_simple(sem, x, axis, reverse, op: str, fn: str):
    def body(args):
        return sem._arith(op, args[0], args[1])

    return sem.scan([x], axis, body, reverse, what=f"tl.{fn}")[0]


@builtin
def cumsum(input, axis=0, reverse=False, dtype=None, keep_dims=False, _semantic=None):
    """Inclusive prefix sum along `axis`. (`keep_dims` is accepted and ignored: the tensor
    method `x.cumsum()` passes it.)"""
    sem = _semantic
    x = _as_fp32_if_bf16(sem, _tensor_input(sem, input, "cumsum"))
    out_dtype = _sum_dtype(x.dtype, dtype)
    if out_dtype is not None:
        x = sem.cast(x, out_dtype)
    return _scan_simple(sem, x, axis, reverse, "add", "cumsum")


@builtin
def cumprod(input, axis=0, reverse=False, keep_dims=False, _semantic=None):
    """Inclusive prefix product along `axis` (bf16 computes in fp32)."""
    sem = _semantic
    x = _as_fp32_if_bf16(sem, _tensor_input(sem, input, "cumprod"))
    return _scan_simple(sem, x, axis, reverse, "mul", "cumprod")


__all__ = ["cdiv", "sigmoid", "softmax", "zeros", "zeros_like", "ravel", "sum", "max", "min",
           "argmax", "argmin", "xor_sum", "reduce_or", "cumsum", "cumprod"]
