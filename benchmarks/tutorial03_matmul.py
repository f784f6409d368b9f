"""A grouped-ordering matmul with the structure of Triton's tutorial 03 (program ids grouped
along M for L2 reuse, K-masked loads, an fp32 accumulator fed by `tl.dot`, an fp16 masked
store), written for this project. `benchmarks/tile_matmul.py` imports this file twice, once
with MATMUL_FRONTEND=triton, so the identical source runs under Triton 3.6 and under our tile
DSL. Upstream's own tutorial is checked by import swap outside the repository.
"""

import os

if os.environ.get("MATMUL_FRONTEND") == "triton":
    import triton
    import triton.language as tl
else:
    import tile as triton
    import tile.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                  ACTIVATION: tl.constexpr):
    """c (M, N) = a (M, K) @ b (K, N); one BLOCK_SIZE_M x BLOCK_SIZE_N tile per program."""
    # Programs walk the output in column-major groups of GROUP_SIZE_M tile rows, so the
    # programs resident together share their B tiles in L2.
    tile_id = tl.program_id(axis=0)
    row_tiles = tl.cdiv(M, BLOCK_SIZE_M)
    col_tiles = tl.cdiv(N, BLOCK_SIZE_N)
    tiles_per_group = GROUP_SIZE_M * col_tiles
    first_row = (tile_id // tiles_per_group) * GROUP_SIZE_M
    rows_here = min(row_tiles - first_row, GROUP_SIZE_M)
    row = first_row + ((tile_id % tiles_per_group) % rows_here)
    col = (tile_id % tiles_per_group) // rows_here

    # Facts the address arithmetic may rely on.
    tl.assume(row >= 0)
    tl.assume(col >= 0)
    tl.assume(stride_am > 0)
    tl.assume(stride_ak > 0)
    tl.assume(stride_bn > 0)
    tl.assume(stride_bk > 0)
    tl.assume(stride_cm > 0)
    tl.assume(stride_cn > 0)

    # Rows and columns past the edge wrap around (their results are never stored), so the
    # loads need no M/N mask; only K is masked.
    rows = (row * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (col * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + (rows[:, None] * stride_am + ks[None, :] * stride_ak)
    b_tile = b_ptr + (ks[:, None] * stride_bk + cols[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - step * BLOCK_SIZE_K
        a = tl.load(a_tile, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)

    out_rows = row * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = col * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile = c_ptr + stride_cm * out_rows[:, None] + stride_cn * out_cols[None, :]
    in_bounds = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_tile, acc.to(tl.float16), mask=in_bounds)


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def matmul(a, b, config, activation=""):
    """C = A @ B (fp16 C) with one tutorial config: dict with BLOCK_SIZE_M/N/K, GROUP_SIZE_M,
    num_warps, num_stages."""
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "Incompatible dimensions"
    import torch
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    meta = {k: v for k, v in config.items() if k not in ("num_warps", "num_stages")}
    grid = (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), ACTIVATION=activation,
                        num_warps=config["num_warps"], num_stages=config["num_stages"], **meta)
    return c
