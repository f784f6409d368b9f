"""`tile.distributed`: the host side of `tl.distributed` (docs/distributed.md).

- `SimulatedWorld(world_size)`: N simulated GPUs in this process (the CPU interpreter runs
  every rank's programs interleaved; a signal protocol that cannot complete is reported);
- `SymmetricHeap(heap_bytes)`: this process's GPU share of a symmetric heap built on
  `torch.distributed._symmetric_memory` (one process per GPU, torch.distributed initialized).

Both hand kernels a `RankContext` (rank, world_size, heap_bases, signal_pad_bases,
signal_pad) and allocate symmetric tensors with `.empty(name, shape, dtype)`.
"""

from shared_codegen.interpreter.world import RankContext, SimulatedWorld, SymmetricTensor
from shared_codegen.runtime.symmetric_memory import SymmetricHeap

__all__ = ["SimulatedWorld", "SymmetricHeap", "SymmetricTensor", "RankContext"]
