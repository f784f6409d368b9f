"""A world of simulated GPUs: every rank's programs run in one process, interleaved.

`SimulatedWorld(world_size)` gives each rank its own symmetric heap (a byte array) and signal
pad (int32 words). `world.empty(name, shape, dtype)` carves a symmetric tensor out of every
heap at the same offset, so translating a pointer between ranks is moving it from one heap
base to another (`dist.symm_at`), as on the GPU with torch's symmetric memory or Iris.

`world.launch(kernel, grid, args_of, **constexprs)` launches the kernel once per rank, as
each process of a job would: `args_of(ctx)` returns the rank's arguments given its
`RankContext` (rank, world size, heap-base and signal-pad-base tables, its signal pad). The
launches are traced and their arguments checked one by one like any interpreted launch, but
none runs until all are collected; then the programs of all ranks run as the cooperative
threads of one `ConcurrentGrid` (interpreter/grid.py), handing over at every atomic, ordered
load or store, signal and poll of a wait. A signal protocol that cannot complete is a
`DeadlockError` naming, per rank and program, the signal word it waits on and the line.

Every rank's memory lives in one `WorldMemory`: the heaps and signal pads are mapped first,
so their interpreter addresses (and thus the base tables) are fixed when the world is made;
an argument that is a view of a heap resolves to that heap's mapping, so a pointer into a
symmetric tensor and the heap base it is translated from are addresses of one buffer.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from shared_codegen.errors import ArgumentError
from shared_codegen.interpreter.memory import _SHIFT, Buffer, Memory, _whole_memory

# Symmetric tensors start at multiples of this many bytes of their heap (TMA-friendly, and
# more than the 16 bytes that `dist.symm_at` promises to keep of a pointer's alignment).
ALLOCATION_ALIGNMENT = 256
DEFAULT_HEAP_BYTES = 1 << 20
DEFAULT_SIGNAL_WORDS = 1024


@dataclass
class RankContext:
    """What a rank's kernels receive: its rank, the world size, the peers' heap and signal-pad
    base addresses (int64 tables indexed by rank) and its own signal pad."""

    rank: int
    world_size: int
    heap_bases: object
    signal_pad_bases: object
    signal_pad: object


class SymmetricTensor:
    """One tensor allocated at the same heap offset on every rank; `t[rank]` is that rank's
    array (a view of its heap)."""

    def __init__(self, name: str, per_rank: List[np.ndarray], offset: int):
        self.name, self.offset = name, offset
        self._per_rank = per_rank

    def __getitem__(self, rank: int) -> np.ndarray:
        return self._per_rank[rank]

    def __len__(self) -> int:
        return len(self._per_rank)

    def __iter__(self):
        return iter(self._per_rank)

    def local(self, ctx: RankContext) -> np.ndarray:
        return self._per_rank[ctx.rank]


class WorldMemory(Memory):
    """The memory of every simulated GPU: heaps and signal pads first, then arguments."""

    def __init__(self, world: "SimulatedWorld"):
        super().__init__()
        self.world = world
        self._pinned = {}
        for rank, heap in enumerate(world.heaps):
            self._pin(f"symmetric heap of rank {rank}", heap)
        for rank, pad in enumerate(world.signal_pads):
            self._pin(f"signal pad of rank {rank}", pad)

    def _pin(self, name: str, arr: np.ndarray) -> None:
        self.buffers.append(Buffer(name, arr.reshape(-1).view(np.uint8), 0, arr.dtype))
        self._pinned[arr.__array_interface__["data"][0]] = len(self.buffers)

    def map(self, name: str, arr: np.ndarray) -> int:
        flat, start = _whole_memory(arr)
        buf_id = self._pinned.get(flat.__array_interface__["data"][0])
        if buf_id is not None:
            return (buf_id << _SHIFT) + start
        return super().map(name, arr)

    # ---- races between ranks (interpreter/world_races.py) ------------------------------
    races = None

    def _program(self, frame):
        program = getattr(frame, "program", None)
        return program if self.races is not None and program is not None else None

    def release(self, frame, ptrs) -> None:
        program = self._program(frame)
        if program is not None:
            self.races.release(program, ptrs)

    def acquire(self, frame, ptrs) -> None:
        program = self._program(frame)
        if program is not None:
            self.races.acquire(program, ptrs)

    def _synced(self, frame, op, ptrs, result) -> None:
        # An atomic: its acquire and release take effect before other programs run.
        program = self._program(frame)
        if program is not None:
            sem = op.attrs.get("sem", "acq_rel")
            if sem in ("acquire", "acq_rel"):
                self.races.acquire(program, ptrs)
            if sem in ("release", "acq_rel"):
                self.races.release(program, ptrs)
        Memory._synced(frame, op, ptrs, result)

    def _plain_access(self, frame, op, ptrs, mask, itemsize, write) -> None:
        program = self._program(frame)
        if program is None or not getattr(op.opdef, "plain_global_access", False) or \
                op.attrs.get("volatile"):
            return
        ptrs, active = self._lanes(ptrs, mask)
        addrs = ptrs[active]
        heaps = (addrs >> _SHIFT) - 1
        for heap in np.unique(heaps[heaps < self.world.world_size]):
            offsets = addrs[heaps == heap] & ((1 << _SHIFT) - 1)
            self.races.access(frame, op, int(heap), offsets, itemsize, write)

    def load(self, ptrs, mask, other, elem, frame, op):
        out = super().load(ptrs, mask, other, elem, frame, op)
        self._plain_access(frame, op, ptrs, mask, np.asarray(out).itemsize, False)
        return out

    def store(self, ptrs, values, mask, elem, frame, op):
        super().store(ptrs, values, mask, elem, frame, op)
        self._plain_access(frame, op, ptrs, mask, np.dtype(elem.np).itemsize, True)

    def describe_address(self, addr) -> str:
        addr = int(addr)
        buf_id, offset = (addr >> _SHIFT) - 1, addr & ((1 << _SHIFT) - 1)
        world = self.world
        if 0 <= buf_id < world.world_size:
            for t in world.tensors:
                view = t[buf_id]
                if t.offset <= offset < t.offset + view.nbytes:
                    return f"`{t.name}`[{(offset - t.offset) // view.itemsize}] of rank {buf_id}"
            return f"byte {offset} of the symmetric heap of rank {buf_id}"
        if world.world_size <= buf_id < 2 * world.world_size:
            return f"signal {offset // 4} of rank {buf_id - world.world_size}"
        return super().describe_address(addr)


class SimulatedWorld:
    """`world_size` simulated GPUs with symmetric heaps and signal pads (module docstring)."""

    def __init__(self, world_size: int, heap_bytes: int = DEFAULT_HEAP_BYTES,
                 signal_words: int = DEFAULT_SIGNAL_WORDS):
        if not isinstance(world_size, int) or world_size < 1:
            raise ArgumentError(f"SimulatedWorld: world_size must be a positive int, got "
                                f"{world_size!r}")
        self.world_size = world_size
        self.heap_bytes = heap_bytes
        self.heaps = [np.zeros(heap_bytes, np.uint8) for _ in range(world_size)]
        self.signal_pads = [np.zeros(signal_words, np.int32) for _ in range(world_size)]
        self.tensors: List[SymmetricTensor] = []
        self._next_offset = 0
        # The interpreter addresses WorldMemory gives the heaps (buffers 1..n) and pads.
        heap_bases = np.array([(r + 1) << _SHIFT for r in range(world_size)], np.int64)
        pad_bases = np.array([(world_size + r + 1) << _SHIFT for r in range(world_size)],
                             np.int64)
        self.contexts = [RankContext(r, world_size, heap_bases.copy(), pad_bases.copy(),
                                     self.signal_pads[r]) for r in range(world_size)]

    def empty(self, name: str, shape: Sequence[int], dtype) -> SymmetricTensor:
        """A symmetric tensor (zero-filled, so runs are reproducible)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        offset = -(-self._next_offset // ALLOCATION_ALIGNMENT) * ALLOCATION_ALIGNMENT
        if offset + nbytes > self.heap_bytes:
            raise ArgumentError(f"SimulatedWorld.empty({name!r}): {nbytes} bytes do not fit the "
                                f"symmetric heap ({self.heap_bytes - offset} of "
                                f"{self.heap_bytes} bytes left); pass a larger heap_bytes")
        self._next_offset = offset + nbytes
        views = [heap[offset:offset + nbytes].view(dtype).reshape(shape) for heap in self.heaps]
        tensor = SymmetricTensor(name, views, offset)
        self.tensors.append(tensor)
        return tensor

    def reset_signals(self) -> None:
        for pad in self.signal_pads:
            pad[...] = 0

    def launch(self, kernel, grid, args_of: Callable[[RankContext], Sequence], **kwargs):
        """Launch `kernel[grid](*args_of(ctx), **kwargs)` on every rank, all ranks' programs
        interleaved in this process."""
        memory = WorldMemory(self)
        collector = _Collector(memory)
        with _collecting(collector):
            for ctx in self.contexts:
                collector.rank = ctx.rank
                kernel[grid](*args_of(ctx), **kwargs)
        run_world(collector.launches, memory, self.world_size)


# ---- collecting the launches of every rank ---------------------------------------------------

class _Collector:
    def __init__(self, memory: WorldMemory):
        self.memory = memory
        self.rank = 0
        self.launches: List[Tuple[int, object, list, tuple, int]] = []

    def add(self, module, kernel_args, grid3) -> None:
        num_warps = int(module.attrs.get("num_warps", 4))
        self.launches.append((self.rank, module, list(kernel_args), tuple(grid3), num_warps))


_STATE = threading.local()


@contextlib.contextmanager
def _collecting(collector: _Collector):
    if getattr(_STATE, "collector", None) is not None:
        raise ArgumentError("SimulatedWorld.launch: a world launch cannot launch another world")
    _STATE.collector = collector
    try:
        yield collector
    finally:
        _STATE.collector = None


def current_collector() -> Optional[_Collector]:
    """The world launch collecting interpreted launches on this thread (frontend/launch.py
    maps arguments into its memory and hands it the traced kernel instead of running it)."""
    return getattr(_STATE, "collector", None)


def run_world(launches, memory: Memory, world_size: int) -> None:
    """Run every rank's programs as one cooperative grid, program ids interleaved across
    ranks so each rank starts its first programs together."""
    import itertools

    from shared_codegen.interpreter.grid import MAX_RESIDENT, ConcurrentGrid
    from shared_codegen.interpreter.run import Frame, _program_end

    entries = []
    for rank, module, args, grid3, num_warps in launches:
        pids = [(x, y, z) for z, y, x in itertools.product(range(grid3[2]), range(grid3[1]),
                                                           range(grid3[0]))]
        entries.append([(rank, pid, module, args, grid3, num_warps) for pid in pids])
    order = [e for group in itertools.zip_longest(*entries) for e in group if e is not None]
    if not order:
        return

    def make_frame(entry, _):
        rank, pid, module, args, grid3, num_warps = entry
        frame = Frame(memory, grid3, num_warps=num_warps)
        frame.program_id, frame.rank = pid, rank
        frame.world_kernel = (module.kernel.body.block, args)
        return frame

    def run_program(frame):
        body, args = frame.world_kernel
        frame.run_block(body, list(args))
        _program_end(frame)

    grid = ConcurrentGrid(order, make_frame, run_program,
                          max_resident=MAX_RESIDENT * world_size)
    if isinstance(memory, WorldMemory):
        from shared_codegen.interpreter.world_races import RaceDetector

        memory.races = RaceDetector(grid.programs, world_size, memory.world.heap_bytes)
    grid.run()


__all__ = ["SimulatedWorld", "SymmetricTensor", "RankContext", "WorldMemory",
           "current_collector", "run_world", "ALLOCATION_ALIGNMENT"]
