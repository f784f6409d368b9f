"""The interpreter's global memory: host arrays mapped at fake device addresses.

Pointers are int64 byte addresses. Argument k's array is mapped at `(k + 1) << 40`, so an
address splits into (buffer, byte offset) with a shift and a mask, and every access of an
active lane is checked against the buffer's extent and the element alignment. An error names
the kernel line, the program id, the argument and the offending element offset.

A kernel may also be handed real host addresses inside an argument: a table of pointers built
from `tensor.data_ptr()` (Triton's grouped GEMM, tutorial 08). Those are read and written in
place, as Triton's interpreter does, if they lie inside a live host array (found by
interpreter/host_addresses.py), and checked against that array's extent; any other address is
refused like a stray pointer.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

# The shared hierarchy's class, importable from here as before.
from shared_codegen.errors import InterpreterError
from shared_codegen.interpreter.host_addresses import live_host_spans

_SHIFT = 40
_OFFSET_MASK = (1 << _SHIFT) - 1


@dataclass
class Buffer:
    name: str          # the kernel parameter it was passed as
    data: np.ndarray   # flat uint8 view of the whole underlying memory
    start: int         # byte offset of the argument's first element inside `data`
    dtype: np.dtype    # the argument's element type (for messages)


def host_array(arg) -> Optional[np.ndarray]:
    """A numpy view (sharing memory) of a numpy array or CPU torch tensor, else None."""
    if isinstance(arg, np.ndarray):
        return arg
    mod = type(arg).__module__
    if mod.startswith("torch"):
        import torch

        if arg.device.type != "cpu":
            return None
        if not arg.is_contiguous():
            return _torch_strided_view(arg)
        if arg.dtype == torch.bfloat16:
            import ml_dtypes

            return arg.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        if arg.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            import ml_dtypes

            npdt = ml_dtypes.float8_e4m3fn if arg.dtype == torch.float8_e4m3fn else \
                ml_dtypes.float8_e5m2
            return arg.detach().view(torch.uint8).numpy().view(npdt)
        return arg.detach().numpy()
    return None


def _torch_strided_view(arg) -> np.ndarray:
    """A non-contiguous CPU tensor (`x.t()`, `x[:, ::2]`) as a numpy view whose base is its
    whole storage: a kernel gets `data_ptr()` and indexes the storage with the strides it is
    given, as on the GPU, so the interpreter must map the storage, not a copy."""
    itemsize = arg.element_size()
    whole = arg.detach().as_strided((arg.untyped_storage().nbytes() // itemsize,), (1,), 0)
    flat = host_array(whole)
    return np.ndarray(tuple(arg.shape), dtype=flat.dtype, buffer=flat,
                      offset=arg.storage_offset() * itemsize,
                      strides=tuple(s * itemsize for s in arg.stride()))


def _whole_memory(arr: np.ndarray):
    """The flat byte view of the memory `arr` lives in, and arr's byte offset inside it."""
    owner = arr
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if owner.flags.c_contiguous:
        flat = owner.reshape(-1).view(np.uint8)
        start = arr.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
        return flat, start
    # Column-major (np.asfortranarray, x.T of a fresh array) or other strided memory: the GPU
    # path passes the first element's address and the kernel indexes with the strides it is
    # given, so map every byte the owner spans, in place (writes land in the user's array).
    low, high = _byte_bounds(owner)
    flat = np.ctypeslib.as_array((ctypes.c_uint8 * (high - low)).from_address(low)) \
        if high > low else np.zeros(0, np.uint8)
    if not owner.flags.writeable:
        flat.flags.writeable = False
    return flat, arr.__array_interface__["data"][0] - low


def _byte_bounds(arr: np.ndarray):
    """[low, high) addresses of the bytes `arr` touches (numpy's byte_bounds; it moved to
    numpy.lib.array_utils in numpy 2)."""
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # numpy 1.x
        byte_bounds = np.byte_bounds
    return byte_bounds(arr)


