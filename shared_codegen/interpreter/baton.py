"""Cooperative threads that pass one baton: only its holder runs, so a run is deterministic.

The concurrent grid (`grid.py`), a cluster's CTAs (`cluster.py`) and the partitions of a
`gl.warp_specialize` (`ops/warp_specialize/interpreter.py`) each run their agents (programs,
CTAs, partitions) as threads of this kind; they differ only in whom they hand the baton to
next. An agent has `status`, `thread` and `error` attributes; the scheduler resumes one
agent at a time and the agent yields back with its new status.
"""

from __future__ import annotations

import threading

import numpy as np

# Stack of an agent's thread: deep enough for nested regions and warp_specialize.
_THREAD_STACK = 16 << 20


class BatonAbort(BaseException):
    """Unwinds an agent's thread when the run is over (another agent failed)."""


class BatonScheduler:
    """The baton: who holds it (None: the scheduler's own thread) and whether the run ended."""

    def __init__(self):
        self.cond = threading.Condition()
        self.holder = None
        self.aborted = False

    def _wait_for_baton(self, agent) -> None:
        with self.cond:
            while self.holder is not agent and not self.aborted:
                self.cond.wait()
            if self.aborted:
                raise BatonAbort()
            agent.status = "running"

    def _yield_from(self, agent, status: str, final: bool = False) -> None:
        with self.cond:
            agent.status = status
            self.holder = None
            self.cond.notify_all()
        if not final:
            self._wait_for_baton(agent)

    def _resume(self, agent) -> None:
        with self.cond:
            self.holder = agent
            self.cond.notify_all()
            while self.holder is agent:
                self.cond.wait()

    def _abort_and_join(self, agents) -> None:
        """End the run: unwind every agent still waiting for the baton, then join them."""
        with self.cond:
            self.aborted = True
            self.cond.notify_all()
        for agent in agents:
            if agent.thread is not None:
                agent.thread.join()


def start_agent_thread(agent, run, name: str) -> None:
    """Start `agent`'s thread (it waits for the baton before running its frame)."""
    old = threading.stack_size()
    threading.stack_size(_THREAD_STACK)
    try:
        agent.thread = threading.Thread(target=agent._main, args=(run,), daemon=True,
                                        name=name)
        agent.thread.start()
    finally:
        threading.stack_size(old)


def run_agent(scheduler: BatonScheduler, agent, run) -> None:
    """An agent thread's body: once it holds the baton, `run(agent.frame)`; a failure is kept
    in `agent.error` for the scheduler to re-raise on the calling thread."""
    try:
        scheduler._wait_for_baton(agent)
    except BatonAbort:  # the run ended before this agent started
        return
    old = np.seterr(all="ignore")
    try:
        run(agent.frame)
        status = "done"
    except BatonAbort:
        return
    except BaseException as exc:  # re-raised by the scheduler on the calling thread
        agent.error = exc
        status = "failed"
    finally:
        np.seterr(**old)
    scheduler._yield_from(agent, status, final=True)


__all__ = ["BatonAbort", "BatonScheduler", "run_agent", "start_agent_thread"]
