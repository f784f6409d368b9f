"""Warp-specialized partitions in the interpreter: cooperative threads that switch at
mbarrier waits.

Each partition of a `ttg.warp_specialize` runs its region in its own Python thread with its
own `Frame` (sharing the program's SSA values, memory and async engine), but only the thread
holding the baton runs: the scheduler (the calling thread) hands the baton to one partition
and gets it back when that partition blocks or returns. A partition blocks in
`mbarrier.wait` when the phase it waits for is still open and no TMA load in flight on the
barrier could close it; it becomes runnable again once the phase completes or a load is in
flight on it (the wait lands it). The scheduler picks the next runnable partition round
robin, the default partition first, so a run is deterministic for a given
`SC_INTERPRET_SEED`.

When every unfinished partition is blocked, nothing can ever arrive: the scheduler reports a
deadlock naming each partition, the barrier (its allocation line) and phase it waits for and
the line of its wait, instead of hanging. A partition's own barriers (`gl.thread_barrier`,
the named barrier of its warps) never block here: a partition runs whole tiles at a time, so
all its threads are always at the same point.

Races across partitions (reading a buffer an in-flight TMA load or wgmma still owns) are the
same reports as within one partition: the ownership records live on the shared buffers.
"""

from __future__ import annotations

import threading
from typing import List, Optional

from shared_codegen.errors import DeadlockError
from shared_codegen.interpreter.baton import BatonScheduler, run_agent, start_agent_thread
from shared_codegen.interpreter.happens_before import HB_KEY, HappensBefore
from shared_codegen.interpreter.memory import InterpreterError

# Switches between partitions allowed per warp_specialize before the run is stopped (a
# livelock guard; a real pipeline switches a few times per stage and iteration).
MAX_SWITCHES = 200_000


class Partition:
    """One partition: its region, its frame and where it is blocked."""

    def __init__(self, scheduler, index: int, name: str, warps: int, region, args):
        self.scheduler, self.index, self.name, self.warps = scheduler, index, name, warps
        self.region, self.args = region, args
        self.status = "ready"        # ready | running | blocked | done | failed
        self.wait = None             # (op, barrier state, parity) while blocked
        self.results: List = []
        self.error: Optional[BaseException] = None
        self.thread: Optional[threading.Thread] = None

    def describe(self) -> str:
        warps = f"{self.warps} warp{'s' if self.warps != 1 else ''}"
        role = "default partition" if self.index == 0 else f"worker partition {self.index - 1}"
        name = f" `{self.name}`" if self.name else ""
        return f"{role}{name} ({warps})"

    def runnable(self) -> bool:
        if self.status == "ready":
            return True
        if self.status != "blocked":
            return False
        _, state, parity = self.wait
        return state.phase % 2 != parity or bool(state.in_flight)

    # ---- called on the partition's thread ----------------------------------------------------
    def block(self, op, state, parity: int) -> None:
        """Give the baton back until the scheduler resumes this partition (mbarrier.wait)."""
        self.wait = (op, state, parity)
        self.scheduler._yield_from(self, "blocked")
        self.wait = None

    def _main(self, run) -> None:
        run_agent(self.scheduler, self, run)


def _run_partition(frame) -> None:
    """A partition thread's work (`run_agent` runs it once the partition holds the baton)."""
    part = frame.partition
    part.results = frame.run_block(part.region.block, part.args)


