"""A Gluon copy kernel: the layout is written out, 16 bytes per thread per access.

`BlockedLayout([VEC], [32], [num_warps], [0])` gives each thread VEC consecutive elements
(VEC * element size = 16 bytes, one `ld.global.v4.b32`), lanes next to each other, warps after
them; the block of BLOCK elements repeats that pattern. Run `python examples/gluon/copy_kernel.py`:
on a GPU with torch it runs there, otherwise in the CPU interpreter.
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
from _common import empty_like, to_device, to_host, use_gpu  # noqa: E402


@gluon.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: gl.constexpr, VEC: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    gl.store(dst_ptr + offs, gl.load(src_ptr + offs, mask=mask), mask=mask)


def copy(x, block: int = 4096, num_warps: int = 4):
    """A copy of the 1-D array / tensor `x` made by `copy_kernel`."""
    out = empty_like(x)
    n = x.shape[0]
    itemsize = x.itemsize if isinstance(x, np.ndarray) else x.element_size()
    vec = max(1, 16 // itemsize)
    copy_kernel[(-(-n // block),)](x, out, n, BLOCK=block, VEC=vec, num_warps=num_warps)
    return out


def reference(x: np.ndarray) -> np.ndarray:
    return x.copy()


def main(n: int = 100_000, dtype=np.float16, gpu=None) -> bool:
    gpu = use_gpu() if gpu is None else gpu
    x = np.random.default_rng(0).standard_normal(n).astype(dtype)
    out = to_host(copy(to_device(x, gpu), block=1024 if not gpu else 4096))
    ok = bool(np.array_equal(out, reference(x)))
    where = "GPU" if gpu else "CPU interpreter"
    print(f"gluon copy of {n} {np.dtype(dtype).name} on the {where}: "
          f"{'exact' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("gluon copy is wrong")
    return ok


if __name__ == "__main__":
    main()
