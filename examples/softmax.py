"""Fused row softmax: one program per row, the row held in registers, one read and one write.

The max and the sum are reductions across the whole program (within threads, across lanes,
then across warps), so the row never goes back to memory between them.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tile  # noqa: E402
import tile.language as tl  # noqa: E402
from _common import empty_like, next_power_of_2, to_device, to_host, use_gpu  # noqa: E402


@tile.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    numerator = tl.exp(shifted)
    denominator = tl.sum(numerator, axis=0)
    y = numerator / denominator
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x, num_warps=None):
    n_rows, n_cols = x.shape
    out = empty_like(x)
    block = next_power_of_2(n_cols)
    if num_warps is None:
        num_warps = 4 if block <= 2048 else (8 if block <= 4096 else 16)
    softmax_kernel[(n_rows,)](out, x, x.strides[0] // _itemsize(x) if isinstance(x, np.ndarray)
                              else x.stride(0), out.strides[0] // _itemsize(out)
                              if isinstance(out, np.ndarray) else out.stride(0), n_cols,
                              BLOCK_SIZE=block, num_warps=num_warps)
    return out


def _itemsize(a: np.ndarray) -> int:
    return a.dtype.itemsize


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main(n_rows: int = 64, n_cols: int = 781, dtype=np.float16, gpu=None) -> float:
    gpu = use_gpu() if gpu is None else gpu
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n_rows, n_cols)).astype(dtype)
    out = to_host(softmax(to_device(x, gpu))).astype(np.float64)
    error = float(np.max(np.abs(out - reference(x))))
    print(f"softmax {n_rows}x{n_cols} {np.dtype(dtype).name} on the "
          f"{'GPU' if gpu else 'CPU interpreter'}: max abs error {error:.3g}")
    if error > 2e-3:
        raise SystemExit(f"softmax is wrong: max abs error {error}")
    return error


if __name__ == "__main__":
    main()
