"""Blackwell's packed fp32x2 arithmetic, Triton 3.6's
`triton.experimental.gluon.language.nvidia.blackwell.float2`:

    x2 = float2.pack(x, axis=1)           # [M, N] fp32 -> Float2Tensor of [M, N/2] pairs
    y2 = float2.fma(x2, scale2, bias2)    # fma.rn.f32x2: two FMAs per instruction
    y = float2.unpack(y2, axis=1)         # back to [M, N] fp32

A `Float2Tensor` holds two fp32 values per element in one 64-bit register pair (an int64
tensor); `+`, `-`, `*`, `fma` and `sum` are `add/sub/mul/fma.rn.f32x2` (PTX ISA 8.6, sm_100a)
per pair, which halves the FMA-pipe instructions of FlashAttention-4's softmax. The snippets
go through `inline_asm_elementwise`, which the interpreter runs with its PTX subset
(`ops/inline_asm/ptx_subset.py`, f32x2 lane by lane, one rounding per operation).
"""

from __future__ import annotations

from gluon import language as gl
from shared_codegen.frontend.aggregates import aggregate
from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.frontend.jit import JITFunction, Language

__all__ = ["pack2", "unpack2", "pack", "unpack", "fma", "full_like", "Float2Tensor"]


def _semantic(builder):
    from gluon.language._semantic import GluonSemantic
    return GluonSemantic(builder)


def _no_stages():
    raise TypeError("the float2 functions are called from @gluon.jit kernels, not launched")


# These helpers are only ever inlined into the calling kernel (which brings its own stages);
# a Language of their own keeps gluon.language from importing gluon.jit (a package cycle).
_HELPERS = Language("gluon", _semantic, _no_stages)


def jit(fn):
    return JITFunction(fn, _HELPERS)


@jit
def _pair_op(a, b, OP: gl.constexpr):
    return gl.inline_asm_elementwise(OP + ".f32x2 $0, $1, $2;", "=l,l,l", [a, b],
                                     dtype=gl.int64, is_pure=True, pack=1)


@jit
def _add_pairs(a, b):
    return _pair_op(a, b, "add.rn")


@jit
def _fma_pair(a, b, c):
    return gl.inline_asm_elementwise("fma.rn.f32x2 $0, $1, $2, $3;", "=l,l,l,l", [a, b, c],
                                     dtype=gl.int64, is_pure=True, pack=1)


@aggregate
class Float2Tensor:
    """Pairs of fp32 values, one int64 element per pair (`_value`)."""
    _value: gl.tensor

    def __init__(self, value: gl.tensor):
        self._value = value

    @jit
    def __add__(self, rhs):
        gl.static_assert(isinstance(rhs, Float2Tensor), "rhs must be a Float2Tensor")
        return Float2Tensor(_pair_op(self._value, rhs._value, "add.rn"))

    @jit
    def __sub__(self, rhs):
        gl.static_assert(isinstance(rhs, Float2Tensor), "rhs must be a Float2Tensor")
        return Float2Tensor(_pair_op(self._value, rhs._value, "sub.rn"))

    @jit
    def __mul__(self, rhs):
        gl.static_assert(isinstance(rhs, Float2Tensor), "rhs must be a Float2Tensor")
        return Float2Tensor(_pair_op(self._value, rhs._value, "mul.rn"))

    @jit
    def sum(self, axis: gl.constexpr):
        """The pairs summed along `axis`, pair by pair (one add.f32x2 per step): two row
        sums for the price of one, as FlashAttention-4 keeps its softmax denominators."""
        return Float2Tensor(gl.reduce(self._value, axis, _add_pairs))


@jit
def pack2(x0, x1):
    """A Float2Tensor of the pairs (x0, x1): two fp32 tensors of one shape and layout."""
    value = gl.inline_asm_elementwise("mov.b64 $0, { $1, $2 };", "=l,r,r", [x0, x1],
                                      dtype=gl.int64, is_pure=True, pack=1)
    return Float2Tensor(value)


@jit
def unpack2(x):
    """The two fp32 tensors (first, second of each pair) of the Float2Tensor `x`."""
    return gl.inline_asm_elementwise("mov.b64 { $0, $1 }, $2;", "=r,=r,l", [x._value],
                                     dtype=[gl.float32, gl.float32], is_pure=True, pack=1)


@constexpr_function
def _split_shape(shape, axis):
    """Reshape and permutation taking neighbours along `axis` to a trailing pair dim."""
    shape = [int(d) for d in shape]
    if shape[axis] < 2:
        raise ValueError(f"float2.pack: dimension {axis} has {shape[axis]} element(s); "
                         f"pairs need at least 2")
    shape[axis] //= 2
    shape.insert(axis + 1, 2)
    order = list(range(len(shape)))
    order[axis + 1], order[-1] = order[-1], order[axis + 1]
    return tuple(shape), tuple(order)


@constexpr_function
def _join_shape(shape, axis):
    shape = [int(d) for d in shape]
    shape[axis] *= 2
    order = list(range(len(shape)))
    order.insert(axis + 1, len(order))
    return tuple(shape), tuple(order)


@jit
def pack(x, axis):
    """Pair neighbouring fp32 elements of `x` along `axis` (which halves)."""
    sp: gl.constexpr = _split_shape(x.shape, axis)
    x0, x1 = x.reshape(*sp[0]).permute(*sp[1]).split()
    return pack2(x0, x1)


@jit
def unpack(x, axis):
    """Inverse of `pack(..., axis)`."""
    shape: gl.constexpr = x._value.shape
    sp: gl.constexpr = _join_shape(shape, axis)
    x0, x1 = unpack2(x)
    return gl.join(x0, x1).permute(*sp[1]).reshape(*sp[0])


@jit
def full_like(x, fill_value):
    """A Float2Tensor shaped like `x` with both halves `fill_value` (fp32)."""
    gl.static_assert(fill_value.dtype == gl.float32, "fill_value must be a float32")
    fill = gl.full_like(x._value, fill_value, dtype=gl.float32)
    return pack2(fill, fill)


@jit
def fma(a, b, c):
    """a * b + c on each pair, rounded once (fma.rn.f32x2)."""
    return Float2Tensor(_fma_pair(a._value, b._value, c._value))
