"""Layer-norm forward (Triton tutorial style): one program per row, looping over the row in
blocks to compute the mean and variance in fp32, then normalizing and applying w and b."""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tile  # noqa: E402
import tile.language as tl  # noqa: E402
from _common import empty_like, next_power_of_2, to_device, to_host, use_gpu  # noqa: E402


@tile.jit
def layer_norm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps,
                          BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += a
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        a = tl.where(cols < n_cols, a - mean, 0.0)
        acc += a * a
    var = tl.sum(acc, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x, w, b, eps=1e-5, block_size=None, num_warps=None):
    n_rows, n_cols = x.shape
    y = empty_like(x)
    if isinstance(x, np.ndarray):
        mean = np.empty(n_rows, dtype=np.float32)
        rstd = np.empty(n_rows, dtype=np.float32)
        stride = x.strides[0] // x.dtype.itemsize
    else:
        import torch

        mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        stride = x.stride(0)
    block = block_size or min(next_power_of_2(n_cols), 65536 // x.dtype.itemsize
                              if isinstance(x, np.ndarray) else 65536 // x.element_size())
    num_warps = num_warps or min(max(block // 256, 1), 8)
    layer_norm_fwd_kernel[(n_rows,)](x, y, w, b, mean, rstd, stride, n_cols, eps,
                                     BLOCK_SIZE=block, num_warps=num_warps)
    return y, mean, rstd


def reference(x, w, b, eps=1e-5):
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w.astype(np.float64) + b.astype(np.float64)


def main(n_rows: int = 16, n_cols: int = 1000, dtype=np.float16, block_size=256,
         gpu=None) -> float:
    gpu = use_gpu() if gpu is None else gpu
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n_rows, n_cols)).astype(dtype)
    w = rng.standard_normal(n_cols).astype(dtype)
    b = rng.standard_normal(n_cols).astype(dtype)
    y, _, _ = layer_norm(to_device(x, gpu), to_device(w, gpu), to_device(b, gpu),
                         block_size=block_size)
    error = float(np.max(np.abs(to_host(y).astype(np.float64) - reference(x, w, b))))
    print(f"layer norm {n_rows}x{n_cols} {np.dtype(dtype).name} on the "
          f"{'GPU' if gpu else 'CPU interpreter'}: max abs error {error:.3g}")
    if error > 2e-2:
        raise SystemExit(f"layer norm is wrong: max abs error {error}")
    return error


if __name__ == "__main__":
    main()
