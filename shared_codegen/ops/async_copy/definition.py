"""Asynchronous global -> shared copies (`cp.async`, sm_80+): issue, commit, wait.

    ttg.async_copy_global_to_local %ptrs, %mem [, %mask] {cache = ".cg"}
    ttg.async_commit_group
    ttg.async_wait {num = 1}

- `ttg.async_copy_global_to_local [ptr, mem, mask?]` starts copying the elements the pointer
  tensor addresses into the shared-memory view `mem` (same shape); masked-off elements are
  filled with zeros (`cp.async`'s src-size 0). Nothing is visible in shared memory yet.
- `ttg.async_commit_group` closes the copies issued since the last commit into a *group*.
- `ttg.async_wait {num}` blocks until at most `num` committed groups are still in flight
  (`cp.async.wait_group num`); then the data of all older groups is visible to the thread
  that waited. Other threads see it only after a barrier, as with any shared-memory write.
- `ttng.async_copy_mbarrier_arrive %bar {no_increment}` (`cp.async.mbarrier.arrive`, PTX ISA
  9.7.9.25.3.4): every thread makes the mbarrier track all the cp.async copies it issued
  before, committed or not, and arrives on it once they complete. Without `.noinc` the
  pending count is first raised by one, so the arrival changes nothing in the phase's count:
  it only holds the phase open until the copies land (the kernel arrives itself). With
  `.noinc` (Gluon's `increment_count=False`) each thread's arrival counts, so the barrier
  must expect one arrival per thread of the CTA (or of the warp-specialized partition).

PTX ISA 9.7.9.25 (cp.async, cp.async.commit_group, cp.async.wait_group) is the reference.

Interpreter: each program keeps a queue of committed groups and the copies not committed
yet. A copy reads global memory when it is issued (an ordering the hardware may choose) but
writes shared memory only when a wait retires its group. Until then its destination bytes
are *pending*: a `local_load` / `local_store` touching them is reported as a race with both
lines, and so is a second copy into them.

An mbarrier arrive (`_CopyArrival`) tracks the program's unretired copies; it is listed on
the barrier as in flight, lands at a random barrier op or at the latest when a wait needs the
phase (as TMA loads do, `ops/tma/definition.py`), and the wait that observes its phase
retires the copies: their data is then in shared memory.

Lowering is in `shared_codegen/ops/async_copy/lowering.py`.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import PointerType, SharedMemoryType, TensorType, int1
from shared_codegen.layouts.relations import OWN_LAYOUTS

READ_GLOBAL = MemoryEffect.READ_GLOBAL
WRITE_SHARED = MemoryEffect.WRITE_SHARED

COPY, COMMIT, WAIT = ("ttg.async_copy_global_to_local", "ttg.async_commit_group",
                      "ttg.async_wait")
MBARRIER_ARRIVE = "ttng.async_copy_mbarrier_arrive"
CACHE_MODIFIERS = ("", ".ca", ".cg")
EVICTION_POLICIES = ("", "evict_first", "evict_last", "evict_normal")


def normalize_cache_modifier(cache_modifier: str) -> str:
    """Triton spells cache modifiers ".ca" / ".cg"; accept "ca" / "cg" too."""
    cm = str(cache_modifier or "")
    if cm and not cm.startswith("."):
        cm = "." + cm
    if cm not in CACHE_MODIFIERS:
        raise ValueError(f"cp.async supports cache_modifier '', '.ca' or '.cg', got "
                         f"{cache_modifier!r}")
    return cm


def check_async_copy(mem_ty, ptr_ty, mask_ty=None) -> None:
    """ValueError, in the user's terms, unless `ptr_ty` can be copied into `mem_ty`."""
    if not isinstance(mem_ty, SharedMemoryType):
        raise ValueError(f"the destination must be a shared memory descriptor, got {mem_ty}")
    if not isinstance(ptr_ty, TensorType) or not isinstance(ptr_ty.element, PointerType):
        raise ValueError(f"the source must be a tensor of pointers, got {ptr_ty}")
    if tuple(ptr_ty.shape) != tuple(mem_ty.shape):
        raise ValueError(f"expected smem shape to match pointer shape but got smem.shape = "
                         f"{list(mem_ty.shape)}, pointer.shape = {list(ptr_ty.shape)}")
    if ptr_ty.element.element != mem_ty.element:
        raise ValueError(f"pointer element type {ptr_ty.element.element} does not match the "
                         f"shared memory element type {mem_ty.element}")
    if mask_ty is not None:
        if not isinstance(mask_ty, TensorType) or mask_ty.element != int1 or \
                tuple(mask_ty.shape) != tuple(ptr_ty.shape):
            raise ValueError(f"mask must be an i1 tensor of shape {list(ptr_ty.shape)}, got "
                             f"{mask_ty}")
        if mask_ty.layout != ptr_ty.layout:
            raise ValueError(f"mask layout {mask_ty.layout!r} differs from the pointer layout "
                             f"{ptr_ty.layout!r}")


