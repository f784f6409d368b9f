"""`set_allocator` (Triton 3.6's `triton.set_allocator`, exported as `tile.set_allocator`):
where kernels that need global scratch memory at launch get it.

An allocator is `alloc(size: int, alignment: int, stream: Optional[int]) -> buffer`, the
buffer anything with `data_ptr()` (a CUDA torch tensor). The launch path
(`frontend/launch.py`) asks it for `grid size x bytes per program` when a kernel writes
tensor maps on the device (`tl.make_tensor_descriptor` on sm_90+: each map is 128 bytes of
scratch, `ops/tma/tensormap.py`).
"""

from __future__ import annotations

import contextvars
from typing import Optional

__all__ = ["set_allocator", "get_allocator", "NullAllocator"]


class NullAllocator:
    """The allocator before `set_allocator` is called: says what to do."""

    def __call__(self, size: int, alignment: int, stream: Optional[int]):
        raise RuntimeError("Kernel requires a runtime memory allocation, but no allocator was "
                           "set. Use tile.set_allocator (triton.set_allocator) to specify an "
                           "allocator.")


_ALLOCATOR: contextvars.ContextVar = contextvars.ContextVar("tile_allocator",
                                                           default=NullAllocator())


def set_allocator(allocator) -> None:
    """Use `allocator(size, alignment, stream)` for kernels' global scratch memory (in this
    thread and context, as Triton's context variable does)."""
    if not callable(allocator):
        raise TypeError(f"set_allocator: allocator must be callable as allocator(size, "
                        f"alignment, stream), got {type(allocator).__name__}")
    _ALLOCATOR.set(allocator)


def get_allocator():
    """The allocator `set_allocator` installed (a `NullAllocator` if none)."""
    return _ALLOCATOR.get()
