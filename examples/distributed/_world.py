"""What the distributed examples share: the world they run in.

Under `torchrun --nproc-per-node N` (torch.distributed's env variables set, GPUs present) an
example runs on this process's GPU with a `SymmetricHeap`; otherwise on a `SimulatedWorld`
of `world_size` CPU ranks. Both allocate symmetric tensors with `.empty(name, shape, dtype)`
and launch with `.launch(kernel, grid, args_of, **constexprs)`.
"""

from __future__ import annotations

import os

import numpy as np

from tile.distributed import SimulatedWorld, SymmetricHeap


def launched_by_torchrun() -> bool:
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


def make_world(world_size: int, heap_bytes: int):
    """(world, on_gpu): a SymmetricHeap of this process's GPU under torchrun, else a
    SimulatedWorld of `world_size` ranks."""
    if not launched_by_torchrun():
        return SimulatedWorld(world_size, heap_bytes=heap_bytes), False
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if not dist.is_initialized():
        dist.init_process_group("nccl")
    return SymmetricHeap(heap_bytes), True


def ranks(world, on_gpu: bool):
    """The ranks whose data this process holds."""
    return [world.rank] if on_gpu else list(range(world.world_size))


def fill(tensor, rank: int, values: np.ndarray, on_gpu: bool) -> None:
    """Write `values` into `rank`'s copy of a symmetric tensor."""
    if on_gpu:
        import torch

        tensor[rank].copy_(torch.from_numpy(values))
    else:
        tensor[rank][...] = values


def read(tensor, rank: int, on_gpu: bool) -> np.ndarray:
    if on_gpu:
        import torch

        torch.cuda.synchronize()
        return tensor[rank].float().cpu().numpy()
    return np.asarray(tensor[rank], dtype=np.float32)
