"""mbarrier ops (sm_90): barriers in shared memory that count arrivals and transaction bytes.

    %bar = ttg.local_alloc : !ttg.memdesc<1xi64, #shared>     (MBarrierLayout)
    ttng.init_barrier %bar {count = 1}
    ttng.barrier_expect %bar[, %pred] {size = 16384}
    ttng.arrive_barrier %bar[, %pred] {count = 1}
    ttng.wait_barrier %bar, %phase[, %pred][, %deps...] {has_pred, num_deps}
    ttng.inval_barrier %bar

Semantics (PTX ISA 9.7.13.15, "Parallel synchronization and communication instructions:
mbarrier"). A barrier is a 64-bit shared-memory object holding the *current phase*, its
*pending arrival count* and its *transaction count* (tx-count). `init(count)` starts phase 0
with `count` pending arrivals and tx-count 0. `arrive(count)` removes arrivals;
`expect(bytes)` is `mbarrier.arrive.expect_tx`: it raises the tx-count by `bytes` and then
arrives once. TMA loads (`ops/tma/definition.py`) lower the tx-count by the bytes they
land (`complete_tx`). A phase completes when both counts reach zero; the barrier then moves to the
next phase with `count` pending arrivals again. `wait(phase)` blocks while the *current*
phase has parity `phase` (`mbarrier.try_wait.parity`): waiting on parity 0 of a fresh
barrier blocks until phase 0 completes, waiting on parity 1 returns at once.

Interpreter: the state above is exact, per barrier (buffer, byte offset), per program. A wait
whose phase cannot complete first lands the TMA loads still in flight on that barrier (they
must complete before the wait can return); if the phase is still open and only one partition
runs, no one else can arrive, and the wait is reported as a deadlock naming the barrier's
allocation, the wait's line and the phase, instead of hanging. Inside `gl.warp_specialize`
the wait switches to another partition instead (`ops/warp_specialize/interpreter.py`), which
reports the deadlock once every partition is blocked.

Lowering (`lowering.py`): inline PTX. Thread 0 (of the partition, under warp specialization)
initializes, expects, arrives and invalidates (one arrival per call, as Triton does); every
thread waits in a `try_wait.parity` loop. Barrier words are shared memory: `init` / `inval`
count as writes and the others as reads for the barrier insertion of
`ops/shared_memory/lowering.sync_shared`, so the `bar.sync` that makes an `init` visible to
the other threads' waits comes from the same analysis as any other store.
"""

from __future__ import annotations

from typing import List, Optional

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import SharedMemoryType, TensorType, int1, int32, int64
from shared_codegen.layouts import SwizzledSharedLayout
from shared_codegen.layouts.relations import OWN_LAYOUTS

READ_SHARED = MemoryEffect.READ_SHARED
WRITE_SHARED = MemoryEffect.WRITE_SHARED

INIT, EXPECT, ARRIVE, WAIT, INVAL = ("ttng.init_barrier", "ttng.barrier_expect",
                                     "ttng.arrive_barrier", "ttng.wait_barrier",
                                     "ttng.inval_barrier")
# PTX: the tx-count of a phase lies in [-(2^20 - 1), 2^20 - 1], the arrival count in
# [1, 2^20 - 1].
MAX_COUNT = (1 << 20) - 1


def _user_name(op) -> str:
    """How reports name the op: the Gluon builtin's name (each op's `user_name` trait)."""
    return (op.opdef.user_name if op.opdef is not None else None) or op.name


class MBarrierLayout(SwizzledSharedLayout):
    """The shared layout of mbarrier words: one int64 per barrier, no swizzle (Triton's
    `MBarrierLayout`). Allocate barriers with
    `gl.allocate_shared_memory(gl.int64, [1], MBarrierLayout())` (or `[n, 1]` for n of them,
    then `.index(i)`)."""

    def __init__(self, cga_layout=None):
        super().__init__(1, 1, 1, (0,), tuple(cga_layout or ()))

    def __repr__(self):
        return "MBarrierLayout()" if not self.cga_layout else \
            f"MBarrierLayout(cga_layout={[list(b) for b in self.cga_layout]})"


# ---- checks ----------------------------------------------------------------------------------