# ---- interpreter state ----------------------------------------------------------------------

class _PendingBytes:
    """Per shared buffer: which bytes an unretired async op still owns. SharedView consults
    it on every access (`ops/shared_memory/interpreter.py`).

    cp.async copies use positive ids (per program). Other async families (TMA,
    `shared_codegen/ops/tma/definition.py`) use negative ids and `describe` their own message: what the op
    is, the advice, and whether it only *reads* the bytes (then reads do not race)."""

    def __init__(self, nbytes: int):
        self.owner = np.zeros(nbytes, dtype=np.int64)  # op id, 0 when none
        self.where: Dict[int, str] = {}
        self.described: Dict[int, tuple] = {}  # id -> (noun, verb, advice, reads_only)

    def describe(self, op_id: int, where: str, noun: str, verb: str, advice: str,
                 reads_only: bool = False) -> None:
        self.where[op_id] = where
        self.described[op_id] = (noun, verb, advice, reads_only)

    def check(self, idx, frame, op, what=None, reading=None) -> None:
        hit = self.owner[idx]
        if not hit.any():
            return
        if reading is None:
            reading = op.name == "ttg.local_load"
        ids = [int(i) for i in np.unique(hit[hit != 0])]
        if reading:
            ids = [i for i in ids if not self.described.get(i, (0, 0, 0, False))[3]]
            if not ids:
                return
        copy = int(hit[np.isin(hit, ids)][0])
        what = what or {"ttg.local_load": "local_load reads",
                        "ttg.local_store": "local_store writes"}.get(op.name,
                                                                     f"{op.name} accesses")
        if copy in self.described:
            noun, verb, advice, _ = self.described[copy]
            frame.error(op, f"race: {what} shared memory that the {noun} at "
                            f"{self.where[copy]} may still be {verb}; {advice}")
        frame.error(op, f"race: {what} shared memory that the async copy at "
                        f"{self.where[copy]} may still be writing; wait for its group first "
                        f"(async_copy.commit_group() after the copy, then "
                        f"async_copy.wait_group(n) with n small enough to retire it)")


class _Copy:
    __slots__ = ("view", "idx", "raw", "id", "where", "retired")

    def __init__(self, view, idx, raw, copy_id, where):
        self.view, self.idx, self.raw, self.id, self.where = view, idx, raw, copy_id, where
        self.retired = False

    def retire(self) -> None:
        # Once only: a wait_group and an mbarrier wait may both retire the same copy, and
        # the second must not overwrite what the kernel stored since.
        if self.retired:
            return
        self.retired = True
        buf = self.view.buffer
        buf.data[self.idx] = self.raw
        buf.written[self.idx] = True
        pending = buf.async_pending
        mine = pending.owner[self.idx] == self.id
        pending.owner[self.idx[mine]] = 0


