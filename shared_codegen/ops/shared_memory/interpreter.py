"""The interpreter's shared memory: one byte buffer per allocation, views as offset arrays.

A `SharedView` holds, for each element of its shape, the byte offset of that element inside
its allocation's buffer, computed from the shared layout (`offset_map`): swizzles are real,
so `_reinterpret` sees the bytes where the hardware would have put them. Index, subslice,
permute and reshape are numpy indexing of that array. Every byte remembers whether it was
written; reading one that was not is an error naming the kernel line and the element.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.ir.types import SharedMemoryType
from shared_codegen.ops.shared_memory.definition import offset_map


class SharedBuffer:
    """The bytes of one `ttg.local_alloc` in one program."""

    def __init__(self, nbytes: int, where: str):
        # Poison: all-ones bytes are NaN in every float format and -1 in every int one, so a
        # path that reads never-written bytes without the `written` check shows it.
        self.data = np.full(nbytes, 0xFF, dtype=np.uint8)
        self.written = np.zeros(nbytes, dtype=bool)
        self.where = where
        self.name = ""  # the kernel variable it was first assigned to, for reports
        self.freed_at: Optional[str] = None

    def free(self, op):
        self.freed_at = _where(op)


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"



class SharedView:
    """A descriptor's value: its buffer and the byte offset of each element (the dtype and
    shape come from the op's descriptor type)."""

    def __init__(self, buffer: SharedBuffer, offsets: np.ndarray):
        self.buffer = buffer
        self.offsets = offsets

    # ---- views -------------------------------------------------------------------------
    def index(self, i: int, frame, op) -> "SharedView":
        n = self.offsets.shape[0]
        if not 0 <= i < n:
            # As on the GPU, forming the view is harmless (kernels index with `(i - 1) % n`
            # under a false predicate); using it is the error, reported where it happens.
            return _OutOfRangeView(self.buffer, f"memdesc_index at {_where(op)}: index {i} is "
                                                f"outside [0, {n}) (program id "
                                                f"{tuple(int(p) for p in frame.program_id)})")
        return SharedView(self.buffer, self.offsets[i])

    def subslice(self, starts, shape) -> "SharedView":
        sel = tuple(slice(o, o + s) for o, s in zip(starts, shape))
        return SharedView(self.buffer, self.offsets[sel])

    def permute(self, order) -> "SharedView":
        return SharedView(self.buffer, self.offsets.transpose(tuple(order)))

    def reshape(self, shape) -> "SharedView":
        return SharedView(self.buffer, self.offsets.reshape(tuple(shape)))

    def reinterpret(self, ty: SharedMemoryType, frame, op) -> "SharedView":
        itemsize = op.operands[0].type.element.itemsize
        flat = np.sort(self.offsets.reshape(-1))
        base = int(flat[0]) if flat.size else 0
        if flat.size and not np.array_equal(flat, base + itemsize * np.arange(flat.size)):
            frame.error(op, "memdesc_reinterpret: the view's bytes are not contiguous")
        offsets = base + ty.element.itemsize * offset_map(ty).element_offsets()
        if offsets.size and int(offsets.max()) + ty.element.itemsize > self.buffer.data.size:
            frame.error(op, "memdesc_reinterpret: the new view reaches past the allocation")
        return SharedView(self.buffer, offsets)

    # ---- accesses ----------------------------------------------------------------------
    def _bytes(self, op, frame, itemsize: int):
        if self.buffer.freed_at is not None:
            frame.error(op, f"shared memory allocated at {self.buffer.where} is used after "
                            f"ttg.local_dealloc at {self.buffer.freed_at}")
        idx = self.offsets[..., None] + np.arange(itemsize, dtype=np.int64)
        pending = getattr(self.buffer, "async_pending", None)
        if pending is not None:  # cp.async writes not yet retired (ops/async_copy/definition.py)
            pending.check(idx, frame, op)
        return idx

    def load(self, frame, op) -> np.ndarray:
        ty = op.operands[0].type
        dtype = np.dtype(ty.element.np)
        idx = self._bytes(op, frame, dtype.itemsize)
        hb = current_hb(frame)
        if hb is not None:  # inside gl.warp_specialize: ordered after other partitions?
            hb.access(frame, op, self.buffer, idx, write=False)
        ok = self.buffer.written[idx].all(axis=-1)
        if not ok.all():
            first = tuple(int(c) for c in np.argwhere(~ok)[0])
            count = int((~ok).sum())
            frame.error(op, f"local_load reads uninitialized shared memory: element "
                            f"{list(first)} of the {list(ty.shape)} view ({count} of "
                            f"{ok.size} elements) was never written (allocation at "
                            f"{self.buffer.where})")
        raw = np.ascontiguousarray(self.buffer.data[idx])
        return raw.view(dtype).reshape(tuple(ty.shape))

    def store(self, value, frame, op) -> None:
        ty = op.result.type if op.results else op.operands[1].type
        dtype = np.dtype(ty.element.np)
        idx = self._bytes(op, frame, dtype.itemsize)
        hb = current_hb(frame)
        if hb is not None:
            hb.access(frame, op, self.buffer, idx, write=True)
        raw = np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=dtype),
                                                   tuple(ty.shape)))
        self.buffer.data[idx] = raw.view(np.uint8).reshape(idx.shape)
        self.buffer.written[idx] = True


def allocate(op, frame) -> SharedView:
    """A fresh, never-written buffer for `ttg.local_alloc` (every program gets its own)."""
    ty: SharedMemoryType = op.result.type
    m = offset_map(ty)
    itemsize = ty.element.itemsize
    buffer = SharedBuffer(m.alloc_elems * itemsize, _where(op))
    buffer.name = op.result.name_hint or ""
    # Peer CTAs of a cluster find their copy of this allocation through it (multicast TMA
    # loads and remote mbarrier arrivals, ops/tma/multicast.py).
    buffer.alloc_op = op
    return SharedView(buffer, itemsize * m.element_offsets())


class _OutOfRangeView(SharedView):
    """The view `memdesc_index` gives for an index outside the allocation: any use of its
    elements (a load, a store, an mbarrier or TMA op that is not predicated off) raises."""

    def __init__(self, buffer: SharedBuffer, message: str):
        self.buffer = buffer
        self.message = message

    @property
    def offsets(self):
        from shared_codegen.interpreter.memory import InterpreterError

        raise InterpreterError(f"{self.message} is used")