def check_barrier(ty, what: str = "mbarrier") -> None:
    """ValueError unless `ty` is a descriptor of one int64 barrier word."""
    if not isinstance(ty, SharedMemoryType) or ty.element != int64 or ty.numel != 1:
        raise ValueError(f"{what} must be a shared memory descriptor of one int64 "
                         f"(gl.allocate_shared_memory(gl.int64, [1], MBarrierLayout())), got "
                         f"{ty}")


def check_count(value, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise ValueError(f"{what} must be a compile-time int in [{low}, {MAX_COUNT}], got "
                         f"{value!r}")
    return value


def _check_pred(op, value) -> None:
    if value.type != int1:
        raise VerificationError(f"pred must be an i1 scalar, got {value.type}", op)


def _verify_bar(op) -> None:
    try:
        check_barrier(op.operands[0].type)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None


def _verify_counted_arrival(op, attr: str, what: str, low: int = 1) -> None:
    """Shared by expect and arrive: operands [bar, pred?] and a non-negative count attribute."""
    _verify_bar(op)
    if len(op.operands) != 1 + bool(op.attrs.get("has_pred")):
        raise VerificationError("expected operands [bar, pred?]", op)
    if op.attrs.get("has_pred"):
        _check_pred(op, op.operands[1])
    try:
        check_count(op.attrs.get(attr), what, low=low)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None


def pred_of(op, index: int):
    return op.operands[index] if op.attrs.get("has_pred") else None


# ---- interpreter state -----------------------------------------------------------------------

class BarrierState:
    """One barrier's state in one program (see the module docstring)."""

    def __init__(self, where: str, index: Optional[int]):
        self.where = where          # the allocation's line
        self.index = index          # which barrier of a multi-barrier allocation, else None
        self.valid = False
        self.count = 0              # arrivals per phase
        self.pending = 0            # arrivals still missing in the current phase
        self.tx = 0                 # transaction bytes still missing in the current phase
        self.phase = 0              # completed phases; the current phase's parity is phase % 2
        self.in_flight: List = []   # async ops that will complete_tx on this barrier (TMA)
        self.landed: List = []      # ... landed, waiting for a wait to observe their phase

    def describe(self) -> str:
        which = "" if self.index is None else f" (barrier {self.index})"
        return f"the mbarrier allocated at {self.where}{which}"

    def named(self) -> str:
        """`bars[1]` (allocated at k.py:12), by the kernel's variable when it has one."""
        name = getattr(self, "name", "")
        if not name:
            return self.describe()
        which = "" if self.index is None else f"[{self.index}]"
        return f"`{name}{which}` (allocated at {self.where})"

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, count: int, frame, op, remote: bool = False) -> None:
        self._require_valid(frame, op)
        # (A peer CTA's arrival: partitions' clocks are per CTA, so it releases nothing
        # the happens-before detector tracks.)
        hb = None if remote else current_hb(frame)
        if hb is not None:  # the arriving partition releases what it did so far
            hb.release(frame, op, self)
        if count > self.pending:
            frame.error(op, f"mbarrier arrive of count {count} on {self.describe()}, whose "
                            f"phase {self.phase} has only {self.pending} of {self.count} "
                            f"arrivals pending (PTX leaves this undefined)")
        self.pending -= count
        self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes

    def complete_tx(self, nbytes: int) -> int:
        """Bytes landed by an async op; returns the phase they landed in."""
        landed_in = self.phase
        self.tx -= nbytes
        self._maybe_complete()
        return landed_in

    def _require_valid(self, frame, op) -> None:
        if not self.valid:
            frame.error(op, f"{_user_name(op)} on {self.describe()}, which "
                            f"is not initialized "
                            f"(mbarrier.init first, and not after mbarrier.invalidate)")


def barrier_state(frame, op, view) -> BarrierState:
    """The state of the barrier a descriptor value (`SharedView`) points at."""
    buf = view.buffer
    if buf.freed_at is not None:
        frame.error(op, f"{_user_name(op)} on an mbarrier allocated at "
                        f"{buf.where} after "
                        f"ttg.local_dealloc at {buf.freed_at}")
    states = getattr(buf, "mbarriers", None)
    if states is None:
        states = buf.mbarriers = {}
    offset = int(view.offsets.reshape(-1)[0])
    state = states.get(offset)
    if state is None:
        index = offset // 8 if buf.data.size > 8 else None
        state = states[offset] = BarrierState(buf.where, index)
        state.name = getattr(buf, "name", "")
        if _strict():
            _at_program_end(frame, state)
    return state