class AsyncState:
    """One program's copies: `open` (not committed yet) and committed `groups`, oldest first."""

    _KEY = object()  # stored in frame.values, which every program starts empty

    def __init__(self):
        self.open: List[_Copy] = []
        self.groups: List[List[_Copy]] = []
        self.next_id = 1

    @classmethod
    def of(cls, frame) -> "AsyncState":
        state = frame.values.get(cls._KEY)
        if state is None:
            state = frame.values[cls._KEY] = cls()
        return state

    def unretired(self) -> List[_Copy]:
        """Every copy issued and not yet retired, committed or not (what an mbarrier arrive
        tracks)."""
        copies = list(self.open)
        for group in self.groups:
            copies.extend(group)
        return [c for c in copies if not c.retired]


class _CopyArrival:
    """A `cp.async.mbarrier.arrive` of all the program's threads: `arrivals` arrivals on
    `barrier` once `copies` complete; the wait that observes the phase retires the copies."""

    def __init__(self, barrier, copies: List[_Copy], arrivals: int, frame, op):
        self.barrier, self.copies, self.arrivals = barrier, copies, arrivals
        self.frame, self.op, self.where = frame, op, _where(op)
        self.phase_landed = None

    def land(self) -> None:
        if self.phase_landed is not None:  # already landed (a stale progress list)
            return
        from shared_codegen.ops.mbarrier.definition import ENGINE_KEY
        engine = self.frame.values.get(ENGINE_KEY)
        if engine is not None and self in engine.loads:
            engine.loads.remove(self)
        barrier = self.barrier
        barrier.in_flight.remove(self)
        barrier.landed.append(self)
        self.phase_landed = barrier.phase
        # The happens-before release was recorded at the arrive op (as for tcgen05_commit),
        # so the arrival itself only counts here.
        if self.arrivals > barrier.pending:
            self.frame.error(self.op, f"mbarrier arrive of count {self.arrivals} on "
                                      f"{barrier.describe()}, whose phase {barrier.phase} has "
                                      f"only {barrier.pending} of {barrier.count} arrivals "
                                      f"pending (PTX leaves this undefined)")
        barrier.pending -= self.arrivals
        barrier._maybe_complete()

    def retire(self) -> None:
        for copy in self.copies:
            copy.retire()


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


# ---- ops ------------------------------------------------------------------------------------

class AsyncCopyGlobalToLocalOp(OpDef):
    """`ttg.async_copy_global_to_local [ptr, mem, mask?] {cache, evict, volatile}`."""

    name = COPY
    layout_rule = OWN_LAYOUTS
    memory_effects = frozenset({READ_GLOBAL, WRITE_SHARED})

    @staticmethod
    def build(b, ptr, mem, mask=None, cache_modifier="", eviction_policy="", volatile=False):
        attrs = {"has_mask": mask is not None}
        cm = normalize_cache_modifier(cache_modifier)
        if cm:
            attrs["cache"] = cm
        if eviction_policy:
            attrs["evict"] = eviction_policy
        if volatile:
            attrs["volatile"] = True
        operands = [ptr, mem] + ([mask] if mask is not None else [])
        return b.create(COPY, operands, [], attrs)

    @staticmethod
    def parts(op):
        mask = op.operands[2] if op.attrs.get("has_mask") else None
        return op.operands[0], op.operands[1], mask

    def print_attrs(self, op):
        return format_attrs({k: v for k, v in op.attrs.items() if k != "has_mask"})

    def verify(self, op):
        ptr, mem, mask = self.parts(op)
        if len(op.operands) != 2 + bool(mask is not None):
            raise VerificationError("expected operands [ptr, mem, mask?]", op)
        try:
            check_async_copy(mem.type, ptr.type, None if mask is None else mask.type)
            normalize_cache_modifier(op.attrs.get("cache", ""))
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if op.attrs.get("evict", "") not in EVICTION_POLICIES:
            raise VerificationError(f"unknown eviction policy {op.attrs['evict']!r}", op)
        if ptr.type.layout is None:
            raise VerificationError("the pointer tensor needs a distributed layout", op)

    def interpret(self, op, frame):
        ptr, mem, mask = self.parts(op)
        view = frame[mem]
        elem = mem.type.element
        values = frame.memory.load(frame[ptr], None if mask is None else frame[mask], None,
                                   elem, frame, op)
        dtype = np.dtype(elem.np)
        buf = view.buffer
        if buf.freed_at is not None:
            frame.error(op, f"async copy into shared memory allocated at {buf.where} after "
                            f"ttg.local_dealloc at {buf.freed_at}")
        idx = (view.offsets[..., None] + np.arange(dtype.itemsize, dtype=np.int64)).reshape(-1)
        pending = getattr(buf, "async_pending", None)
        if pending is None:
            pending = buf.async_pending = _PendingBytes(buf.data.size)
        pending.check(idx, frame, op, "this async copy targets")
        state = AsyncState.of(frame)
        raw = np.ascontiguousarray(np.asarray(values, dtype=dtype)).view(np.uint8).reshape(-1)
        copy = _Copy(view, idx, raw, state.next_id, _where(op))
        state.next_id += 1
        pending.owner[idx] = copy.id
        pending.where[copy.id] = copy.where
        state.open.append(copy)
        return []


