"""`tile.set_allocator` (Triton 3.6's `triton.set_allocator`): where kernels that need global
scratch memory at launch get it.

An allocator is `alloc(size: int, alignment: int, stream: Optional[int]) -> buffer`, the
buffer anything with `data_ptr()` (a torch tensor) that stays alive while the kernel runs.
Triton asks for it when a kernel builds tensor descriptors on the device (their 128-byte TMA
descriptors live in that scratch). Tile kernels' `tl.make_tensor_descriptor` does not need
scratch yet (its loads and stores are address arithmetic, see
`tile/language/_descriptors.py`), so the allocator is recorded for kernels that will.
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
