"""All-gather + GEMM and GEMM + reduce-scatter (examples/distributed) against torch's NCCL
collective followed by (preceded by) `torch.matmul`, on every GPU of one host.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc-per-node 8 benchmarks/distributed_overlap.py [--m 8192 --n 8192 --k 8192]

Each rank checks its result against the torch reference first, then times both, interleaved
round by round (CUDA events, median); rank 0 prints the ratios. Our iteration includes what
its protocol needs between launches, stream-ordered: a symmetric-memory barrier, zeroing
the signals, and a second barrier (no host synchronization).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "distributed"))


def _time_ms(fn, torch, inner):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / inner


def _medians(fns, torch, rounds, inner):
    import torch.distributed as dist

    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            dist.barrier()
            times[name].append(_time_ms(fn, torch, inner))
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--k", type=int, default=8192)
    parser.add_argument("--block-m", type=int, default=128)
    parser.add_argument("--block-n", type=int, default=128)
    parser.add_argument("--block-k", type=int, default=64)
    parser.add_argument("--num-warps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--inner", type=int, default=3)
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    import all_gather_gemm
    import gemm_reduce_scatter
    from _world import make_world

    heap, on_gpu = make_world(0, heap_bytes=1 << 30)
    if not on_gpu:
        raise SystemExit("run under torchrun on GPUs (see the module docstring)")
    w, rank = heap.world_size, heap.rank
    m, n, k = args.m, args.n, args.k
    blocks = dict(block_m=args.block_m, block_n=args.block_n, block_k=args.block_k,
                  num_warps=args.num_warps)
    torch.manual_seed(rank)
    bf16 = torch.bfloat16

    def ours(run):
        def call():
            heap.handle.barrier()
            heap.signal_pad.zero_()
            heap.handle.barrier()
            run()
        return call

    # ---- all-gather + GEMM: A row-sharded, B column-sharded, C = all_gather(A) @ B_local
    m_local, n_local = m // w, n // w
    a = heap.empty("a", (m_local, k), bf16)
    ag = heap.empty("ag", (m, k), bf16)
    b = heap.empty("b", (k, n_local), bf16)
    c = heap.empty("c", (m, n_local), bf16)
    a.tensor.copy_(torch.randn(m_local, k, device="cuda", dtype=bf16))
    b.tensor.copy_(torch.randn(k, n_local, device="cuda", dtype=bf16) / k ** 0.5)
    gathered = torch.empty(m, k, device="cuda", dtype=bf16)

    def ag_torch():
        dist.all_gather_into_tensor(gathered, a.tensor)
        return torch.matmul(gathered, b.tensor)

    heap.barrier()
    ag_ours = ours(lambda: all_gather_gemm.all_gather_gemm(
        _NoReset(heap), a, ag, b, c, m_local, n_local, k, **blocks))
    ag_ours()
    torch.cuda.synchronize()
    torch.testing.assert_close(c.tensor, ag_torch(), rtol=2e-2, atol=2e-2)
    ag_times = _medians({"ours": ag_ours, "torch": ag_torch}, torch, args.rounds, args.inner)

    # ---- GEMM + reduce-scatter: A column-sharded, B row-sharded, out = rows of rank of sum
    k_local = k // w
    a2 = heap.empty("a2", (m, k_local), bf16)
    b2 = heap.empty("b2", (k_local, n), bf16)
    stage = heap.empty("stage", (w, m_local, n), torch.float32)
    out = heap.empty("out", (m_local, n), torch.float32)
    a2.tensor.copy_(torch.randn(m, k_local, device="cuda", dtype=bf16))
    b2.tensor.copy_(torch.randn(k_local, n, device="cuda", dtype=bf16) / k ** 0.5)
    scattered = torch.empty(m_local, n, device="cuda", dtype=torch.float32)

    def rs_torch():
        partial = torch.matmul(a2.tensor, b2.tensor).float()
        dist.reduce_scatter_tensor(scattered, partial)
        return scattered

    heap.barrier()
    rs_ours = ours(lambda: gemm_reduce_scatter.gemm_reduce_scatter(
        _NoReset(heap), a2, b2, stage, out, m_local, n, k_local, **blocks))
    rs_ours()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.tensor, rs_torch().clone(), rtol=2e-2, atol=5e-2)
    rs_times = _medians({"ours": rs_ours, "torch": rs_torch}, torch, args.rounds, args.inner)

    if rank == 0:
        for name, t in (("all-gather + GEMM", ag_times), ("GEMM + reduce-scatter", rs_times)):
            print(f"{name} on {w} GPUs, M={m} N={n} K={k} bf16: ours {t['ours']:.3f} ms, "
                  f"torch collective + matmul {t['torch']:.3f} ms, speedup "
                  f"{t['torch'] / t['ours']:.2f}x")
    dist.destroy_process_group()


class _NoReset:
    """The heap as the examples' launchers see it, with `reset_signals` left to `ours`
    (stream-ordered there, instead of the host barriers of SymmetricHeap.reset_signals)."""

    def __init__(self, heap):
        self._heap = heap
        self.world_size = heap.world_size

    def reset_signals(self):
        pass

    def launch(self, *args, **kwargs):
        return self._heap.launch(*args, **kwargs)


if __name__ == "__main__":
    main()
