"""The interpreter's tensor memory: one program's 128 lanes x 512 columns of 32 bits.

Bytes are kept per lane ([128, 2048] uint8). Unwritten tensor memory holds all-ones bytes,
a NaN in every float format tensor memory holds (fp32, fp16, bf16, fp8), so a kernel that
accumulates onto memory it never initialized (`use_acc=True` on a fresh allocation) sees
NaNs, as it would see garbage on the GPU. Allocations get the columns the
`tensor_memory_allocation` stage would give them (`allocation.assign_columns`).

A `TmemView` holds, per element of its shape, the lane and the byte offset inside the lane.
`owner` marks the bytes an in-flight `tcgen05_mma` will write, `readers` those it reads (A of
the TS form): reading the first or writing either through a load or store before a wait
observed the MMA's completion is reported as a race naming the MMA's line
(`ops/tcgen05/definition.py` sets and clears them). Later MMAs are not checked: the tensor
core runs one thread's MMAs in order.

Inside `gl.warp_specialize`, every load, store and MMA access is also checked between
partitions by the happens-before detector (`interpreter/happens_before.py`), which sees the
state as one buffer of `data.size` bytes (`TmemView.flat`).
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.ops.tensor_memory.definition import (COL_OFFSET, TMEM_COLUMNS, TMEM_LANES,
                                                         element_cells, lane_copies)

POISON = 0xFF  # all-ones bytes: NaN in fp32, fp16, bf16, fp8e4nv and fp8e5


class TmemState:
    """One program's tensor memory and the MMAs that own parts of it."""

    _KEY = object()
    hb_space = "tensor memory"  # how happens-before reports name this buffer

    def __init__(self):
        self.data = np.full((TMEM_LANES, TMEM_COLUMNS * 4), POISON, dtype=np.uint8)
        # Which bytes were ever written: strict mode reports loads of the others.
        self.written = np.zeros((TMEM_LANES, TMEM_COLUMNS * 4), dtype=bool)
        self.owner = np.zeros((TMEM_LANES, TMEM_COLUMNS * 4), dtype=np.int64)
        self.readers = np.zeros((TMEM_LANES, TMEM_COLUMNS * 4), dtype=np.int64)  # TS-form A
        self.owners: Dict[int, str] = {}  # owner id -> "tcgen05_mma at file:line"
        self.columns = None  # {tmem_alloc op: first column}

    @classmethod
    def of(cls, frame) -> "TmemState":
        state = frame.values.get(cls._KEY)
        if state is None:
            state = frame.values[cls._KEY] = cls()
        return state


def _function_of(op):
    node = op
    while getattr(node, "parent", None) is not None:
        node = node.parent
    return node


def allocate(op, frame) -> "TmemView":
    state = TmemState.of(frame)
    col = op.attrs.get(COL_OFFSET)
    if col is None:  # the interpreter runs without the backend stages: plan the same way
        if state.columns is None:
            from shared_codegen.errors import OutOfResources
            from shared_codegen.ops.tensor_memory.allocation import assign_columns
            try:
                state.columns = assign_columns(_function_of(op))
            except OutOfResources as exc:
                frame.error(op, str(exc))
        col = state.columns[op]
    lanes, offs = element_cells(op.result.type)
    return TmemView(state, lanes, offs + 4 * col, lane_copies(op.result.type.layout))