def _strict() -> bool:
    from shared_codegen import config
    return bool(config.get("SC_INTERPRET_STRICT"))


def _at_program_end(frame, state: BarrierState) -> None:
    """Strict mode: when the program returns, `state` must not have a TMA load in flight
    (the CTA would exit while the copy still writes its shared memory) nor a phase whose
    transaction bytes never matched what mbarrier.expect announced."""
    from shared_codegen.interpreter.run import PROGRAM_END_KEY

    def check(frame):
        if not state.valid:
            return
        if state.in_flight:
            load = state.in_flight[0]
            raise _program_end_error(frame, f"the program returned while the async operation at "
                                            f"{load.where} was still in flight on "
                                            f"{state.describe()}: no mbarrier.wait observed "
                                            f"the phase it completes")
        if state.tx != 0:
            raise _program_end_error(frame, f"the program returned with phase {state.phase} "
                                            f"of {state.describe()} unmatched: {lacks(state)}")

    frame.values.setdefault(PROGRAM_END_KEY, []).append(check)


def _program_end_error(frame, message: str):
    from shared_codegen.interpreter.memory import InterpreterError
    pid = ", ".join(str(int(p)) for p in frame.program_id)
    return InterpreterError(f"{message} (program id ({pid}))")


# frame.values key of the program's async engine (`tma._Engine`): in-flight TMA ops and the
# seeded generator that decides when they land.
ENGINE_KEY = object()


def progress(frame) -> None:
    """A point where in-flight async ops may land (each barrier op is one)."""
    engine = frame.values.get(ENGINE_KEY)
    if engine is not None:
        engine.progress()


def _active(frame, pred) -> bool:
    return pred is None or bool(frame[pred])


def _observe(state: BarrierState) -> None:
    """A wait returned having seen phases [0, state.phase) complete: async ops that landed in
    them are now visible to the waiting threads."""
    keep = []
    for landed in state.landed:
        if landed.phase_landed < state.phase:
            landed.retire()
        else:
            keep.append(landed)
    state.landed = keep


def lacks(state: BarrierState) -> str:
    """Why the current phase of `state` is still open, for deadlock reports."""
    missing = []
    if state.pending:
        missing.append(f"{state.pending} of {state.count} arrivals")
    if state.tx > 0:
        missing.append(f"{state.tx} transaction bytes")
    why = f"the phase still lacks {' and '.join(missing)}" if missing else ""
    if state.tx < 0:
        why += (", and " if why else "") + (
            f"the phase received {-state.tx} transaction bytes more than "
            f"mbarrier.expect announced")
    return why


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


# ---- ops -------------------------------------------------------------------------------------

class InitBarrierOp(OpDef):
    """`ttng.init_barrier %bar {count}`: phase 0, `count` arrivals pending, tx-count 0
    (PTX ISA 9.7.13.15.9 mbarrier.init)."""

    name = INIT
    layout_rule = OWN_LAYOUTS
    user_name = "mbarrier.init"
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, bar, count: int):
        return b.create(INIT, [bar], [], {"count": int(count)})

    def verify(self, op):
        _verify_bar(op)
        try:
            check_count(op.attrs.get("count"), "count")
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None

    def interpret(self, op, frame):
        state = barrier_state(frame, op, frame[op.operands[0]])
        if state.valid:
            frame.error(op, f"mbarrier.init on {state.describe()}, which is already "
                            f"initialized (mbarrier.invalidate it first)")
        state.valid, state.count, state.pending, state.tx = True, op.attrs["count"], \
            op.attrs["count"], 0
        state.phase = 0
        return []


class BarrierExpectOp(OpDef):
    """`ttng.barrier_expect %bar[, %pred] {size}`: tx-count += size, then one arrival
    (PTX ISA 9.7.13.15.12 mbarrier.arrive with .expect_tx)."""

    name = EXPECT
    layout_rule = OWN_LAYOUTS
    user_name = "mbarrier.expect"
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, bar, size: int, pred=None):
        return b.create(EXPECT, [bar] + ([pred] if pred is not None else []), [],
                        {"size": int(size), "has_pred": pred is not None})

    def print_attrs(self, op):
        return format_attrs({"size": op.attrs["size"]})

    def verify(self, op):
        _verify_counted_arrival(op, "size", "the expected byte count", low=0)

    def interpret(self, op, frame):
        progress(frame)
        if not _active(frame, pred_of(op, 1)):
            return []
        state = barrier_state(frame, op, frame[op.operands[0]])
        state._require_valid(frame, op)
        state.expect_tx(op.attrs["size"])
        state.arrive(1, frame, op)
        return []


