"""Programs of a grid run concurrently, interleaved at atomics and volatile loads.

By default the interpreter runs programs one after another, which is exact for kernels whose
programs do not wait on each other. A kernel that spins on another program's progress (a
lock taken with `atomic_cas`, a flag polled with `load(volatile=True)` or `atomic_add(p, 0)`:
split-K and stream-K fix-ups, decode reductions, semaphores) would hang that way. Such a
kernel, recognised by a `while` loop whose body or condition performs an atomic or a
volatile load, runs its programs concurrently instead (and any kernel does with
`SC_INTERPRET_CONCURRENT=1`): each program is a cooperative thread that runs until its next
atomic or volatile load, then hands over to the next program, round robin in program-id
order. Only the program holding the baton runs, so a run is deterministic.

At most `MAX_RESIDENT` programs are started at once; the next program starts when one
finishes, as the GPU schedules CTAs onto SMs in order. A kernel whose program waits for one
that is not resident hangs on the GPU as well, and is reported the same way.

A spin that can never complete is reported instead of hanging: when every running program
has repeated the same atomic or volatile load (same op, same addresses, same values read)
`SPIN_LIMIT` times in a row while no program wrote global memory, no program can change
what the others read, so the report names each program, the line it spins at and what it
reads.
"""

from __future__ import annotations

import threading
from typing import List, Optional

import numpy as np

from shared_codegen.errors import DeadlockError, InterpreterError
from shared_codegen.interpreter.baton import BatonScheduler, run_agent, start_agent_thread
from shared_codegen.ir.core import MemoryEffect

# Consecutive identical observations (per program, with no global write in between) after
# which a spin is declared never to complete.
SPIN_LIMIT = 100
# Programs running at once; later ones start as earlier ones finish.
MAX_RESIDENT = 128
# Hand-overs allowed in one launch before the run is stopped: a livelock guard (programs that
# keep writing, so no spin looks stuck, but never finish).
MAX_SWITCHES = 2_000_000


def is_sync_point(op) -> bool:
    """Where programs may switch: an atomic (reads and writes global memory), a volatile
    load, or an op that declares itself one (`sync_point`: a signal wait's polls)."""
    if getattr(op.opdef, "sync_point", False):
        return True
    effects = op.opdef.memory_effects if op.opdef is not None else frozenset()
    if MemoryEffect.READ_GLOBAL in effects and MemoryEffect.WRITE_GLOBAL in effects:
        return True
    return MemoryEffect.READ_GLOBAL in effects and bool(op.attrs.get("volatile"))


class Program:
    """One program of the grid: its frame, its thread and its last observation."""

    def __init__(self, grid: "ConcurrentGrid", pid, frame):
        self.grid, self.pid, self.frame = grid, pid, frame
        self.status = "waiting"      # waiting | running | yielded | done | failed
        self.error: Optional[BaseException] = None
        self.thread: Optional[threading.Thread] = None
        self.last = None             # (op, key, memory version) of the last sync point
        self.repeats = 0
        self.observed = ""           # what the last sync point read, for reports
        self.waiting = None          # what a signal wait waits for (ops/distributed)

    def describe(self) -> str:
        rank = getattr(self.frame, "rank", None)
        pid = self.frame.program_id if rank is not None else self.pid
        text = "program (" + ", ".join(str(p) for p in pid) + ")"
        return text if rank is None else f"rank {rank} {text}"

    # ---- called on the program's thread (from Memory at a sync point) -------------------
    def sync(self, op, ptrs, result, waiting: Optional[str] = None) -> None:
        """After an atomic or volatile load (or a poll of a signal wait, which says what it
        `waiting` for): note what it saw, then let others run."""
        memory = self.frame.memory
        key = (np.asarray(ptrs).tobytes(), np.asarray(result).tobytes())
        if self.last is not None and self.last[0] is op and self.last[1] == key \
                and self.last[2] == memory.version:
            self.repeats += 1
        else:
            self.repeats = 0
        self.last = (op, key, memory.version)
        self.waiting = waiting
        if self.repeats >= SPIN_LIMIT - 1:
            values = np.asarray(result).reshape(-1)
            shown = ", ".join(str(v) for v in values[:4]) + (", ..." if values.size > 4 else "")
            self.observed = f"reads {shown}"
        self.grid._yield_from(self, "yielded")

    def _main(self, run) -> None:
        run_agent(self.grid, self, run)


