"""The GPU side of `tl.distributed`: a symmetric heap from PyTorch's symmetric memory.

One process per GPU (torchrun), `torch.distributed` initialized. `SymmetricHeap(heap_bytes)`
allocates one symmetric buffer with `torch.distributed._symmetric_memory.empty` (NVSHMEM
behind it where torch is built with it, CUDA VMM/IPC otherwise), rendezvouses it over the
process group, and carves tensors out of it at the same offsets on every rank, so the peers'
base addresses of the one buffer (`handle.buffer_ptrs`) translate any pointer into it
(`dist.symm_at`). Signals live in the handle's signal pads (`handle.signal_pad_ptrs`), past
the words torch's own barriers use.

The kernel-facing context is the same `RankContext` as the simulated world's
(interpreter/world.py): rank, world size, the int64 tables of heap and signal-pad base
addresses (on the device), and the rank's signal pad.
"""

from __future__ import annotations

from typing import Callable, Sequence

from shared_codegen.errors import ArgumentError
from shared_codegen.interpreter.world import ALLOCATION_ALIGNMENT, RankContext

# torch's `handle.barrier(channel)` uses word `channel * world_size + rank` of the signal
# pad; our signals start past the words its first channels use (torch 2.11's pad holds
# 32 channels x 72 ranks words; older ones 512 words, hence the check below).
SIGNAL_PAD_FIRST_WORD = 512
DEFAULT_SIGNAL_WORDS = 1024


class SymmetricTensor:
    """This rank's tensor of a symmetric allocation (`local(ctx)` as in the simulated world;
    other ranks' copies are reached from kernels through `tl.distributed`)."""

    def __init__(self, name: str, tensor, rank: int, offset: int):
        self.name, self.tensor, self.rank, self.offset = name, tensor, rank, offset

    def local(self, ctx: RankContext):
        return self.tensor

    def __getitem__(self, rank: int):
        if rank != self.rank:
            raise ArgumentError(f"symmetric tensor `{self.name}`: rank {self.rank} holds only "
                                f"its own copy on the host; read rank {rank}'s from a kernel")
        return self.tensor


class SymmetricHeap:
    """A symmetric heap of `heap_bytes` on this process's GPU (module docstring)."""

    def __init__(self, heap_bytes: int, group=None, device=None,
                 signal_words: int = DEFAULT_SIGNAL_WORDS):
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        if not dist.is_initialized():
            raise ArgumentError("SymmetricHeap needs torch.distributed initialized "
                                "(dist.init_process_group), one process per GPU")
        group = group if group is not None else dist.group.WORLD
        device = device if device is not None else torch.device("cuda",
                                                                torch.cuda.current_device())
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is not None:  # needed before rendezvous by torch < 2.8, a no-op later
            enable(group.group_name)
        self.heap = symm_mem.empty(heap_bytes, dtype=torch.uint8, device=device)
        self.handle = symm_mem.rendezvous(self.heap, group.group_name)
        self.rank, self.world_size = self.handle.rank, self.handle.world_size
        self.heap_bytes = heap_bytes
        for what, ptrs in (("buffer", self.handle.buffer_ptrs),
                           ("signal pad", self.handle.signal_pad_ptrs)):
            bad = [p for p in ptrs if p % ALLOCATION_ALIGNMENT]
            if bad:
                raise ArgumentError(f"symmetric memory {what} at {bad[0]:#x} is not "
                                    f"{ALLOCATION_ALIGNMENT}-byte aligned")
        pad_bytes = getattr(self.handle, "signal_pad_size", None)
        if pad_bytes is not None and (SIGNAL_PAD_FIRST_WORD + signal_words) * 4 > pad_bytes:
            raise ArgumentError(f"SymmetricHeap: {signal_words} signals past word "
                                f"{SIGNAL_PAD_FIRST_WORD} do not fit torch's signal pad of "
                                f"{pad_bytes} bytes (symm_mem.set_signal_pad_size)")
        self.signal_pad = self.handle.get_signal_pad(
            self.rank, [signal_words], dtype=torch.int32,
            storage_offset=SIGNAL_PAD_FIRST_WORD)
        self.signal_pad.zero_()
        self.context = RankContext(
            self.rank, self.world_size,
            torch.tensor(list(self.handle.buffer_ptrs), dtype=torch.int64, device=device),
            torch.tensor(list(self.handle.signal_pad_ptrs), dtype=torch.int64, device=device),
            self.signal_pad)
        self._next_offset = 0
        self.barrier()

    def empty(self, name: str, shape: Sequence[int], dtype) -> SymmetricTensor:
        import numpy as np
        import torch

        if not isinstance(dtype, torch.dtype):  # a numpy dtype, as the simulated world takes
            dtype = torch.from_numpy(np.empty(0, np.dtype(dtype))).dtype
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        itemsize = torch.empty((), dtype=dtype).element_size()
        numel = 1
        for s in shape:
            numel *= s
        offset = -(-self._next_offset // ALLOCATION_ALIGNMENT) * ALLOCATION_ALIGNMENT
        if offset + numel * itemsize > self.heap_bytes:
            raise ArgumentError(f"SymmetricHeap.empty({name!r}): {numel * itemsize} bytes do "
                                f"not fit the heap ({self.heap_bytes - offset} of "
                                f"{self.heap_bytes} bytes left)")
        self._next_offset = offset + numel * itemsize
        view = self.heap[offset:offset + numel * itemsize].view(dtype).view(shape)
        view.zero_()
        return SymmetricTensor(name, view, self.rank, offset)

    def reset_signals(self) -> None:
        """Zero this rank's signals once no rank can still signal it, and wait until every
        rank did (before a launch that counts on fresh signals)."""
        self.barrier()
        self.signal_pad.zero_()
        self.barrier()

    def barrier(self) -> None:
        import torch

        torch.cuda.synchronize()
        self.handle.barrier()
        torch.cuda.synchronize()

    def launch(self, kernel, grid, args_of: Callable[[RankContext], Sequence], **kwargs):
        """This rank's launch (every process calls it, as the simulated world's launch)."""
        return kernel[grid](*args_of(self.context), **kwargs)


__all__ = ["SymmetricHeap", "SymmetricTensor", "SIGNAL_PAD_FIRST_WORD"]
