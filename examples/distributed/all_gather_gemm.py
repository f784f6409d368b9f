"""All-gather + GEMM with the gather overlapped tile by tile (tensor-parallel MLP input).

Each of the `W` ranks holds `M_LOCAL` rows of A (its shard) and the column block of B it
multiplies with; every rank computes `C = all_gather(A) @ B_local`. Instead of a bulk
all-gather before the GEMM, one kernel does both:

- the first `M_LOCAL / BLOCK_M` programs are producers: each pushes one row tile of the
  local shard into every rank's gathered buffer `ag` (a symmetric tensor), then sets that
  rank's signal `rank * TILES + tile` (release: after the tile's stores);
- the other programs compute C tiles, starting with the rows of their own rank (ready
  first) and waiting, per row tile, for its signal (acquire); the wait's token orders the
  loads of `ag` after it (`consume_token`).

Run `python examples/distributed/all_gather_gemm.py` for 4 simulated ranks on the CPU, or
`torchrun --nproc-per-node 8 examples/distributed/all_gather_gemm.py` on GPUs.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tile  # noqa: E402
import tile.language as tl  # noqa: E402
from _world import fill, make_world, ranks, read  # noqa: E402
from tile.language import distributed as dl  # noqa: E402


@tile.jit
def all_gather_gemm_kernel(a_ptr, ag_ptr, b_ptr, c_ptr, heap_bases, signal_pad_bases,
                           signal_ptr, rank, world_size, M_LOCAL: tl.constexpr,
                           N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    TILES_M_LOCAL: tl.constexpr = M_LOCAL // BLOCK_M
    rows = tl.arange(0, BLOCK_M)
    ks = tl.arange(0, BLOCK_K)
    if pid < TILES_M_LOCAL:
        # Producer: push row tile `pid` of the local shard to every rank, then signal it.
        local_rows = pid * BLOCK_M + rows
        global_rows = rank * M_LOCAL + local_rows
        for step in range(0, world_size):
            peer = (rank + step) % world_size
            for k in range(0, K, BLOCK_K):
                src = a_ptr + local_rows[:, None] * K + (k + ks)[None, :]
                dst = ag_ptr + global_rows[:, None] * K + (k + ks)[None, :]
                dl.put(src, dst, rank, peer, heap_bases)
            dl.notify(signal_ptr + rank * TILES_M_LOCAL + pid, peer, rank, signal_pad_bases)
    else:
        tile_id = pid - TILES_M_LOCAL
        tiles_n = N // BLOCK_N
        tiles_m = world_size * TILES_M_LOCAL
        # Own rows first: they arrive first; then the next ranks' in ring order.
        tile_m = (tile_id // tiles_n + rank * TILES_M_LOCAL) % tiles_m
        tile_n = tile_id % tiles_n
        token = dl.wait(signal_ptr + tile_m)
        ag = dl.consume_token(ag_ptr, token)
        offs_m = tile_m * BLOCK_M + rows
        offs_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(ag + offs_m[:, None] * K + (k + ks)[None, :])
            b = tl.load(b_ptr + (k + ks)[:, None] * N + offs_n[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(c_ptr.dtype.element_ty))


def all_gather_gemm(world, a, ag, b, c, m_local, n, k, block_m=16, block_n=16, block_k=16,
                    num_warps=4):
    """C[rank] = all_gather(A) @ B[rank] on every rank of `world`."""
    world.reset_signals()
    tiles = m_local // block_m
    grid = (tiles + world.world_size * tiles * (n // block_n),)
    world.launch(all_gather_gemm_kernel, grid,
                 lambda ctx: (a.local(ctx), ag.local(ctx), b.local(ctx), c.local(ctx),
                              ctx.heap_bases, ctx.signal_pad_bases, ctx.signal_pad, ctx.rank,
                              ctx.world_size),
                 M_LOCAL=m_local, N=n, K=k, BLOCK_M=block_m, BLOCK_N=block_n,
                 BLOCK_K=block_k, num_warps=num_warps)


def main(world_size: int = 4, m_local: int = 32, n: int = 32, k: int = 32, block: int = 16,
         heap_bytes: int = 1 << 20) -> float:
    world, on_gpu = make_world(world_size, heap_bytes)
    w = world.world_size
    rng = np.random.default_rng(0)
    a_all = rng.standard_normal((w, m_local, k)).astype(np.float16)
    b_all = rng.standard_normal((w, k, n)).astype(np.float16)
    a = world.empty("a", (m_local, k), np.float16)
    ag = world.empty("ag", (w * m_local, k), np.float16)
    b = world.empty("b", (k, n), np.float16)
    c = world.empty("c", (w * m_local, n), np.float16)
    for r in ranks(world, on_gpu):
        fill(a, r, a_all[r], on_gpu)
        fill(b, r, b_all[r], on_gpu)
    if on_gpu:
        world.barrier()
    all_gather_gemm(world, a, ag, b, c, m_local, n, k, block, block, block)
    gathered = a_all.reshape(w * m_local, k).astype(np.float32)
    error = 0.0
    for r in ranks(world, on_gpu):
        expected = gathered @ b_all[r].astype(np.float32)
        error = max(error, float(np.max(np.abs(read(c, r, on_gpu) - expected))))
    where = "GPUs" if on_gpu else "simulated ranks"
    print(f"all-gather + GEMM on {w} {where}: M={w * m_local} N={n} K={k}, max abs error "
          f"{error:.3g}")
    if error > 0.1:
        raise SystemExit(f"all-gather + GEMM is wrong: max abs error {error}")
    return error


if __name__ == "__main__":
    main()
