"""Type facts the tile language needs beyond `shared_codegen.ir.types`: Triton's notion of
signedness and kind, value ranges, shape validation, and how types read in error messages.

Triton counts `int1` as *unsigned* (its `UINT_TYPES` list starts with 'int1'), which decides
promotions, comparisons and divisions on booleans; our IR's int1 has kind 'int', so every
signedness question in the language goes through `is_signed` here.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.frontend.values import tensor
from shared_codegen.ir.types import IRType, PointerType, ScalarType, TensorType, int1

# Triton's limit on the number of elements of one tensor (triton/_utils.py).
TRITON_MAX_TENSOR_NUMEL = 1048576

# Kinds in Triton's promotion order: bool < integer < floating.
KIND_BOOL, KIND_INT, KIND_FLOAT = 0, 1, 2

MANTISSA_BITS = {"fp8e4nv": 3, "fp8e5": 2, "fp16": 10, "bf16": 7, "fp32": 23, "fp64": 52}


def is_signed(ty: IRType) -> bool:
    return isinstance(ty, ScalarType) and ty.kind == "int" and ty != int1


def is_unsigned(ty: IRType) -> bool:
    return isinstance(ty, ScalarType) and (ty.kind == "uint" or ty == int1)


def is_int(ty: IRType) -> bool:
    return isinstance(ty, ScalarType) and ty.is_int()


def is_float(ty: IRType) -> bool:
    return isinstance(ty, ScalarType) and ty.is_floating()


def is_ptr(ty: IRType) -> bool:
    return isinstance(ty, PointerType)


def kind(ty: ScalarType) -> int:
    if ty == int1:
        return KIND_BOOL
    return KIND_INT if ty.is_int() else KIND_FLOAT


def int_range(ty: ScalarType):
    if ty == int1:
        return 0, 1
    if is_signed(ty):
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def type_name(ty) -> str:
    """How a type reads in messages: `fp32`, `pointer<fp16>`, `tensor<4x8xfp32>`."""
    if isinstance(ty, PointerType):
        return f"pointer<{ty.element}>"
    if isinstance(ty, TensorType):
        dims = "x".join(str(s) for s in ty.shape)
        return f"tensor<{dims}x{type_name(ty.element)}>"
    return str(ty)


def describe(x) -> str:
    """A value as it reads in messages."""
    if isinstance(x, tensor):
        return type_name(x.type)
    return repr(x)


# ---- Python numbers ---------------------------------------------------------------------

def is_number(x) -> bool:
    """A compile-time Python (or numpy) number: it takes part in promotion as a 'scalar'."""
    return isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


def plain_number(x):
    """A numpy scalar as the equivalent Python number."""
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return x


def wrap_int(value: int, ty: ScalarType) -> int:
    """`value` reduced to `ty`'s range with two's-complement wraparound (for all-ones masks
    and similar constants that are written naturally as -1)."""
    if ty == int1:
        return value & 1
    bits = ty.bits
    value &= (1 << bits) - 1
    if is_signed(ty) and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def constant_value(value, ty: ScalarType):
    """The Python value an `arith.constant` of type `ty` stores for `value`."""
    value = plain_number(value)
    if ty == int1:
        return bool(value)
    if ty.is_int():
        return wrap_int(int(value), ty)
    return float(value)


# ---- shapes -----------------------------------------------------------------------------

def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def canonical_shape(shape, what: str = "shape"):
    """A user-given shape (int, tuple or list, possibly of constexprs) as a list of ints,
    checked like Triton's `validate_block_shape`."""
    if isinstance(shape, int):
        shape = [shape]
    if isinstance(shape, tensor) or not isinstance(shape, (list, tuple)):
        raise TypeError(f"{what} must be a tuple of compile-time ints, got {describe(shape)}")
    out = []
    numel = 1
    for i, d in enumerate(shape):
        d = plain_number(d)
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"{what} element {i} must be a compile-time int (tl.constexpr), "
                            f"got {describe(d)}")
        if not is_power_of_two(d):
            raise ValueError(f"{what} element {i} must be a power of 2, got {d}")
        numel *= d
        out.append(d)
    if numel > TRITON_MAX_TENSOR_NUMEL:
        raise ValueError(f"{what} {out} has {numel} elements, more than the maximum "
                         f"{TRITON_MAX_TENSOR_NUMEL}")
    return out


def flatten_args(args):
    """`f(x, 2, 3)` and `f(x, (2, 3))` both mean the tuple (2, 3), as in Triton."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


def as_dtype(dtype, what: str = "dtype") -> IRType:
    if isinstance(dtype, TensorType):
        dtype = dtype.element
    if not isinstance(dtype, (ScalarType, PointerType)):
        raise TypeError(f"`{what}` must be a tl.dtype such as tl.float32, got {describe(dtype)}")
    return dtype

