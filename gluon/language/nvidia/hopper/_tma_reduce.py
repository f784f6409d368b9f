"""`tma.async_atomic_add` / `_min` / `_max` / `_and` / `_or` / `_xor`: combine a shared-memory
tile into global memory through a TMA descriptor (`cp.reduce.async.bulk.tensor`, sm_90), with
the names and parameters Gluon gives them after Triton 3.6 (3.6 has the op, `ttng.async_tma_reduce`,
only behind the tile DSL's `desc.atomic_add`).

    dq_smem.store(dq)                     # every thread writes its part
    fence_async_shared()                  # ... visible to the TMA unit
    tma.async_atomic_add(dq_desc, [b, h, m0, 0], dq_smem)
    ...
    tma.store_wait(0)                     # before dq_smem is written again

Each call is one bulk group, like `async_copy_shared_to_global`: `src` is read until a
`store_wait` retires the group, and the combine into global memory is element-wise atomic
(relaxed, GPU scope), so CTAs adding into the same block need no other ordering.
"""

from __future__ import annotations

from gluon.language._smem import _checked
from gluon.language.nvidia.hopper._common import smem_arg
from shared_codegen.frontend.values import builtin
from shared_codegen.ops.tma.definition import REDUCE_KINDS, AsyncTMAReduceOp

__all__ = ["async_atomic_add", "async_atomic_min", "async_atomic_max", "async_atomic_and",
           "async_atomic_or", "async_atomic_xor"]


def _reduce(kind: str, tensor_desc, coord, src, semantic) -> None:
    from gluon.language.nvidia.hopper.tma import _check, _coords, _desc

    name = f"tma.async_atomic_{kind}"
    desc = _desc(tensor_desc, name)
    element = desc.type.element
    if element.name not in REDUCE_KINDS[kind]:
        allowed = ", ".join(REDUCE_KINDS[kind])
        raise TypeError(f"{name}: the descriptor's element type is {element}; "
                        f"cp.reduce.async.bulk.tensor .{kind} takes {allowed}")
    smem = smem_arg(src, name, "src")
    _check(desc, smem, name, "src")
    coords = _coords(coord, desc, semantic, name)
    _checked(AsyncTMAReduceOp.build(semantic.builder, kind, desc.handle, coords, smem.handle))


@builtin
def async_atomic_add(tensor_desc, coord, src, _semantic=None):
    """Atomically add `src` (shared memory) into the block at `coord` (clipped where it runs
    past the tensor's end; coordinates >= 0, as for a store): fp32, fp16, bf16, i32, u32,
    u64."""
    _reduce("add", tensor_desc, coord, src, _semantic)


@builtin
def async_atomic_min(tensor_desc, coord, src, _semantic=None):
    """Atomically take the minimum of `src` and the block at `coord`."""
    _reduce("min", tensor_desc, coord, src, _semantic)


@builtin
def async_atomic_max(tensor_desc, coord, src, _semantic=None):
    """Atomically take the maximum of `src` and the block at `coord`."""
    _reduce("max", tensor_desc, coord, src, _semantic)


@builtin
def async_atomic_and(tensor_desc, coord, src, _semantic=None):
    """Atomically bitwise-and `src` into the block at `coord` (integers)."""
    _reduce("and", tensor_desc, coord, src, _semantic)


@builtin
def async_atomic_or(tensor_desc, coord, src, _semantic=None):
    """Atomically bitwise-or `src` into the block at `coord` (integers)."""
    _reduce("or", tensor_desc, coord, src, _semantic)


@builtin
def async_atomic_xor(tensor_desc, coord, src, _semantic=None):
    """Atomically bitwise-xor `src` into the block at `coord` (integers)."""
    _reduce("xor", tensor_desc, coord, src, _semantic)
