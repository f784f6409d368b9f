"""A Gluon transpose: load rows coalesced, `gl.convert_layout`, store columns coalesced.

`y[j, i] = x[i, j]` for a row-major M x N `x`. Reading `x` wants consecutive lanes on
consecutive columns (`LOAD`, order [1, 0]); writing `y` wants them on consecutive rows of the
tile (`STORE`, order [0, 1]). Between the two, `gl.convert_layout(tile, STORE)` moves every
element to the thread that stores it: the planner (`shared_codegen.layouts.planner.plan_conversion`)
calls it a shared-memory round trip and picks the swizzle and vector width, so neither global
access is strided. Run `python examples/gluon/transpose_kernel.py`.
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402
from _common import to_device, to_host, use_gpu  # noqa: E402


@gluon.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_x, stride_y, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, VEC: gl.constexpr):
    nw: gl.constexpr = gl.num_warps()
    LOAD: gl.constexpr = gl.BlockedLayout([1, VEC], [32 * VEC // BLOCK_N, BLOCK_N // VEC],
                                          [nw, 1], [1, 0])
    STORE: gl.constexpr = gl.BlockedLayout([VEC, 1], [BLOCK_M // VEC, 32 * VEC // BLOCK_M],
                                           [1, nw], [0, 1])
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)

    rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, LOAD))
    cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, LOAD))
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = gl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask)

    tile = gl.convert_layout(tile, STORE)

    rows = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, STORE))
    cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, STORE))
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    gl.store(y_ptr + cols[None, :] * stride_y + rows[:, None], tile, mask=mask)


def transpose(x, block_m: int = 64, block_n: int = 64, num_warps: int = 4):
    """`x.T` (a new row-major array / tensor) computed by `transpose_kernel`."""
    m, n = x.shape
    if isinstance(x, np.ndarray):
        out = np.empty((n, m), dtype=x.dtype)
        itemsize = x.itemsize
    else:
        import torch

        out = torch.empty((n, m), dtype=x.dtype, device=x.device)
        itemsize = x.element_size()
    vec = min(16 // itemsize, block_m, block_n)
    grid = (-(-m // block_m), -(-n // block_n))
    transpose_kernel[grid](x, out, m, n, n, m, BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec,
                           num_warps=num_warps)
    return out


def reference(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.T)


def main(m: int = 200, n: int = 136, dtype=np.float32, gpu=None) -> bool:
    gpu = use_gpu() if gpu is None else gpu
    x = np.random.default_rng(0).standard_normal((m, n)).astype(dtype)
    out = to_host(transpose(to_device(x, gpu)))
    ok = bool(np.array_equal(out, reference(x)))
    where = "GPU" if gpu else "CPU interpreter"
    print(f"gluon transpose of {m}x{n} {np.dtype(dtype).name} on the {where}: "
          f"{'exact' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("gluon transpose is wrong")
    return ok


if __name__ == "__main__":
    main()