class Memory:
    def __init__(self):
        self.buffers: List[Buffer] = []
        self._views: Dict[tuple, np.ndarray] = {}
        # Host mappings reached through real addresses: (low, high, buffer id), by low.
        self._host: List[tuple] = []
        # Bumped by every store and every atomic that changes memory: concurrent programs
        # (interpreter/grid.py) tell a spin that can still complete from one that cannot.
        self.version = 0

    def map(self, name: str, arr: np.ndarray) -> int:
        """Map `arr` and return the address of its first element."""
        flat, start = _whole_memory(arr)
        self.buffers.append(Buffer(name, flat, start, arr.dtype))
        return (len(self.buffers) << _SHIFT) + start

    # Memory-model synchronization through an address (ops/distributed); only a simulated
    # world of ranks tracks it (interpreter/world_races.py).
    def release(self, frame, ptrs) -> None:
        pass

    def acquire(self, frame, ptrs) -> None:
        pass

    def describe_address(self, addr) -> str:
        """An address in the user's terms, for reports: the argument and element."""
        addr = int(addr)
        buf_id = (addr >> _SHIFT) - 1
        if not 0 <= buf_id < len(self.buffers):
            return f"address {addr:#x}"
        buf = self.buffers[buf_id]
        rel = (addr & _OFFSET_MASK) - buf.start
        return f"`{buf.name}`[{rel // buf.dtype.itemsize}]"

    # ---- address decoding and checks ---------------------------------------------------
    def _resolve(self, addrs: np.ndarray, itemsize: int, frame, op, what: str):
        addrs = np.asarray(addrs, dtype=np.int64)
        buf_ids = (addrs >> _SHIFT) - 1
        offsets = addrs & _OFFSET_MASK
        bad = (buf_ids < 0) | (buf_ids >= len(self.buffers))
        if self._host:  # host mappings have buffer ids but no fake addresses
            bad |= np.isin(buf_ids, [h[2] for h in self._host])
        if bad.any():
            buf_ids, offsets = buf_ids.copy(), offsets.copy()
            found = self._host_lanes(addrs[bad])
            if found is None:
                self._map_host_arrays(addrs[bad])
                found = self._host_lanes(addrs[bad])
            if found is None:
                lost = addrs[bad].reshape(-1)[self._first_unmapped(addrs[bad])]
                frame.error(op, f"{what} through an invalid pointer (address {int(lost):#x} is "
                                "not inside any argument or live host array)")
            buf_ids[bad], offsets[bad] = found
        return buf_ids, offsets

    # ---- real host addresses (pointer tables) ----------------------------------------------
    def _host_lanes(self, addrs: np.ndarray):
        """(buffer ids, offsets) of real host addresses, or None if one is in no known
        mapping."""
        if not self._host:
            return None
        lows = np.array([h[0] for h in self._host], dtype=np.int64)
        highs = np.array([h[1] for h in self._host], dtype=np.int64)
        ids = np.array([h[2] for h in self._host], dtype=np.int64)
        k = np.searchsorted(lows, addrs, side="right") - 1
        inside = (k >= 0) & (addrs < highs[np.maximum(k, 0)])
        if not inside.all():
            return None
        return ids[k], addrs - lows[k]

    def _first_unmapped(self, addrs: np.ndarray) -> int:
        flat = addrs.reshape(-1)
        for i, a in enumerate(flat):
            if self._host_lanes(np.array([a], dtype=np.int64)) is None:
                return i
        return 0

    def _map_host_arrays(self, addrs: np.ndarray) -> None:
        """Map (in place) the memory of each live host array that holds one of `addrs`
        (interpreter/host_addresses.py); overlapping arrays (views) become one buffer."""
        wanted = np.unique(addrs)
        known = {h[0] for h in self._host}
        for low, high in live_host_spans():
            if low in known or not ((wanted >= low) & (wanted < high)).any():
                continue
            data = np.ctypeslib.as_array((ctypes.c_uint8 * (high - low)).from_address(low))
            self.buffers.append(Buffer(f"host array at {low:#x}", data, 0, np.dtype(np.uint8)))
            self._host.append((low, high, len(self.buffers) - 1))
        self._host.sort()

    def _check(self, buf: Buffer, offsets: np.ndarray, itemsize: int, frame, op, what: str):
        nbytes = buf.data.size
        bad = (offsets < 0) | (offsets + itemsize > nbytes)
        misaligned = (offsets % itemsize) != 0
        if bad.any() or misaligned.any():
            flat = offsets.reshape(-1)
            idx = int(np.flatnonzero((bad | misaligned).reshape(-1))[0])
            rel = int(flat[idx]) - buf.start
            elem = buf.dtype.itemsize
            count = (nbytes - buf.start) // elem
            if bad.reshape(-1)[idx]:
                frame.error(op, f"out-of-bounds {what} of `{buf.name}`: element offset "
                                f"{rel // elem if rel % elem == 0 else rel / elem} is outside "
                                f"[0, {count}) ({count} elements of {buf.dtype})")
            frame.error(op, f"misaligned {what} of `{buf.name}`: byte offset {rel} is not a "
                            f"multiple of {itemsize}")

    def _view(self, buf_id: int, dtype: np.dtype) -> np.ndarray:
        key = (buf_id, dtype)
        view = self._views.get(key)
        if view is None:
            data = self.buffers[buf_id].data
            usable = data.size - data.size % dtype.itemsize
            view = data[:usable].view(dtype)
            self._views[key] = view
        return view

    def _lanes(self, ptrs, mask):
        ptrs = np.asarray(ptrs, dtype=np.int64)
        if mask is None:
            active = np.ones(ptrs.shape, dtype=bool)
        else:
            active = np.broadcast_to(np.asarray(mask, dtype=bool), ptrs.shape)
        return ptrs, active

    # ---- accesses ----------------------------------------------------------------------
    def load(self, ptrs, mask, other, elem, frame, op):
        dtype = np.dtype(elem.np) if not hasattr(elem, "element") else np.dtype(np.int64)
        ptrs, active = self._lanes(ptrs, mask)
        out = np.zeros(ptrs.shape, dtype=dtype)
        if other is not None:
            out[...] = np.asarray(other, dtype=dtype)
        if active.any():
            sel = ptrs[active]
            buf_ids, offsets = self._resolve(sel, dtype.itemsize, frame, op, "load")
            values = np.empty(sel.shape, dtype=dtype)
            for b in np.unique(buf_ids):
                pick = buf_ids == b
                self._check(self.buffers[b], offsets[pick], dtype.itemsize, frame, op, "load")
                values[pick] = self._view(int(b), dtype)[offsets[pick] // dtype.itemsize]
            out[active] = values
        if getattr(frame, "program", None) is not None and op.attrs.get("volatile"):
            frame.program.sync(op, ptrs[active], out)
        return out[()] if out.ndim == 0 else out

    def store(self, ptrs, values, mask, elem, frame, op):
        dtype = np.dtype(elem.np)
        ptrs, active = self._lanes(ptrs, mask)
        if not active.any():
            return
        values = np.broadcast_to(np.asarray(values, dtype=dtype), ptrs.shape)
        sel, vals = ptrs[active], values[active]
        self.version += 1
        buf_ids, offsets = self._resolve(sel, dtype.itemsize, frame, op, "store")
        for b in np.unique(buf_ids):
            pick = buf_ids == b
            self._check(self.buffers[b], offsets[pick], dtype.itemsize, frame, op, "store")
            self._view(int(b), dtype)[offsets[pick] // dtype.itemsize] = vals[pick]

    def _locate(self, ptrs, active, dtype, frame, op, what):
        sel = np.asarray(ptrs, dtype=np.int64)[active]
        buf_ids, offsets = self._resolve(sel, dtype.itemsize, frame, op, what)
        for b in np.unique(buf_ids):
            pick = buf_ids == b
            self._check(self.buffers[b], offsets[pick], dtype.itemsize, frame, op, what)
        return buf_ids, offsets // dtype.itemsize

    def atomic_rmw(self, kind, ptrs, values, mask, elem, frame, op):
        dtype = np.dtype(elem.np)
        ptrs, active = self._lanes(ptrs, mask)
        values = np.broadcast_to(np.asarray(values, dtype=dtype), ptrs.shape)
        old = np.zeros(ptrs.shape, dtype=dtype)
        if not active.any():
            return old[()] if old.ndim == 0 else old
        buf_ids, index = self._locate(ptrs, active, dtype, frame, op, "atomic")
        olds = np.empty(index.shape, dtype=dtype)
        vals = values[active]
        # Lanes apply one after another, in order, like a serialization of the GPU's atomics.
        for k in range(index.size):
            view = self._view(int(buf_ids[k]), dtype)
            cur = view[index[k]]
            olds[k] = cur
            new = _combine(kind, cur, vals[k], dtype)
            if new != cur:
                self.version += 1
            view[index[k]] = new
        old[active] = olds
        self._synced(frame, op, ptrs[active], old)
        return old[()] if old.ndim == 0 else old

    @staticmethod
    def _synced(frame, op, ptrs, result) -> None:
        """An atomic is where concurrent programs switch (interpreter/grid.py)."""
        program = getattr(frame, "program", None)
        if program is not None:
            program.sync(op, ptrs, result)

    def atomic_cas(self, ptrs, cmp, values, elem, frame, op):
        dtype = np.dtype(elem.np)
        ptrs, active = self._lanes(ptrs, None)
        cmp = np.broadcast_to(np.asarray(cmp, dtype=dtype), ptrs.shape)
        values = np.broadcast_to(np.asarray(values, dtype=dtype), ptrs.shape)
        buf_ids, index = self._locate(ptrs, active, dtype, frame, op, "atomic_cas")
        old = np.empty(index.shape, dtype=dtype)
        cmps, vals = cmp[active], values[active]
        for k in range(index.size):
            view = self._view(int(buf_ids[k]), dtype)
            cur = view[index[k]]
            old[k] = cur
            if cur == cmps[k]:
                if vals[k] != cur:
                    self.version += 1
                view[index[k]] = vals[k]
        out = old.reshape(ptrs.shape)
        self._synced(frame, op, ptrs, out)
        return out[()] if out.ndim == 0 else out


def _combine(kind, cur, val, dtype):
    with np.errstate(all="ignore"):
        if kind in ("add", "fadd"):
            return (cur + val).astype(dtype)
        if kind in ("umax", "umin") and dtype.kind == "i":
            # Unsigned comparison of signed storage: compare the same bits as unsigned.
            unsigned = np.dtype(f"u{dtype.itemsize}")
            a, b = np.asarray(cur).astype(unsigned), np.asarray(val).astype(unsigned)
            return cur if (a >= b) == (kind == "umax") else val
        if kind in ("max", "umax"):
            return max(cur, val)
        if kind in ("min", "umin"):
            return min(cur, val)
        if kind == "and":
            return cur & val
        if kind == "or":
            return cur | val
        if kind == "xor":
            return cur ^ val
        if kind == "xchg":
            return val
    raise ValueError(f"unknown atomic kind {kind!r}")
