"""A CPU emulator for the data movement the cross-thread rules emit (tests use it; no GPU).

`SimContext` stands in for `LoweringContext`: every emitted value is a numpy array with one
entry per thread of the CTA, so one pass over a rule executes all threads in lock step. It
implements the builder subset the rules in `cross_thread.py` / `xthread_scan.py` use (integer
bit ops, compares, selects, shared-memory GEP/load/store, `if_then`), `shfl.sync` bfly/idx
across each warp's 32 lanes, and barriers.

Shared memory is checked like a race detector: between two barriers, an address written by
one thread and read (or written with a different value) by another is an error, as is reading
an address nobody wrote. So a missing `bar.sync` or a wrong offset fails a test instead of
passing by luck.

    sim = SimContext(num_warps=4, combine=lambda a, b: [a[0] + b[0]])
    sim.bind(op.operands[0], numpy_tensor)         # distributes it by the operand's layout
    lowered = lower_reduce(op, sim)
    sim.gather(lowered[0], op.results[0].type)     # back to a numpy tensor (checks copies)
"""

from __future__ import annotations

import contextlib
from typing import Callable, Dict, List

import numpy as np
from llvmlite import ir

from ..ir.types import TensorType
from .context import llvm_type


class SimError(AssertionError):
    """The emitted data movement is wrong (race, uninitialized read, disagreeing copies)."""


class SimVal:
    """One LLVM value in every thread: `arr[t]` is thread t's value."""

    __slots__ = ("type", "arr")

    def __init__(self, type_, arr):
        self.type = type_
        self.arr = np.asarray(arr)


def _is_float(t) -> bool:
    return isinstance(t, (ir.HalfType, ir.FloatType, ir.DoubleType)) or str(t) == "bfloat"


def _size(t) -> int:
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(t)]


class SimBuilder:
    """The llvmlite IRBuilder methods the rules call, over SimVals."""

    def __init__(self, sim: "SimContext"):
        self.sim = sim

    def _v(self, x) -> np.ndarray:
        if isinstance(x, SimVal):
            return x.arr
        if isinstance(x, ir.Constant):
            return np.full(self.sim.nthreads, x.constant, dtype=np.float64
                           if _is_float(x.type) else np.int64)
        raise TypeError(f"not a simulated value: {x!r}")

    def _int(self, a, b, fn, name=""):
        return SimVal(a.type, fn(self._v(a).astype(np.int64), self._v(b).astype(np.int64))
                      & 0xFFFFFFFF)

    def and_(self, a, b, name=""):
        return self._int(a, b, np.bitwise_and)

    def or_(self, a, b, name=""):
        return self._int(a, b, np.bitwise_or)

    def xor(self, a, b, name=""):
        return self._int(a, b, np.bitwise_xor)

    def shl(self, a, b, name=""):
        return self._int(a, b, np.left_shift)

    def lshr(self, a, b, name=""):
        return self._int(a, b, np.right_shift)

    def add(self, a, b, name=""):
        return self._int(a, b, np.add)

    def sub(self, a, b, name=""):
        return self._int(a, b, np.subtract)

    def mul(self, a, b, name=""):
        return self._int(a, b, np.multiply)

    def icmp_unsigned(self, pred, a, b, name=""):
        ops = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
               ">": np.greater, ">=": np.greater_equal}
        return SimVal(ir.IntType(1), ops[pred](self._v(a) & 0xFFFFFFFF,
                                               self._v(b) & 0xFFFFFFFF))

    def select(self, cond, a, b, name=""):
        return SimVal(a.type, np.where(self._v(cond).astype(bool), self._v(a), self._v(b)))

    def zext(self, v, t, name=""):
        return SimVal(t, self._v(v).astype(np.int64))

    def trunc(self, v, t, name=""):
        return SimVal(t, self._v(v) & ((1 << t.width) - 1))

    def ptrtoint(self, v, t, name=""):
        return SimVal(t, self._v(v))

    def inttoptr(self, v, t, name=""):
        return SimVal(t, self._v(v))

    def bitcast(self, v, t, name=""):
        return SimVal(t, self._v(v))

    def gep(self, ptr, indices, inbounds=False, name="", source_etype=None):
        size = _size(source_etype)
        return SimVal(ptr.type, self._v(ptr) + self._v(indices[0]) * size)

    def store(self, value, ptr, align=None):
        addr = self._v(ptr)
        if isinstance(value.type, ir.VectorType):  # st.shared.vN: N consecutive elements
            size = _size(value.type.element)
            if np.any(addr % (size * value.type.count)):
                raise SimError("misaligned vector store")
            for k in range(value.type.count):
                self.sim._store(addr + k * size, value.arr[:, k])
            return
        self.sim._store(addr, self._v(value))

    def load(self, ptr, name="", align=None, typ=None):
        addr = self._v(ptr)
        if isinstance(typ, ir.VectorType):
            size = _size(typ.element)
            if np.any(addr % (size * typ.count)):
                raise SimError("misaligned vector load")
            cols = [self.sim._load(addr + k * size) for k in range(typ.count)]
            return SimVal(typ, np.stack(cols, axis=1))
        return SimVal(typ, self.sim._load(addr))

    def insert_element(self, vec, value, idx, name=""):
        n = vec.type.count
        arr = vec.arr.copy() if isinstance(vec, SimVal) else \
            np.zeros((self.sim.nthreads, n), dtype=self._v(value).dtype)
        arr[:, int(idx.constant)] = self._v(value)
        return SimVal(vec.type, arr)

    def extract_element(self, vec, idx, name=""):
        return SimVal(vec.type.element, vec.arr[:, int(idx.constant)])

    @contextlib.contextmanager
    def if_then(self, pred, likely=None):
        self.sim._masks.append(self._v(pred).astype(bool))
        try:
            yield
        finally:
            self.sim._masks.pop()


