"""GEMM + reduce-scatter in one kernel (tensor-parallel MLP output).

Each of the `W` ranks holds a column block of A (`M x K_LOCAL`) and the matching row block
of B (`K_LOCAL x N`); the product is the sum of the ranks' partial products, and rank `r`
owns rows `[r * M / W, (r + 1) * M / W)` of it. One kernel per rank:

- GEMM programs compute a partial tile and store it straight into its owner's staging
  buffer `stage` (a symmetric `W x M_LOCAL x N` tensor, slot = the producing rank), then add
  1 to the owner's counter for that tile (release: after the tile's stores);
- reduce programs wait until their tile's counter reaches `W` (acquire), and sum the `W`
  slots into the rank's output rows.

Run `python examples/distributed/gemm_reduce_scatter.py` for 4 simulated ranks on the CPU,
or under `torchrun --nproc-per-node 8` on GPUs.
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
def gemm_reduce_scatter_kernel(a_ptr, b_ptr, stage_ptr, out_ptr, heap_bases, signal_pad_bases,
                               signal_ptr, rank, world_size, M_LOCAL: tl.constexpr,
                               N: tl.constexpr, K_LOCAL: tl.constexpr, BLOCK_M: tl.constexpr,
                               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    TILES_N: tl.constexpr = N // BLOCK_N
    TILES_LOCAL: tl.constexpr = (M_LOCAL // BLOCK_M) * TILES_N
    gemm_tiles = world_size * TILES_LOCAL
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    if pid < gemm_tiles:
        # Tiles of the next rank first, so no rank's rows all come last.
        tile_id = (pid + (rank + 1) * TILES_LOCAL) % gemm_tiles
        owner = tile_id // TILES_LOCAL
        local_tile = tile_id % TILES_LOCAL
        local_rows = (local_tile // TILES_N) * BLOCK_M + rows
        offs_n = (local_tile % TILES_N) * BLOCK_N + cols
        offs_m = owner * M_LOCAL + local_rows
        ks = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K_LOCAL, BLOCK_K):
            a = tl.load(a_ptr + offs_m[:, None] * K_LOCAL + (k + ks)[None, :])
            b = tl.load(b_ptr + (k + ks)[:, None] * N + offs_n[None, :])
            acc = tl.dot(a, b, acc)
        slot = stage_ptr + rank * M_LOCAL * N
        dl.store(slot + local_rows[:, None] * N + offs_n[None, :], acc, rank, owner, heap_bases)
        dl.notify(signal_ptr + local_tile, owner, rank, signal_pad_bases, sig_op="add")
    else:
        local_tile = pid - gemm_tiles
        token = dl.wait(signal_ptr + local_tile, world_size, cmp="ge")
        stage = dl.consume_token(stage_ptr, token)
        local_rows = (local_tile // TILES_N) * BLOCK_M + rows
        offs_n = (local_tile % TILES_N) * BLOCK_N + cols
        tile_offs = local_rows[:, None] * N + offs_n[None, :]
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for src in range(0, world_size):
            total += tl.load(stage + src * M_LOCAL * N + tile_offs)
        tl.store(out_ptr + tile_offs, total.to(out_ptr.dtype.element_ty))


def gemm_reduce_scatter(world, a, b, stage, out, m_local, n, k_local, block_m=16, block_n=16,
                        block_k=16, num_warps=4):
    """out[rank] = rows of rank of sum over ranks of A[r] @ B[r]."""
    world.reset_signals()
    tiles_local = (m_local // block_m) * (n // block_n)
    grid = ((world.world_size + 1) * tiles_local,)
    world.launch(gemm_reduce_scatter_kernel, grid,
                 lambda ctx: (a.local(ctx), b.local(ctx), stage.local(ctx), out.local(ctx),
                              ctx.heap_bases, ctx.signal_pad_bases, ctx.signal_pad, ctx.rank,
                              ctx.world_size),
                 M_LOCAL=m_local, N=n, K_LOCAL=k_local, BLOCK_M=block_m, BLOCK_N=block_n,
                 BLOCK_K=block_k, num_warps=num_warps)


def main(world_size: int = 4, m_local: int = 32, n: int = 32, k_local: int = 32,
         block: int = 16, heap_bytes: int = 1 << 20) -> float:
    world, on_gpu = make_world(world_size, heap_bytes)
    w = world.world_size
    m = w * m_local
    rng = np.random.default_rng(0)
    a_all = rng.standard_normal((w, m, k_local)).astype(np.float16)
    b_all = rng.standard_normal((w, k_local, n)).astype(np.float16)
    a = world.empty("a", (m, k_local), np.float16)
    b = world.empty("b", (k_local, n), np.float16)
    stage = world.empty("stage", (w, m_local, n), np.float32)
    out = world.empty("out", (m_local, n), np.float32)
    for r in ranks(world, on_gpu):
        fill(a, r, a_all[r], on_gpu)
        fill(b, r, b_all[r], on_gpu)
    if on_gpu:
        world.barrier()
    gemm_reduce_scatter(world, a, b, stage, out, m_local, n, k_local, block, block, block)
    total = sum(a_all[r].astype(np.float32) @ b_all[r].astype(np.float32) for r in range(w))
    error = 0.0
    for r in ranks(world, on_gpu):
        expected = total[r * m_local:(r + 1) * m_local]
        error = max(error, float(np.max(np.abs(read(out, r, on_gpu) - expected))))
    where = "GPUs" if on_gpu else "simulated ranks"
    print(f"GEMM + reduce-scatter on {w} {where}: M={m} N={n} K={w * k_local}, max abs error "
          f"{error:.3g}")
    if error > 0.05:
        raise SystemExit(f"GEMM + reduce-scatter is wrong: max abs error {error}")
    return error


if __name__ == "__main__":
    main()