class Scheduler(BatonScheduler):
    """Hands the baton (interpreter/baton.py) to the partitions in turn, as the module
    docstring says."""

    def __init__(self, op, frame):
        from shared_codegen.ops.warp_specialize.definition import partition_names, worker_operands
        super().__init__()
        self.op, self.frame = op, frame
        names = partition_names(op)
        self.partitions: List[Partition] = [
            Partition(self, 0, names[0], frame.num_warps, op.regions[0], [])]
        for i, (region, caps) in enumerate(zip(op.regions[1:], worker_operands(op))):
            args = [frame.raw(v) for v in caps]
            self.partitions.append(Partition(self, i + 1, names[i + 1],
                                             op.attrs["worker_num_warps"][i], region, args))
        for part in self.partitions:
            part.frame = frame.fork(part)

    # ---- the run -----------------------------------------------------------------------------
    def run(self) -> List:
        # Vector clocks of the partitions (interpreter/happens_before.py): shared-memory
        # accesses of different partitions that no mbarrier orders are races.
        values = self.frame.values
        values[HB_KEY] = HappensBefore(self.partitions)
        for part in self.partitions:
            start_agent_thread(part, _run_partition, name=f"partition-{part.index}")
        try:
            switches = 0
            last = len(self.partitions) - 1
            while True:
                failed = [p for p in self.partitions if p.status == "failed"]
                if failed:
                    raise failed[0].error
                if all(p.status == "done" for p in self.partitions):
                    break
                order = self.partitions[last + 1:] + self.partitions[:last + 1]
                nxt = next((p for p in order if p.runnable()), None)
                if nxt is None and self.frame.cluster is not None:
                    # Every partition waits; a peer CTA of the cluster may still signal one
                    # of their barriers (interpreter/cluster.py reports the deadlock).
                    self.frame.cluster.block(
                        self.frame, lambda: any(p.runnable() for p in self.partitions),
                        lambda: "\n".join(["has every partition of gl.warp_specialize "
                                           "blocked:"] + ["  " + line for line in
                                                         self._partition_lines()]))
                    continue
                if nxt is None:
                    raise self._located(DeadlockError(self._deadlock_report()))
                switches += 1
                if switches > MAX_SWITCHES:
                    raise self._located(InterpreterError(self._where(
                        f"the partitions of gl.warp_specialize switched more than "
                        f"{MAX_SWITCHES} times without finishing (a livelock?)")))
                last = nxt.index
                self._resume(nxt)
        finally:
            self._abort_and_join(self.partitions)
            values.pop(HB_KEY, None)  # the join orders everything after the partitions
        return self.partitions[0].results

    # ---- reports -----------------------------------------------------------------------------
    def _located(self, error: InterpreterError) -> InterpreterError:
        if self.op.loc.line:
            error.file, error.line = self.op.loc.file, self.op.loc.line
        return error

    def _where(self, message: str) -> str:
        loc = self.op.loc
        where = f"{loc.file}:{loc.line}" if loc.line else "<kernel>"
        pid = ", ".join(str(int(p)) for p in self.frame.program_id)
        text = f"{where}: {message} (program id ({pid}))"
        if loc.source_line:
            text += f"\n    {loc.source_line.strip()}"
        return text

    def _deadlock_report(self) -> str:
        return "\n".join([self._where("deadlock: every partition of gl.warp_specialize is "
                                      "blocked")] + self._partition_lines())

    def _partition_lines(self) -> List[str]:
        from shared_codegen.ops.mbarrier.definition import lacks
        lines = []
        for part in self.partitions:
            if part.status == "done":
                lines.append(f"  {part.describe()} has returned")
                continue
            op, state, parity = part.wait
            where = f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"
            lines.append(f"  {part.describe()} waits at {where} for phase {parity} of "
                         f"{state.describe()}: {lacks(state)}")
            if op.loc.source_line:
                lines.append(f"      {op.loc.source_line.strip()}")
        return lines


def run_warp_specialize(op, frame) -> List:
    """The interpreter rule of `ttg.warp_specialize`: run every partition to completion (or
    report a deadlock); returns the default partition's results."""
    if getattr(frame, "partition", None) is not None:
        frame.error(op, "gl.warp_specialize cannot run inside a partition")
    return Scheduler(op, frame).run()


__all__ = ["run_warp_specialize", "Scheduler", "Partition", "MAX_SWITCHES"]