class ConcurrentGrid(BatonScheduler):
    """Round-robin cooperative scheduling of a grid's programs (see the module docstring)."""

    def __init__(self, program_ids, make_frame, run, max_resident: Optional[int] = None):
        # A world of simulated GPUs (interpreter/world.py) gives each rank its own SMs.
        super().__init__()
        self.max_resident = MAX_RESIDENT if max_resident is None else max_resident
        self.run_program = run
        self.programs: List[Program] = [Program(self, pid, make_frame(pid, None))
                                        for pid in program_ids]
        for prog in self.programs:
            prog.frame.program = prog

    def _start(self, prog: Program) -> None:
        start_agent_thread(prog, self.run_program, name=f"program-{prog.pid}")
        prog.status = "yielded"

    # ---- the run ---------------------------------------------------------------------------
    def run(self) -> None:
        queue = list(self.programs)
        resident: List[Program] = []
        switches = 0
        try:
            while queue or resident:
                switches += len(resident)
                if switches > MAX_SWITCHES:
                    raise InterpreterError(
                        f"the programs of the grid switched more than {MAX_SWITCHES} times "
                        f"at atomics and volatile loads without finishing (a livelock?); "
                        f"{len(resident)} still run, {len(queue)} never started")
                while queue and len(resident) < self.max_resident:
                    prog = queue.pop(0)
                    self._start(prog)
                    resident.append(prog)
                for prog in list(resident):
                    self._resume(prog)
                    if prog.status == "failed":
                        raise prog.error
                    if prog.status == "done":
                        resident.remove(prog)
                version = self.programs[0].frame.memory.version
                if resident and all(p.repeats >= SPIN_LIMIT and p.last[2] == version
                                    for p in resident):
                    raise self._deadlock(resident, waiting=len(queue))
        finally:
            self._abort_and_join(self.programs)

    def _deadlock(self, spinning: List[Program], waiting: int) -> InterpreterError:
        first = spinning[0].last[0]
        loc = first.loc
        where = f"{loc.file}:{loc.line}" if loc.line else "<kernel>"
        if all(prog.waiting for prog in spinning):
            return self._signal_deadlock(spinning, where, loc)
        lines = [f"{where}: deadlock: a spin loop never completes: every running program has "
                 f"repeated the same atomic or volatile load {SPIN_LIMIT} times with no "
                 f"store to global memory in between"]
        for prog in spinning:
            op = prog.last[0]
            at = f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"
            kind = "a volatile load" if op.attrs.get("volatile") else "an atomic"
            lines.append(f"  {prog.describe()} spins at {at}: {kind} that {prog.observed}")
            if op.loc.source_line:
                lines.append(f"      {op.loc.source_line.strip()}")
        done = len(self.programs) - len(spinning) - waiting
        lines.append(f"  {done} program{'s' if done != 1 else ''} returned"
                     + (f"; {waiting} more never started (at most {self.max_resident} run at once, "
                        f"as CTAs resident on the GPU)" if waiting else ""))
        error = DeadlockError("\n".join(lines))
        if loc.line:
            error.file, error.line = loc.file, loc.line
        return error

    def _signal_deadlock(self, spinning: List[Program], where, loc) -> InterpreterError:
        """Every running program waits on a signal (ops/distributed): name each wait."""
        lines = [f"{where}: deadlock: every running program waits on a signal that no running "
                 f"program will set ({SPIN_LIMIT} polls each with no store to global memory "
                 f"in between)"]
        for prog in spinning:
            op = prog.last[0]
            at = f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"
            lines.append(f"  {prog.describe()} at {at} {prog.waiting}")
            if op.loc.source_line:
                lines.append(f"      {op.loc.source_line.strip()}")
        done = len(self.programs) - len(spinning)
        lines.append(f"  {done} program{'s' if done != 1 else ''} returned")
        error = DeadlockError("\n".join(lines))
        if loc.line:
            error.file, error.line = loc.file, loc.line
        return error


__all__ = ["ConcurrentGrid", "Program", "is_sync_point", "SPIN_LIMIT", "MAX_RESIDENT",
           "MAX_SWITCHES"]
