"""Vector addition: the smallest complete tile kernel.

Run `python examples/vector_add.py`: on a machine with a GPU (and torch) it runs there;
otherwise the CPU interpreter runs the same kernel on numpy arrays.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tile  # noqa: E402
import tile.language as tl  # noqa: E402
from _common import empty_like, to_device, to_host, use_gpu  # noqa: E402


@tile.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y, block_size: int = 1024, num_warps: int = 4):
    out = empty_like(x)
    n = x.shape[0]
    add_kernel[lambda meta: (tile.cdiv(n, meta["BLOCK_SIZE"]),)](
        x, y, out, n, BLOCK_SIZE=block_size, num_warps=num_warps)
    return out


def main(n: int = 98432, gpu=None) -> float:
    gpu = use_gpu() if gpu is None else gpu
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = to_host(add(to_device(x, gpu), to_device(y, gpu)))
    error = float(np.max(np.abs(out - (x + y))))
    where = "GPU" if gpu else "CPU interpreter"
    print(f"vector add of {n} float32 on the {where}: max abs error {error:.3g}")
    if error != 0.0:
        raise SystemExit(f"vector add is wrong: max abs error {error}")
    return error


if __name__ == "__main__":
    main()
