"""A CPU emulator for the data movement the cross-thread rules emit (tests use it; no GPU).

`SimContext` stands in for `LoweringContext`: every emitted value is a numpy array with one
entry per thread of the CTA, so one pass over a rule executes all threads in lock step. It
implements the builder subset the rules in `cross_thread.py`, `xthread_scan.py`,
`xthread_shuffle.py` and `xthread_swizzle.py` use (integer bit ops, compares, selects, bitcasts
on real bit patterns, shared-memory GEP/load/store, `if_then`), `shfl.sync` bfly/idx across each
warp's 32 lanes, stmatrix/ldmatrix (per the PTX fragment layout), and barriers. Shared memory
is byte-addressed, so a side that stores 16-byte vectors and one that reads 2-byte halves see
the same bytes.

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
import re
from typing import Callable, Dict, List

import numpy as np
from llvmlite import ir

from shared_codegen.ir.types import TensorType
from shared_codegen.lowering.context import llvm_type
from shared_codegen.lowering.scratch import ScratchClaims, settle


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
    if isinstance(t, ir.PointerType):
        return 8
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(t)]


def _width(t) -> int:
    if isinstance(t, ir.VectorType):
        return _width(t.element) * t.count
    if isinstance(t, ir.IntType):
        return t.width
    return 8 * _size(t)


def to_raw(t, arr) -> np.ndarray:
    """Values of LLVM type `t` -> their bits (uint64 per thread; vectors element 0 lowest),
    so that bitcasts and shared memory see real bit patterns (fp16 packed in an i32 word,
    a double split into two words)."""
    arr = np.asarray(arr)
    if isinstance(t, ir.VectorType):
        raise TypeError("vectors go through to_bytes (they may be wider than 64 bits)")
    if str(t) == "half":
        return arr.astype(np.float16).view(np.uint16).astype(np.uint64)
    if str(t) == "bfloat":
        return (arr.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    if isinstance(t, ir.FloatType):
        return arr.astype(np.float32).view(np.uint32).astype(np.uint64)
    if isinstance(t, ir.DoubleType):
        return arr.astype(np.float64).view(np.uint64)
    width = _width(t)
    raw = arr.astype(np.int64).view(np.uint64)
    return raw & np.uint64((1 << width) - 1) if width < 64 else raw


def to_bytes(t, arr) -> np.ndarray:
    """[thread, byte] little-endian bytes of values of type `t` (vectors element 0 first)."""
    arr = np.asarray(arr)
    if isinstance(t, ir.VectorType):
        return np.concatenate([to_bytes(t.element, arr[:, k]) for k in range(t.count)], axis=1)
    raw = to_raw(t, arr)
    return np.stack([(raw >> np.uint64(8 * j)) & np.uint64(0xFF) for j in range(_size(t))],
                    axis=1).astype(np.uint64)


def from_bytes(t, data) -> np.ndarray:
    if isinstance(t, ir.VectorType):
        size = _size(t.element)
        cols = [from_bytes(t.element, data[:, k * size:(k + 1) * size]) for k in range(t.count)]
        return np.stack(cols, axis=1)
    raw = np.zeros(data.shape[0], dtype=np.uint64)
    for j in range(data.shape[1]):
        raw |= data[:, j].astype(np.uint64) << np.uint64(8 * j)
    return from_raw(t, raw)


def from_raw(t, raw) -> np.ndarray:
    """The inverse of `to_raw` (integers come back signed, as they went in)."""
    raw = np.asarray(raw).astype(np.uint64)
    if isinstance(t, ir.VectorType):
        raise TypeError("vectors go through from_bytes (they may be wider than 64 bits)")
    if str(t) == "half":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if str(t) == "bfloat":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if isinstance(t, ir.FloatType):
        return raw.astype(np.uint32).view(np.float32).astype(np.float64)
    if isinstance(t, ir.DoubleType):
        return raw.view(np.float64)
    width = _width(t)
    if width == 1:
        return (raw & np.uint64(1)).astype(np.int64)
    signed = raw.view(np.int64) if width == 64 else raw.astype(np.int64)
    if width < 64:
        signed = np.where(signed >= 1 << (width - 1), signed - (1 << width), signed)
    return signed


class SimBuilder:
    """The llvmlite IRBuilder methods the rules call, over SimVals."""

    def __init__(self, sim: "SimContext"):
        self.sim = sim
        self.block = "entry"  # one straight-line block (claim_scratch compares blocks)

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

    def icmp_signed(self, pred, a, b, name=""):
        ops = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
               ">": np.greater, ">=": np.greater_equal}
        width = a.type.width

        def signed(x):
            x = self._v(x).astype(np.int64) & ((1 << width) - 1)
            return np.where(x >> (width - 1), x - (1 << width), x)

        return SimVal(ir.IntType(1), ops[pred](signed(a), signed(b)))

    def sext(self, v, t, name=""):
        width = v.type.width
        x = self._v(v).astype(np.int64) & ((1 << width) - 1)
        return SimVal(t, np.where(x >> (width - 1), x - (1 << width), x) & ((1 << t.width) - 1))

    def atomic_rmw(self, op, ptr, val, ordering, name=""):
        """atom.shared.<op> by every active thread, one after another. Atomics of one epoch
        do not race with each other; a plain access to their bytes in the same epoch does."""
        if op != "add" or not isinstance(val.type, ir.IntType):
            raise SimError(f"atomic {op} on {val.type} is not simulated")
        addr, vals = self._v(ptr), self._v(val)
        size = _size(val.type)
        old = np.zeros(self.sim.nthreads, dtype=np.int64)
        for t in np.nonzero(self.sim._active())[0]:
            a = int(addr[t])
            cur = 0
            for j in range(size):
                entry = self.sim._mem.get(a + j)
                if entry is None:
                    raise SimError(f"thread {t} atomically updates byte {a + j} nobody wrote")
                if entry[2] == self.sim._epoch and entry[1] not in (t, -1):
                    raise SimError(f"thread {t} atomically updates byte {a + j} that thread "
                                   f"{entry[1]} wrote without a barrier in between")
                cur |= entry[0] << (8 * j)
            old[t] = cur
            new = (cur + int(vals[t])) & ((1 << (8 * size)) - 1)
            for j in range(size):
                self.sim._mem[a + j] = (new >> (8 * j) & 0xFF, -1, self.sim._epoch)
        return SimVal(val.type, old)

    def select(self, cond, a, b, name=""):
        return SimVal(a.type, np.where(self._v(cond).astype(bool), self._v(a), self._v(b)))

    def zext(self, v, t, name=""):
        return SimVal(t, self._v(v).astype(np.int64) & ((1 << v.type.width) - 1))

    def trunc(self, v, t, name=""):
        return SimVal(t, self._v(v) & ((1 << t.width) - 1))

    def ptrtoint(self, v, t, name=""):
        return SimVal(t, self._v(v))

    def inttoptr(self, v, t, name=""):
        return SimVal(t, self._v(v))

    def bitcast(self, v, t, name=""):
        if isinstance(v.type, ir.PointerType) or isinstance(t, ir.PointerType):
            return SimVal(t, self._v(v))
        src = to_bytes(v.type, self._v(v))
        size = _size(t.element) * t.count if isinstance(t, ir.VectorType) else _size(t)
        if src.shape[1] != size:
            raise SimError(f"bitcast {v.type} -> {t} changes the size")
        return SimVal(t, from_bytes(t, src))

    def extract_value(self, agg, idx, name=""):
        return SimVal(agg.type.elements[int(idx)], agg.arr[:, int(idx)])

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
                self.sim._store(addr + k * size, to_raw(value.type.element, value.arr[:, k]),
                                size)
                for t in np.nonzero(self.sim._active())[0]:
                    self.sim._smem[int(addr[t]) + k * size] = (value.arr[t, k], int(t),
                                                               self.sim._epoch)
            return
        vals = self._v(value)
        self.sim._store(addr, to_raw(value.type, vals), _size(value.type))
        for t in np.nonzero(self.sim._active())[0]:
            self.sim._smem[int(addr[t])] = (vals[t], int(t), self.sim._epoch)

    def load(self, ptr, name="", align=None, typ=None):
        addr = self._v(ptr)
        if isinstance(typ, ir.VectorType):
            size = _size(typ.element)
            if np.any(addr % (size * typ.count)):
                raise SimError("misaligned vector load")
            cols = [from_raw(typ.element, self.sim._load(addr + k * size, size))
                    for k in range(typ.count)]
            return SimVal(typ, np.stack(cols, axis=1))
        if np.any(addr % _size(typ)):
            raise SimError("misaligned load")
        return SimVal(typ, from_raw(typ, self.sim._load(addr, _size(typ))))

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
        self.static_shared_bytes = 0
        self.barriers = 0
        # What claim_scratch (shared_codegen/lowering/scratch.py) reads: the last barrier's
        # count and block, and the claims so far. `end_op` settles them as lowering an op does.
        self.barrier_count = 0
        self.barrier_block = None
        self.scratch_claims = ScratchClaims()
        self.current_op = None
        self.shuffles = 0
        self.matrix_ops: List[str] = []      # stmatrix/ldmatrix forms executed, in order
        self._values: Dict = {}
        self._masks: List[np.ndarray] = []
        self._mem: Dict[int, tuple] = {}     # byte address -> (byte, writer thread, epoch)
        # Start address -> (typed value, writer, epoch) of the last typed store there, for
        # tests that inspect the buffer element by element.
        self._smem: Dict[int, tuple] = {}
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
        from shared_codegen.lowering.context import _to_linear
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

    def unique_registers(self, ty: TensorType):
        mask = self.linear_layout(ty).get_free_variable_masks().get("register", 0)
        return [r for r in range(1 << len(self.linear_layout(ty).bases.get("register", [])))
                if not r & mask]

    def replication_predicate(self, ty: TensorType):
        masks = self.linear_layout(ty).get_free_variable_masks()
        pred = np.ones(self.nthreads, dtype=bool)
        for src, mask in ((self._lane.arr, masks.get("lane", 0)),
                          (self._warp.arr, masks.get("warp", 0))):
            pred &= (src & mask) == 0
        return None if pred.all() else SimVal(ir.IntType(1), pred)

    def request_shared(self, nbytes: int):
        self.shared_bytes = max(self.shared_bytes, int(nbytes))
        return SimVal(ir.PointerType(addrspace=3), np.zeros(self.nthreads, dtype=np.int64))

    def i32(self, value: int):
        return ir.Constant(ir.IntType(32), int(value))

    def end_op(self):
        """What LoweringContext.lower_op does after a rule returns: settle its scratch."""
        settle(self)

    def shared_base(self):
        return self.request_shared(0)

    def barrier(self):
        if self._masks:
            raise SimError("bar.sync inside a branch")
        self.barriers += 1
        self.barrier_count += 1
        self.barrier_block = self.builder.block
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

    _MATRIX = re.compile(r"llvm\.nvvm\.(st|ld)matrix\.sync\.aligned\.m8n8\.x([124])"
                         r"(\.trans)?\.b16(\.p3)?")

    def intrinsic(self, name, ret, args):
        """ldmatrix / stmatrix (PTX ISA 9.7.14.5.15 / 9.7.14.5.16), per warp: lanes 8i..8i+7
        give the row addresses of matrix i; lane T's word i holds the matrix elements
        (T / 4, 2 (T % 4) + e), e = 0 in the low half; `.trans` swaps row and column of
        where they sit in memory."""
        m = self._MATRIX.fullmatch(name)
        if m is None:
            raise SimError(f"intrinsic {name} is not simulated")
        if self._masks:
            raise SimError(f"{name} inside a branch (.sync.aligned needs every lane)")
        store, count, trans = m.group(1) == "st", int(m.group(2)), bool(m.group(3))
        self.matrix_ops.append(name)
        addr = args[0].arr.astype(np.int64)
        words = [to_raw(a.type, a.arr) for a in args[1:]] if store else None
        out = np.zeros((self.nthreads, count), dtype=np.int64)
        for w in range(self.num_warps):
            base = w * self.threads_per_warp
            rows = addr[base:base + 8 * count]
            if np.any(rows % 16):
                raise SimError(f"{name}: a row address is not 16-byte aligned")
            for i in range(count):
                for lane in range(32):
                    t = base + lane
                    for e in range(2):
                        row, col = lane // 4, 2 * (lane % 4) + e
                        if trans:
                            row, col = col, row
                        a = int(rows[8 * i + row]) + 2 * col
                        if store:
                            self._store_bytes(t, a, int(words[i][t]) >> (16 * e) & 0xFFFF, 2)
                        else:
                            out[t, i] |= self._load_bytes(t, a, 2) << (16 * e)
        if store:
            return None
        return SimVal(ret, out[:, 0] if isinstance(ret, ir.IntType) else out)

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

    def _store(self, addrs, raw, size: int):
        """Per active thread, `size` bytes of `raw` (little-endian) at its address."""
        raw = np.asarray(raw).astype(np.uint64)
        for t in np.nonzero(self._active())[0]:
            self._store_bytes(int(t), int(addrs[t]), int(raw[t]), size)

    def _store_bytes(self, t: int, addr: int, raw: int, size: int) -> None:
        for j in range(size):
            self._store_one(t, addr + j, raw >> (8 * j) & 0xFF)

    def _store_one(self, t: int, a: int, v: int) -> None:
        if not 0 <= a < self.shared_bytes:
            raise SimError(f"thread {t} stores outside scratch: byte {a}")
        prev = self._mem.get(a)
        if prev is not None and prev[2] == self._epoch and prev[1] != t and prev[0] != v:
            raise SimError(f"threads {prev[1]} and {t} store different values to byte "
                           f"{a} between barriers")
        readers = self._reads.get(a, set()) - {t}
        if readers:
            raise SimError(f"thread {t} overwrites byte {a} that thread "
                           f"{min(readers)} read since the last barrier")
        self._mem[a] = (v, t, self._epoch)

    def _load(self, addrs, size: int):
        return np.asarray([self._load_bytes(t, int(addrs[t]), size)
                           for t in range(self.nthreads)], dtype=np.uint64)

    def _load_bytes(self, t: int, addr: int, size: int) -> int:
        return sum(self._load_one(t, addr + j) << (8 * j) for j in range(size))

    def _load_one(self, t: int, a: int) -> int:
        entry = self._mem.get(a)
        if entry is None:
            raise SimError(f"thread {t} reads byte {a} that nobody wrote")
        if entry[2] == self._epoch and entry[1] != t:
            raise SimError(f"thread {t} reads byte {a} written by thread {entry[1]} "
                           f"without a barrier in between")
        self._reads.setdefault(a, set()).add(t)
        return entry[0]

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
