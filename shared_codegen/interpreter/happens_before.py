"""Happens-before race detection between the partitions of a `gl.warp_specialize`.

The cooperative scheduler (ops/warp_specialize/interpreter.py) runs one partition at a time,
so every run is *one* legal interleaving; a missing synchronization shows up only if that
interleaving happens to expose it. This module finds such bugs in every run: each partition
is an agent with a vector clock, and every shared- or tensor-memory access is checked against
the last conflicting access of the other partitions. Two accesses conflict when they touch the same
byte and at least one writes; they race unless one happens before the other.

Edges (what orders partitions, PTX's release/acquire through mbarriers):
- `mbarrier.arrive` / `mbarrier.expect` by a partition releases its clock into the barrier's
  current phase; a `tcgen05_commit` releases its issuer's clock likewise (its arrival comes
  later, when the MMAs complete; the release is recorded at the commit, and carried into
  the later phases of that barrier, so it can only hide a race, never invent one);
- a TMA load writes its destination as its issuer at the issue, and its landing releases
  that write into the phase its bytes complete;
- `mbarrier.wait` returning acquires the clocks released into the phase it observed (the
  last completed phase of the parity waited for);
- the fork gives every partition the parent's clock and the join gives the parent all of
  theirs, so accesses before and after `gl.warp_specialize` never race with its partitions.

Tensor memory is one buffer per program (`ops/tensor_memory/interpreter.py`, `hb_space`
names it in reports), indexed lane * bytes-per-lane + byte. A tcgen05 MMA or tcgen05_copy
accesses it as its issuing partition at the issue, as the shared operands are read: the
accumulator is written, a TS-form A operand read; the commit that tracks the MMA releases
that access (the epilogue waiting on the commit's barrier is ordered after it, and an MMA
overwriting an accumulator the epilogue has not released is a write after read).

Accesses by the asynchronous engines themselves (a TMA load still in flight, an MMA still
reading its operands) are checked by the ownership records of their families
(`ops/async_copy`, `ops/tma`, `ops/wgmma`, `ops/tcgen05`) before this check runs.

Shadow state per shared buffer (and per program's tensor memory): for every byte, the last writer (partition, clock, op) and,
per partition, its last read (clock, op): the FastTrack representation, O(bytes) numpy work
per access and nothing at all outside `gl.warp_specialize`.

A report names both kernel lines and the edge that is missing: the barrier the first
partition arrives on after its access (and the phase), on which the second did not wait.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

# frame.values key of the running warp_specialize's HappensBefore (partitions share values).
HB_KEY = object()


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


def _op_name(op) -> str:
    return (op.opdef.user_name if op.opdef is not None else None) or op.name.split(".")[-1]


class _Shadow:
    """The last accesses of every byte of one shared buffer, in one warp_specialize."""

    def __init__(self, owner: "HappensBefore", nbytes: int, agents: int):
        self.owner = owner
        self.write_agent = np.full(nbytes, -1, dtype=np.int16)
        self.write_clock = np.zeros(nbytes, dtype=np.int64)
        self.write_op = np.zeros(nbytes, dtype=np.int32)
        self.read_clock = np.zeros((agents, nbytes), dtype=np.int64)
        self.read_op = np.zeros((agents, nbytes), dtype=np.int32)
        self.space = "shared memory"  # the buffer's `hb_space`, as reports name it


class HappensBefore:
    """Vector clocks of the partitions of one running `gl.warp_specialize`."""

    def __init__(self, partitions: List):
        n = len(partitions)
        self.partitions = partitions
        # Agents 0..n-1 are the partitions, n+a the tensor core working for partition a.
        self.agents = 2 * n
        self.clocks = np.eye(self.agents, dtype=np.int64)   # row a: agent a's vector clock
        self.ops: List = [None]                     # op table: shadows store indices
        self._op_index: Dict[int, int] = {}
        # op index -> (noun, engine): ("write", None), ("TMA write", "TMA load"), ...
        self.nouns: Dict[int, Tuple[str, Optional[str]]] = {}
        self.phase_clocks: Dict[Tuple[int, int], np.ndarray] = {}   # (barrier, phase) -> vc
        self.carried: Dict[int, np.ndarray] = {}    # barrier -> clock carried to all phases
        self.barriers: Dict[int, object] = {}
        # (agent, its clock at the release, barrier state, phase, release op, async?)
        self.releases: List[Tuple[int, int, object, int, object, bool]] = []

    # ---- edges ---------------------------------------------------------------------------
    @staticmethod
    def agent(frame) -> int:
        return frame.partition.index if frame.partition is not None else 0

    def _join_phase(self, state, phase: int, clock: np.ndarray) -> None:
        key = (id(state), phase)
        self.barriers[id(state)] = state
        have = self.phase_clocks.get(key)
        self.phase_clocks[key] = clock.copy() if have is None else np.maximum(have, clock)

    def release(self, frame, op, state, carry: bool = False,
                tensor_core: bool = False) -> None:
        """`frame`'s partition arrives on `state` (its current phase): later waiters that
        observe the phase complete see everything the partition did so far. With
        `tensor_core` (a tcgen05 commit) its tensor core's work issued so far is released
        too."""
        a = self.agent(frame)
        if tensor_core:
            a += len(self.partitions)
            np.maximum(self.clocks[a], self.clocks[a - len(self.partitions)],
                       out=self.clocks[a])
        clock = self.clocks[a]
        self._join_phase(state, state.phase, clock)
        if carry:
            have = self.carried.get(id(state))
            self.carried[id(state)] = clock.copy() if have is None else np.maximum(have, clock)
        self.releases.append((a, int(clock[a]), state, state.phase, op, False))
        clock[a] += 1
        if tensor_core:  # the issuer's own accesses so far are released too
            p = a - len(self.partitions)
            self.releases.append((p, int(self.clocks[p, p]), state, state.phase, op, False))
            self.clocks[p, p] += 1

    def release_write(self, agent: int, clock: int, state, phase: int, op) -> None:
        """An async write (a TMA load `op`) issued by `agent` at `clock` landed in `phase`."""
        vc = np.zeros(self.agents, dtype=np.int64)
        vc[agent] = clock
        self._join_phase(state, phase, vc)
        self.releases.append((agent, clock, state, phase, op, True))

    def acquire(self, frame, state) -> None:
        """A wait returned having observed the last completed phase of its parity."""
        a = self.agent(frame)
        clock = self.clocks[a]
        observed = self.phase_clocks.get((id(state), state.phase - 1))
        if observed is not None:
            np.maximum(clock, observed, out=clock)
        carried = self.carried.get(id(state))
        if carried is not None:
            np.maximum(clock, carried, out=clock)

    def now(self, frame) -> Tuple[int, int]:
        a = self.agent(frame)
        return a, int(self.clocks[a, a])

    # ---- accesses ------------------------------------------------------------------------
    def _index_of(self, op, noun: str, engine: Optional[str]) -> int:
        k = self._op_index.get(id(op))
        if k is None:
            k = self._op_index[id(op)] = len(self.ops)
            self.ops.append(op)
            self.nouns[k] = (noun, engine)
        return k

    def _shadow(self, buf) -> _Shadow:
        shadow = getattr(buf, "hb_shadow", None)
        if shadow is None or shadow.owner is not self:
            shadow = buf.hb_shadow = _Shadow(self, buf.data.size, self.agents)
            shadow.space = getattr(buf, "hb_space", "shared memory")
        return shadow

    def access(self, frame, op, buf, idx: np.ndarray, write: bool,
               what: Optional[str] = None, noun: Optional[str] = None,
               engine: Optional[str] = None, tensor_core: bool = False) -> None:
        """Check `frame`'s partition reading or writing bytes `idx` of `buf`, then record.
        `what` says the access in a report ("local_load reads"); `noun` names it as the
        other side of one ("write", "TMA write") and `engine` the async engine that
        performs it for the partition ("TMA load", "wgmma"), if any."""
        noun = noun or ("write" if write else "read")
        idx = np.asarray(idx).reshape(-1)
        shadow = self._shadow(buf)
        a = self.agent(frame)
        if tensor_core:  # issued now: the engine knows what its issuer knows
            a += len(self.partitions)
            np.maximum(self.clocks[a], self.clocks[a - len(self.partitions)],
                       out=self.clocks[a])
        vc = self.clocks[a]
        wa = shadow.write_agent[idx]
        other = (wa >= 0) & (wa != a)
        if other.any():
            late = other.copy()
            late[other] = shadow.write_clock[idx[other]] > vc[wa[other]]
            if late.any():
                k = int(np.flatnonzero(late)[0])
                self._report(frame, op, what, noun, int(wa[k]),
                             int(shadow.write_clock[idx[k]]), int(shadow.write_op[idx[k]]),
                             shadow.space)
        if write:
            for b in range(self.agents):
                if b == a:
                    continue
                late = shadow.read_clock[b, idx] > vc[b]
                if late.any():
                    k = int(np.flatnonzero(late)[0])
                    self._report(frame, op, what, noun, b, int(shadow.read_clock[b, idx[k]]),
                                 int(shadow.read_op[b, idx[k]]), shadow.space)
            shadow.write_agent[idx] = a
            shadow.write_clock[idx] = vc[a]
            shadow.write_op[idx] = self._index_of(op, noun, engine)
        else:
            shadow.read_clock[a, idx] = vc[a]
            shadow.read_op[a, idx] = self._index_of(op, noun, engine)

    # ---- reports -------------------------------------------------------------------------
    def _missing_edge(self, agent: int, clock: int):
        """The first release `agent` made after its access at `clock` (a barrier it arrived
        on, or the barrier its TMA load signals)."""
        for who, at, state, phase, op, signals in self.releases:
            if who == agent and at >= clock:
                return state, phase, op, signals
        return None

    def _report(self, frame, op, what: Optional[str], noun: str, agent: int, clock: int,
                first: int, space: str) -> None:
        me = self.partitions[self.agent(frame)].describe()
        them = self.partitions[agent % len(self.partitions)].describe()
        first_op, (first_noun, engine) = self.ops[first], self.nouns[first]
        what = what or f"{_op_name(op)} {'writes' if noun == 'write' else 'reads'}"
        past = "wrote" if first_noun.endswith("write") else "read"
        by = f"the {engine} of the {them}" if engine else f"the {them}"
        text = (f"race: {what} {space} that {by} {past} at {_where(first_op)} "
                f"({_op_name(first_op)}), and nothing orders the two: ")
        edge = self._missing_edge(agent, clock)
        if edge is not None:
            state, phase, release, signals = edge
            how = ("the TMA load signals that phase" if signals else
                   f"that partition arrives on it at {_where(release)}")
            text += (f"no wait on {state.named()} phase {phase} between the {first_noun} at "
                     f"{_where(first_op)} and the {noun} at {_where(op)} ({how}; the {me} "
                     f"must wait for it first)")
        else:
            text += (f"that partition arrives on no mbarrier after its {first_noun}, so the "
                     f"{me} cannot wait for it (mbarrier.arrive after the {first_noun}, "
                     f"mbarrier.wait before the {noun})")
        frame.error(op, text)


def current(frame) -> Optional[HappensBefore]:
    """The running warp_specialize's detector, or None outside one (nothing to check)."""
    values = getattr(frame, "values", None)
    return values.get(HB_KEY) if values is not None else None


__all__ = ["HappensBefore", "HB_KEY", "current"]