class SimContext:
    """A `LoweringContext` stand-in for one CTA (see the module docstring)."""

    def __init__(self, num_warps: int, combine: Callable = None, threads_per_warp: int = 32):
        self.num_warps = num_warps
        self.threads_per_warp = threads_per_warp
        self.nthreads = num_warps * threads_per_warp
        self.builder = SimBuilder(self)
        self.combine = combine
        self.shared_bytes = 0
        self.barriers = 0
        self.shuffles = 0
        self._values: Dict = {}
        self._masks: List[np.ndarray] = []
        self._smem: Dict[int, tuple] = {}    # address -> (value, writer thread, epoch)
        self._reads: Dict[int, set] = {}     # address -> readers in this epoch
        self._epoch = 0
        tid = np.arange(self.nthreads)
        self._lane = SimVal(ir.IntType(32), tid % threads_per_warp)
        self._warp = SimVal(ir.IntType(32), tid // threads_per_warp)

    # -- the LoweringContext API the rules use ----------------------------------------------
    def get(self, value):
        return self._values[value]

    def set(self, value, lowered):
        self._values[value] = lowered

    @staticmethod
    def llvm_type(ty):
        return llvm_type(ty)

    def lane_id(self):
        return self._lane

    def warp_id(self):
        return self._warp

    def linear_layout(self, ty: TensorType):
        from .context import _to_linear
        return _to_linear(ty.layout, tuple(ty.shape))

    def thread_coords(self, ty: TensorType):
        ll = self.linear_layout(ty)
        rank = len(ll.out_dims)
        out = [np.zeros(self.nthreads, dtype=np.int64) for _ in range(rank)]
        for name, src in (("lane", self._lane.arr), ("warp", self._warp.arr)):
            for bit, vec in enumerate(ll.bases.get(name, [])):
                on = (src >> bit) & 1
                for d in range(rank):
                    out[d] ^= on * vec[d]
        return [SimVal(ir.IntType(32), c) for c in out]

    def request_shared(self, nbytes: int):
        self.shared_bytes = max(self.shared_bytes, int(nbytes))
        return SimVal(ir.PointerType(addrspace=3), np.zeros(self.nthreads, dtype=np.int64))

    def shared_base(self):
        return self.request_shared(0)

    def barrier(self):
        if self._masks:
            raise SimError("bar.sync inside a branch")
        self.barriers += 1
        self._epoch += 1
        self._reads = {}

    def _shuffle(self, value, src_lane):
        self.shuffles += 1
        if self._masks:
            raise SimError("shfl.sync inside a branch")
        arr = value.arr.reshape(self.num_warps, self.threads_per_warp)
        src = np.asarray(src_lane).reshape(self.num_warps, self.threads_per_warp) % 32
        return SimVal(value.type, np.take_along_axis(arr, src, axis=1).reshape(-1))

    def shuffle_xor(self, value, mask):
        return self._shuffle(value, self._lane.arr ^ int(mask))

    def shuffle_idx(self, value, lane):
        lane_arr = lane.arr if isinstance(lane, SimVal) else self.builder._v(lane) \
            if isinstance(lane, ir.Constant) else np.full(self.nthreads, int(lane))
        return self._shuffle(value, lane_arr)

    def lower_block(self, block, args):
        n = len(args) // 2
        lhs = [a.arr for a in args[:n]]
        rhs = [a.arr for a in args[n:]]
        return [SimVal(a.type, r) for a, r in zip(args, self.combine(lhs, rhs))]

    # -- shared memory with race checks -------------------------------------------------------
    def _active(self) -> np.ndarray:
        mask = np.ones(self.nthreads, dtype=bool)
        for m in self._masks:
            mask &= m
        return mask

    def _store(self, addrs, values):
        for t in np.nonzero(self._active())[0]:
            a, v = int(addrs[t]), values[t]
            if not 0 <= a < self.shared_bytes:
                raise SimError(f"thread {t} stores outside scratch: byte {a}")
            prev = self._smem.get(a)
            if prev is not None and prev[2] == self._epoch and prev[1] != t and prev[0] != v:
                raise SimError(f"threads {prev[1]} and {t} store different values to byte "
                               f"{a} between barriers")
            readers = self._reads.get(a, set()) - {t}
            if readers:
                raise SimError(f"thread {t} overwrites byte {a} that thread "
                               f"{min(readers)} read since the last barrier")
            self._smem[a] = (v, t, self._epoch)

    def _load(self, addrs):
        out = []
        for t in range(self.nthreads):
            a = int(addrs[t])
            entry = self._smem.get(a)
            if entry is None:
                raise SimError(f"thread {t} reads byte {a} that nobody wrote")
            if entry[2] == self._epoch and entry[1] != t:
                raise SimError(f"thread {t} reads byte {a} written by thread {entry[1]} "
                               f"without a barrier in between")
            self._reads.setdefault(a, set()).add(t)
            out.append(entry[0])
        return np.asarray(out)

    # -- moving tensors in and out -------------------------------------------------------------
    def _coords(self, ty: TensorType):
        """[register][dim] -> per-thread coordinate arrays."""
        ll = self.linear_layout(ty)
        thread = [c.arr for c in self.thread_coords(ty)]
        regs = ll.bases.get("register", [])
        out = []
        for r in range(1 << len(regs)):
            c = [0] * len(thread)
            for bit, vec in enumerate(regs):
                if r >> bit & 1:
                    c = [x ^ y for x, y in zip(c, vec)]
            out.append([t ^ x for t, x in zip(thread, c)])
        return out

    def bind(self, value, data: np.ndarray):
        """Distribute `data` over the threads by `value`'s layout and set it as lowered."""
        ty = value.type
        lty = llvm_type(ty.element)
        regs = [SimVal(lty, data[tuple(c)]) for c in self._coords(ty)]
        self.set(value, regs)
        return regs

    def gather(self, regs, ty) -> np.ndarray:
        """The tensor the registers hold; every copy of an element must agree."""
        if not isinstance(ty, TensorType):
            vals = regs.arr
            if not np.all(vals == vals[0]):
                raise SimError(f"scalar differs between threads: {np.unique(vals)[:8]}")
            return vals[0]
        out = np.full(ty.shape, np.nan)
        seen = np.zeros(ty.shape, dtype=bool)
        for reg, coords in zip(regs, self._coords(ty)):
            idx = tuple(coords)
            vals = reg.arr
            # Several threads may hold one element: all copies must agree.
            flat = np.ravel_multi_index(idx, ty.shape)
            for f, v in zip(flat, vals):
                pos = np.unravel_index(f, ty.shape)
                if seen[pos] and out[pos] != v:
                    raise SimError(f"copies of element {tuple(int(p) for p in pos)} disagree: "
                                   f"{out[pos]} vs {v}")
                out[pos] = v
                seen[pos] = True
        if not seen.all():
            raise SimError(f"{(~seen).sum()} elements are held by no thread")
        return out
