"""Argument handling shared by the Hopper builtins: descriptors, predicates, i32 scalars."""

from __future__ import annotations

from shared_codegen.frontend.values import tensor
from shared_codegen.ir.types import SharedMemoryType, TensorType, int1, int32


def smem_arg(value, builtin_name: str, what: str):
    if not isinstance(value, tensor) or not isinstance(value.type, SharedMemoryType):
        raise TypeError(f"{builtin_name}: {what} must be a shared memory descriptor "
                        f"(gl.allocate_shared_memory), got {value!r}")
    return value


def pred_arg(pred, semantic, builtin_name: str):
    """None for a compile-time True (no operand), else an i1 scalar value."""
    if pred is True:
        return None
    x = semantic.to_tensor(pred)
    if isinstance(x.type, TensorType) or x.type != int1:
        raise TypeError(f"{builtin_name}: pred must be a scalar bool (i1), got {x.type}")
    return x.handle


def i32_arg(value, semantic, builtin_name: str, what: str):
    x = semantic.to_tensor(value)
    if isinstance(x.type, TensorType) or not x.type.is_int():
        raise TypeError(f"{builtin_name}: {what} must be an integer scalar, got {x.type}")
    if x.type != int32:
        x = semantic.cast(x, int32)
    return x.handle


def int_arg(value, builtin_name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{builtin_name}: {what} must be a compile-time int, got {value!r}")
    return value