class TmemView:
    """A tensor-memory descriptor's value: lane and byte offset of each element, and the lane
    offsets of its copies (MX scale factors are held once per 32-lane quadrant)."""

    def __init__(self, state: TmemState, lanes: np.ndarray, offs: np.ndarray,
                 copies=(0,)):
        self.state, self.lanes, self.offs, self.copies = state, lanes, offs, tuple(copies)

    def index(self, i: int, frame, op) -> "TmemView":
        n = self.lanes.shape[0]
        if not 0 <= i < n:
            frame.error(op, f"tensor_memory_descriptor.index: index {i} is outside [0, {n})")
        return TmemView(self.state, self.lanes[i], self.offs[i], self.copies)

    def columns(self, start: int, length: int) -> "TmemView":
        sel = (slice(None), slice(start, start + length))
        return TmemView(self.state, self.lanes[sel], self.offs[sel], self.copies)

    def reinterpret(self, ty) -> "TmemView":
        """The same first column (the view's lowest byte, a column start) as type `ty`."""
        lanes, offs = element_cells(ty)
        return TmemView(self.state, lanes, offs + int(self.offs.min()) // 4 * 4,
                        lane_copies(ty.layout))

    def cells(self, itemsize: int):
        """(lane, byte) index arrays of shape + (copies * itemsize,) into the state's arrays:
        each element's bytes, copy after copy."""
        byte = self.offs[..., None] + np.arange(itemsize)
        lanes = np.broadcast_to(self.lanes[..., None], byte.shape)
        if len(self.copies) > 1:
            lanes = np.concatenate([lanes + c for c in self.copies], axis=-1)
            byte = np.concatenate([byte] * len(self.copies), axis=-1)
        return lanes, byte

    def flat(self, itemsize: int) -> np.ndarray:
        """The bytes of the view as indices into the flattened `state.data`."""
        lanes, byte = self.cells(itemsize)
        return (lanes * self.state.data.shape[1] + byte).reshape(-1)

    def order(self, itemsize: int, frame, op, write: bool, **how) -> None:
        """Check this access against the other partitions' (happens-before) and record it;
        `how` as for `HappensBefore.access` (an MMA names its engine)."""
        hb = current_hb(frame)
        if hb is not None:
            hb.access(frame, op, self.state, self.flat(itemsize), write, **how)

    def check(self, itemsize: int, frame, op, verb: str) -> None:
        """Race report when an in-flight MMA writes these bytes (or, for a write, reads
        them)."""
        cells = self.cells(itemsize)
        for owners, what in ((self.state.owner, "writing"), (self.state.readers, "reading")):
            owner = owners[cells]
            if owner.any():
                where = self.state.owners[int(owner[owner != 0][0])]
                frame.error(op, f"race: {op.opdef.user_name or op.name} {verb} tensor memory "
                                f"that the {where} may still be {what}; wait "
                                f"on the mbarrier its completion is committed to "
                                f"(tcgen05_commit or mbarriers=[...]) first")  # = ADVICE
            if verb == "reads":
                break

    def read_raw(self, ty) -> np.ndarray:
        dtype = np.dtype(ty.element.np)
        raw = self.state.data[self.cells(dtype.itemsize)][..., :dtype.itemsize]  # 1st copy
        return np.ascontiguousarray(raw).view(dtype).reshape(self.lanes.shape)

    def write_raw(self, value, ty) -> None:
        dtype = np.dtype(ty.element.np)
        raw = np.ascontiguousarray(np.asarray(value, dtype=dtype)).view(np.uint8)
        cells = self.cells(dtype.itemsize)
        raw = raw.reshape(self.lanes.shape + (dtype.itemsize,))
        self.state.data[cells] = np.concatenate([raw] * len(self.copies), axis=-1)
        self.state.written[cells] = True

    def read(self, ty, frame, op) -> np.ndarray:
        self.check(ty.element.itemsize, frame, op, "reads")
        self.order(ty.element.itemsize, frame, op, write=False)
        from shared_codegen import config
        if config.get("SC_INTERPRET_STRICT"):
            ok = self.state.written[self.cells(ty.element.itemsize)].all(axis=-1)
            if not ok.all():
                first = [int(c) for c in np.argwhere(~ok)[0]]
                frame.error(op, f"{op.opdef.user_name or op.name} reads uninitialized tensor "
                                f"memory: element {first} of the {list(ok.shape)} view "
                                f"({int((~ok).sum())} of {ok.size} elements) was never "
                                f"written (it holds the poison value, NaN for floats)")
        return self.read_raw(ty)

    def write(self, value, ty, frame, op) -> None:
        self.check(ty.element.itemsize, frame, op, "writes")
        self.order(ty.element.itemsize, frame, op, write=True)
        self.write_raw(value, ty)


__all__ = ["TmemState", "TmemView", "allocate", "POISON"]
