"""The CTAs of one thread-block cluster run co-scheduled (a kernel launched with `num_ctas`).

Each CTA of a cluster is a frame of its own (its own values, shared memory and mbarriers, the
same program id) whose `cta_rank` says which CTA it is. They meet only where the hardware
lets them: multicast TMA loads write every CTA's shared memory and signal every CTA's
barrier at the same offset (`ops/tma/multicast.py`), remote mbarrier arrivals signal a peer's
barrier, and the cluster barrier (`barrier.cluster.arrive` / `wait`, `ops/cluster`) joins them
all. So each CTA is a cooperative thread that runs until it cannot go on (an `mbarrier.wait`
whose phase only a peer can complete, a cluster wait that a peer has not arrived at), then
hands the baton to the next CTA that can run, in rank order. Only the holder runs, so a run
is deterministic.

When no CTA can run and some have not returned, the cluster is deadlocked: the report names
each CTA, where it waits and what it lacks (a cluster barrier that some CTA never reaches,
or that one reached after the others returned, is reported this way instead of hanging).
"""

from __future__ import annotations

import threading
from typing import Callable, List, Optional

from shared_codegen.errors import DeadlockError, InterpreterError
from shared_codegen.interpreter.baton import BatonScheduler, run_agent, start_agent_thread

# Hand-overs allowed while one cluster runs: a livelock guard.
MAX_SWITCHES = 1_000_000


class ClusterCTA:
    """One CTA: its frame, its thread, and while blocked what it waits for."""

    def __init__(self, cluster: "Cluster", rank: int, frame):
        self.cluster, self.rank, self.frame = cluster, rank, frame
        self.status = "ready"        # ready | running | blocked | done | failed
        self.ready: Optional[Callable[[], bool]] = None
        self.waiting: Optional[Callable[[], str]] = None
        self.op = None               # the op it blocked at
        self.error: Optional[BaseException] = None
        self.thread: Optional[threading.Thread] = None

    def runnable(self) -> bool:
        if self.status == "ready":
            return True
        return self.status == "blocked" and self.ready()

    def _main(self, run) -> None:
        run_agent(self.cluster, self, run)


class Cluster(BatonScheduler):
    """The CTAs of one program and what they share: the cluster barrier's arrivals."""

    def __init__(self, size: int, make_frame, run):
        super().__init__()
        self.size = size
        self.run_cta = run
        self.ctas: List[ClusterCTA] = []
        for rank in range(size):
            frame = make_frame(rank)
            frame.cluster, frame.cta_rank = self, rank
            self.ctas.append(ClusterCTA(self, rank, frame))
        # barrier.cluster: arrivals and completed waits per CTA (each thread of a CTA
        # arrives, then waits; the CTA is one agent here).
        self.arrived = [0] * size
        self.waited = [0] * size
        # Ids of async ops that write several CTAs' shared memory (multicast TMA loads): one
        # range for the cluster, apart from the per-CTA ids of ops/tma and ops/async_copy.
        self._next_id = -(1 << 40)

    def new_id(self) -> int:
        self._next_id -= 1
        return self._next_id

    # ---- what the ops ask (on a CTA's thread) ----------------------------------------------
    def frame_of(self, rank: int):
        return self.ctas[rank].frame

    def has_returned(self, rank: int) -> bool:
        return self.ctas[rank].status in ("done", "failed")

    def block(self, frame, ready: Callable[[], bool], waiting: Callable[[], str]) -> None:
        """Hand the baton on until `ready()` holds; `waiting()` says what for, in reports."""
        cta = self.ctas[frame.cta_rank]
        cta.ready, cta.waiting, cta.op = ready, waiting, frame.op
        self._yield_from(cta, "blocked")
        cta.ready = cta.waiting = cta.op = None

    # ---- the run -------------------------------------------------------------------------------
    def run(self) -> None:
        for cta in self.ctas:
            start_agent_thread(cta, self.run_cta, name=f"cta-{cta.rank}")
        try:
            last, switches = self.size - 1, 0
            while True:
                failed = [c for c in self.ctas if c.status == "failed"]
                if failed:
                    raise failed[0].error
                if all(c.status == "done" for c in self.ctas):
                    return
                order = self.ctas[last + 1:] + self.ctas[:last + 1]
                nxt = next((c for c in order if c.runnable()), None)
                if nxt is None:
                    raise self._deadlock()
                switches += 1
                if switches > MAX_SWITCHES:
                    raise InterpreterError(f"the CTAs of a cluster switched more than "
                                           f"{MAX_SWITCHES} times without finishing "
                                           f"(a livelock?)")
                last = nxt.rank
                self._resume(nxt)
        finally:
            self._abort_and_join(self.ctas)

    def _deadlock(self) -> DeadlockError:
        pid = ", ".join(str(int(p)) for p in self.ctas[0].frame.program_id)
        lines = [f"deadlock: every CTA of the cluster of program ({pid}) is blocked or has "
                 f"returned"]
        for cta in self.ctas:
            if cta.status == "done":
                lines.append(f"  CTA {cta.rank} has returned")
            else:
                lines.append(f"  CTA {cta.rank} {cta.waiting()}")
        error = DeadlockError("\n".join(lines))
        # Located at the first blocked CTA's op, so the traceback ends on that kernel line.
        op = next((c.op for c in self.ctas if c.op is not None and c.op.loc.line), None)
        if op is not None:
            error.file, error.line = op.loc.file, op.loc.line
        return error


def run_clusters(program_ids, size: int, make_frame, run) -> None:
    """Run each program id as a cluster of `size` co-scheduled CTAs, one cluster after
    another (clusters share nothing but global memory)."""
    for pid in program_ids:
        Cluster(size, lambda rank: make_frame(pid, rank), run).run()


__all__ = ["Cluster", "ClusterCTA", "run_clusters", "MAX_SWITCHES"]