class ArriveBarrierOp(OpDef):
    """`ttng.arrive_barrier %bar[, %pred] {count, from_cta?}`: `count` arrivals on the current
    phase (PTX ISA 9.7.13.15.12 mbarrier.arrive). In a cluster (`num_ctas > 1`), `from_cta`
    is Triton's mask of the CTA-id bits kept when routing the arrival: CTA r arrives on the
    barrier at the same offset in CTA `r & from_cta` (`mapa` + `.shared::cluster`); the
    default, every bit, is the CTA's own barrier. `multicast_cta` (Triton 3.9's Rubin
    spelling) arrives on the barrier of every CTA c with `c & ~m == r & ~m`, itself included:
    the CTAs that differ from r only in the bits of m. `per_warp`: every warp running the
    op arrives `count` times (lane 0 of each, no barrier first), instead of one thread for
    all after a barrier of them."""

    name = ARRIVE
    layout_rule = OWN_LAYOUTS
    user_name = "mbarrier.arrive"
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, bar, count: int = 1, pred=None, from_cta=None, multicast_cta: int = 0,
              per_warp: bool = False):
        attrs = {"count": int(count), "has_pred": pred is not None}
        if per_warp:
            attrs["per_warp"] = True
        if from_cta is not None:
            attrs["from_cta"] = int(from_cta)
        if multicast_cta:
            attrs["multicast_cta"] = int(multicast_cta)
        return b.create(ARRIVE, [bar] + ([pred] if pred is not None else []), [], attrs)

    def print_attrs(self, op):
        return format_attrs({k: op.attrs[k] for k in ("count", "from_cta", "multicast_cta",
                                                      "per_warp") if k in op.attrs})

    def verify(self, op):
        _verify_counted_arrival(op, "count", "count")

    def interpret(self, op, frame):
        progress(frame)
        if not _active(frame, pred_of(op, 1)):
            return []
        view = frame[op.operands[0]]
        count = op.attrs["count"]
        if op.attrs.get("per_warp"):  # every warp of the partition (or the CTA) arrives
            part = getattr(frame, "partition", None)
            count *= part.warps if part is not None else frame.num_warps
        if frame.cluster is None:
            barrier_state(frame, op, view).arrive(count, frame, op)
            return []
        for dest in arrival_targets(frame.cta_rank, frame.cluster.size, op.attrs):
            if dest == frame.cta_rank:
                barrier_state(frame, op, view).arrive(count, frame, op)
                continue
            from shared_codegen.ops.tma.multicast import peer_view
            peer = peer_view(frame, op, view, dest, "mbarrier.arrive on a barrier of")
            state = barrier_state(frame.cluster.frame_of(dest), op, peer)
            state.arrive(count, frame, op, remote=True)
        return []


def arrival_targets(rank: int, num_ctas: int, attrs) -> List[int]:
    """The CTAs whose barrier an `arrive_barrier` of CTA `rank` signals (see the op)."""
    multicast = attrs.get("multicast_cta", 0)
    if multicast:
        return [c for c in range(num_ctas) if c & ~multicast == rank & ~multicast]
    mask = attrs.get("from_cta")
    return [rank if mask is None else rank & mask]


