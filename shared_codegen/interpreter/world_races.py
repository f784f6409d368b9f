"""Races on the symmetric heaps of a simulated world: happens-before with vector clocks.

Each program of each rank carries a vector clock. The memory-model operations of
`tl.distributed` synchronize through the address they touch, as in the PTX memory model:

- a *release* (a signal, a release store, an atomic with `sem` release or acq_rel) joins the
  program's clock into the address's clock, then advances the program's own entry;
- an *acquire* (a wait that completed, an acquire load, an atomic with `sem` acquire or
  acq_rel) joins the address's clock into the program's.

Plain loads and stores (`tl.load` / `tl.store`, a peer's tile through `distributed.load`,
`put`, `get`) of heap memory are the accesses checked: every 2-byte granule remembers its
last writer and its last reader (program, clock, op). An access by another program that is
not ordered after them by an acquire of a release that followed them is a `RaceError`
naming both sides and the ranks. Memory-model accesses themselves (flags, counters) never
race, and host-written memory has no writer.

Limits: one last reader per granule (a write after reads by several programs is checked
against the latest only); releases and acquires through the same address merge (an RMW
chain), which can hide a race but never invents one; TMA and other asynchronous engines
are not tracked here.
"""

from __future__ import annotations

from typing import List

import numpy as np

from shared_codegen.interpreter.memory import _SHIFT
from shared_codegen.ir.core import MemoryEffect

# The granule of the shadow memory: fp16/bf16 elements are told apart, fp8 pairs are not.
GRANULE = 2
_NOBODY = -1


class _Shadow:
    """Last writer and reader of each granule of one heap."""

    def __init__(self, nbytes: int):
        n = -(-nbytes // GRANULE)
        self.writer = np.full(n, _NOBODY, np.int32)
        self.write_clock = np.zeros(n, np.int32)
        self.write_op = np.zeros(n, np.int32)
        self.reader = np.full(n, _NOBODY, np.int32)
        self.read_clock = np.zeros(n, np.int32)
        self.read_op = np.zeros(n, np.int32)


class RaceDetector:
    def __init__(self, programs: List, heap_count: int, heap_bytes: int):
        self.programs = programs
        n = len(programs)
        for i, prog in enumerate(programs):
            prog.race_index = i
            prog.clock = np.zeros(n, np.int32)
            prog.clock[i] = 1
        self.heap_count, self.heap_bytes = heap_count, heap_bytes
        self.shadows = {}
        self.sync = {}           # address -> vector clock released into it
        self.ops: List = []
        self._op_index = {}

    # ---- synchronization ----------------------------------------------------------------
    def release(self, program, addrs) -> None:
        for addr in np.unique(np.asarray(addrs, np.int64).reshape(-1)):
            held = self.sync.get(int(addr))
            self.sync[int(addr)] = program.clock.copy() if held is None else \
                np.maximum(held, program.clock)
        program.clock[program.race_index] += 1

    def acquire(self, program, addrs) -> None:
        for addr in np.unique(np.asarray(addrs, np.int64).reshape(-1)):
            held = self.sync.get(int(addr))
            if held is not None:
                np.maximum(program.clock, held, out=program.clock)

    # ---- accesses -----------------------------------------------------------------------
    def access(self, frame, op, heap: int, offsets: np.ndarray, itemsize: int,
               write: bool) -> None:
        program = frame.program
        shadow = self.shadows.get(heap)
        if shadow is None:
            shadow = self.shadows[heap] = _Shadow(self.heap_bytes)
        granules = np.unique((offsets.reshape(-1, 1) + np.arange(0, itemsize, GRANULE)
                              ).reshape(-1) // GRANULE)
        me = program.race_index
        self._check(frame, op, heap, shadow.writer, shadow.write_clock, shadow.write_op,
                    granules, "wrote", write)
        if write:
            self._check(frame, op, heap, shadow.reader, shadow.read_clock, shadow.read_op,
                        granules, "read", write)
        who, clock, ops = ((shadow.writer, shadow.write_clock, shadow.write_op) if write else
                           (shadow.reader, shadow.read_clock, shadow.read_op))
        who[granules] = me
        clock[granules] = program.clock[me]
        ops[granules] = self._index_of(op)

    def _index_of(self, op) -> int:
        index = self._op_index.get(id(op))
        if index is None:
            index = self._op_index[id(op)] = len(self.ops)
            self.ops.append(op)
        return index

    def _check(self, frame, op, heap, who, clock, ops, granules, verb, write) -> None:
        program = frame.program
        others = who[granules]
        stamps = clock[granules]
        other = (others != _NOBODY) & (others != program.race_index)
        if not other.any():
            return
        seen = program.clock[np.where(other, others, 0)]
        unordered = other & (seen < stamps)
        if not unordered.any():
            return
        k = int(np.flatnonzero(unordered)[0])
        them = self.programs[int(others[k])]
        their_op = self.ops[int(ops[granules[k]])]
        at = f"{their_op.loc.file}:{their_op.loc.line}" if their_op.loc.line else "<kernel>"
        what = frame.memory.describe_address(((heap + 1) << _SHIFT) + int(granules[k]) * GRANULE)
        mine = "writes" if write else "reads"
        frame.error(op, f"race: {self._name(op)} {mine} {what}, which {them.describe()} "
                        f"{verb} at {at} ({self._name(their_op)}), and nothing orders the "
                        f"two: no release (distributed.notify, a release store or atomic) "
                        f"after that access is acquired (distributed.wait, an acquire load "
                        f"or atomic) before this one")

    @staticmethod
    def _name(op) -> str:
        if getattr(op.opdef, "plain_global_access", False):
            return "a store" if op.opdef.memory_effects == {MemoryEffect.WRITE_GLOBAL} \
                else "a load"
        return op.opdef.user_name or op.name


__all__ = ["RaceDetector", "GRANULE"]