class AsyncCommitGroupOp(OpDef):
    """`ttg.async_commit_group`: the copies issued since the last commit form one group."""

    name = COMMIT
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b):
        return b.create(COMMIT, [], [])

    def interpret(self, op, frame):
        state = AsyncState.of(frame)
        state.groups.append(state.open)
        state.open = []
        return []


class AsyncWaitOp(OpDef):
    """`ttg.async_wait {num}`: wait until at most `num` committed groups are in flight."""

    name = WAIT
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, num: int):
        return b.create(WAIT, [], [], {"num": int(num)})

    def verify(self, op):
        num = op.attrs.get("num")
        if not isinstance(num, int) or isinstance(num, bool) or num < 0:
            # cp.async.wait_group takes an immediate, so the count is a compile-time int.
            raise VerificationError(f"num_outstanding must be a non-negative int, got {num!r}",
                                    op)

    def interpret(self, op, frame):
        state = AsyncState.of(frame)
        while len(state.groups) > op.attrs["num"]:
            for copy in state.groups.pop(0):
                copy.retire()
        return []


class AsyncCopyMbarrierArriveOp(OpDef):
    """`ttng.async_copy_mbarrier_arrive %bar {no_increment}`: arrive on the barrier once this
    thread's earlier cp.async copies complete (see the module docstring)."""

    name = MBARRIER_ARRIVE
    layout_rule = OWN_LAYOUTS
    user_name = "async_copy.mbarrier_arrive"
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, bar, increment_count: bool = True):
        return b.create(MBARRIER_ARRIVE, [bar], [], {"no_increment": not increment_count})

    def verify(self, op):
        from shared_codegen.ops.mbarrier.definition import check_barrier
        if len(op.operands) != 1:
            raise VerificationError("expected operands [bar]", op)
        try:
            check_barrier(op.operands[0].type)
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None

    def interpret(self, op, frame):
        from shared_codegen.ops.mbarrier.definition import barrier_state, progress
        from shared_codegen.ops.tma.definition import _Engine
        progress(frame)
        barrier = barrier_state(frame, op, frame[op.operands[0]])
        barrier._require_valid(frame, op)
        if op.attrs.get("no_increment"):
            # Every thread of the CTA (or of the partition running it) arrives once.
            warps = frame.partition.warps if frame.partition is not None else frame.num_warps
            arrivals = 32 * int(warps)
        else:
            # The pending count goes up by one now and down by one when the copies land.
            barrier.pending += 1
            arrivals = 1
        hb = current_hb(frame)
        if hb is not None:  # the arriving partition's earlier work is ordered before waiters
            hb.release(frame, op, barrier, carry=True)
        arrival = _CopyArrival(barrier, AsyncState.of(frame).unretired(), arrivals, frame, op)
        barrier.in_flight.append(arrival)
        _Engine.of(frame).loads.append(arrival)  # lands at a random progress point
        return []


__all__ = ["AsyncCopyGlobalToLocalOp", "AsyncCommitGroupOp", "AsyncWaitOp", "AsyncState",
           "AsyncCopyMbarrierArriveOp",
           "check_async_copy", "normalize_cache_modifier"]