class WaitBarrierOp(OpDef):
    """`ttng.wait_barrier %bar, %phase[, %pred][, %deps...]`: block while the current
    phase has parity `phase` (PTX ISA 9.7.13.15.16 mbarrier.test_wait/try_wait). `deps` are
    the allocations the wait guards: operands only, so they stay allocated until here."""

    name = WAIT
    layout_rule = OWN_LAYOUTS
    user_name = "mbarrier.wait"
    memory_effects = frozenset({READ_SHARED})

    @staticmethod
    def build(b, bar, phase, pred=None, deps=()):
        operands = [bar, phase] + ([pred] if pred is not None else []) + list(deps)
        return b.create(WAIT, operands, [], {"has_pred": pred is not None,
                                             "num_deps": len(deps)})

    @staticmethod
    def parts(op):
        pred = op.operands[2] if op.attrs.get("has_pred") else None
        first = 3 if pred is not None else 2
        return op.operands[0], op.operands[1], pred, op.operands[first:]

    def print_attrs(self, op):
        return ""

    def verify(self, op):
        _verify_bar(op)
        bar, phase, pred, deps = self.parts(op)
        if len(deps) != op.attrs.get("num_deps", 0):
            raise VerificationError("expected operands [bar, phase, pred?, deps...]", op)
        if isinstance(phase.type, TensorType) or phase.type != int32:
            raise VerificationError(f"phase must be an i32 scalar, got {phase.type}", op)
        if pred is not None:
            _check_pred(op, pred)
        for d in deps:
            if not isinstance(d.type, SharedMemoryType):
                raise VerificationError(f"deps must be shared memory descriptors, got "
                                        f"{d.type}", op)

    def interpret(self, op, frame):
        bar, phase, pred, _ = self.parts(op)
        progress(frame)
        if not _active(frame, pred):
            return []
        state = barrier_state(frame, op, frame[bar])
        state._require_valid(frame, op)
        parity = int(frame[phase]) & 1
        while True:
            # The async ops signalling this barrier complete before the wait returns (at the
            # latest); one at a time, oldest first, until the phase is over.
            while state.phase % 2 == parity and state.in_flight:
                state.in_flight[0].land()
            if state.phase % 2 != parity:
                break
            if frame.partition is None and frame.cluster is not None:
                # A peer CTA of the cluster may still arrive or multicast onto it: run the
                # others until the phase can complete (interpreter/cluster.py).
                frame.cluster.block(frame, _phase_can_end(state, parity),
                                    _waits_for(op, state, parity))
                continue
            if frame.partition is None:
                frame.error(op, f"deadlock: mbarrier.wait for phase {parity} of "
                                f"{state.describe()} can never return: {lacks(state)}; no "
                                f"async copy in flight will arrive on it, and no other "
                                f"partition is running")
            # Warp-specialized: another partition may still arrive. Switch to it; the
            # scheduler resumes this wait once the phase can complete, or reports a deadlock
            # when every partition is blocked (ops/warp_specialize/interpreter.py).
            frame.partition.block(op, state, parity)
        _observe(state)
        hb = current_hb(frame)
        if hb is not None:  # the waiter acquires what the phase's arrivals released
            hb.acquire(frame, state)
        return []


def _phase_can_end(state: BarrierState, parity: int):
    """Whether a wait for `parity` on `state` may go on: the phase is over, or an async op in
    flight will signal it."""
    return lambda: state.phase % 2 != parity or bool(state.in_flight)


def _waits_for(op, state: BarrierState, parity: int):
    """What a blocked wait says in a deadlock report."""
    def text() -> str:
        line = f"waits at {_where(op)} for phase {parity} of {state.describe()}: {lacks(state)}"
        if op.loc.source_line:
            line += f"\n      {op.loc.source_line.strip()}"
        return line
    return text


class InvalBarrierOp(OpDef):
    """`ttng.inval_barrier %bar`: the word stops being a barrier and may be reused as
    ordinary shared memory (PTX ISA 9.7.13.15.10 mbarrier.inval)."""

    name = INVAL
    layout_rule = OWN_LAYOUTS
    user_name = "mbarrier.invalidate"
    memory_effects = frozenset({WRITE_SHARED})

    @staticmethod
    def build(b, bar):
        return b.create(INVAL, [bar], [])

    def verify(self, op):
        _verify_bar(op)

    def interpret(self, op, frame):
        state = barrier_state(frame, op, frame[op.operands[0]])
        state._require_valid(frame, op)
        if state.in_flight:
            frame.error(op, f"mbarrier.invalidate on {state.describe()} while the TMA load at "
                            f"{state.in_flight[0].where} will still signal it")
        if state.tx != 0:
            frame.error(op, f"mbarrier.invalidate on {state.describe()} while its phase "
                            f"{state.phase} has pending transactions: {lacks(state)}")
        state.valid = False
        return []


__all__ = ["MBarrierLayout", "InitBarrierOp", "BarrierExpectOp", "ArriveBarrierOp",
           "WaitBarrierOp", "InvalBarrierOp", "BarrierState", "barrier_state",
           "check_barrier", "check_count", "progress", "lacks", "ENGINE_KEY",
           "MAX_COUNT"]
