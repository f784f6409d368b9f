"""A Gluon TMA copy: each program moves one [BM, BN] tile global -> shared memory with a TMA
load guarded by an mbarrier, then shared -> global with a TMA store. No thread touches the
data: the Tensor Memory Accelerator moves it, addressed by host-encoded tensor descriptors.

    bar: mbarrier.init(count=1)   one expected arrival: the expect below
    mbarrier.expect(bar, nbytes)  the arrival, plus the bytes the load will deliver
    tma load  -> smem             lands asynchronously and completes the bytes on `bar`
    mbarrier.wait(bar, phase=0)   phase 0 is complete: the tile is in shared memory
    tma store <- smem             reads smem asynchronously ...
    tma.store_wait(0)             ... and is done reading before the kernel exits

Tiles hanging off the tensor's edge need no masks: the load reads zeros there and the store
clips. Run `python examples/gluon/tma_copy.py`: on an H100 with torch it runs there, otherwise
in the CPU interpreter.
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
from gluon.language.nvidia.hopper import mbarrier, tma  # noqa: E402
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from _common import empty_like, to_device, to_host, use_gpu  # noqa: E402


@gluon.jit
def tma_copy_kernel(in_desc, out_desc):
    BM: gl.constexpr = in_desc.block_shape[0]
    BN: gl.constexpr = in_desc.block_shape[1]
    m = gl.program_id(0) * BM
    n = gl.program_id(1) * BN
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [m, n], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    tma.async_copy_shared_to_global(out_desc, [m, n], smem)
    tma.store_wait(0)


def tma_copy(x, block=(64, 64), num_warps: int = 4):
    """A copy of the 2-D array / tensor `x` (rows 16-byte aligned) made by `tma_copy_kernel`."""
    out = empty_like(x)
    itemsize = x.itemsize if isinstance(x, np.ndarray) else x.element_size()
    # The widest swizzle the tile's rows fill: 128-byte rows -> 128-byte swizzle.
    swizzle = min(128, block[1] * itemsize)
    layout = gl.NVMMASharedLayout(swizzle, 8 * itemsize)
    in_desc = TensorDescriptor.from_tensor(x, list(block), layout)
    out_desc = TensorDescriptor.from_tensor(out, list(block), layout)
    grid = (-(-x.shape[0] // block[0]), -(-x.shape[1] // block[1]))
    tma_copy_kernel[grid](in_desc, out_desc, num_warps=num_warps)
    return out


def reference(x: np.ndarray) -> np.ndarray:
    return x.copy()


def main(shape=(1000, 1000 + 24), dtype=np.float16, gpu=None) -> bool:
    gpu = use_gpu() if gpu is None else gpu
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    out = to_host(tma_copy(to_device(x, gpu)))
    if gpu:
        import torch

        torch.cuda.synchronize()
    ok = bool(np.array_equal(out, reference(x)))
    where = "GPU" if gpu else "CPU interpreter"
    print(f"gluon TMA copy of {list(shape)} {np.dtype(dtype).name} on the {where}: "
          f"{'exact' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("gluon TMA copy is wrong")
    return ok


if __name__ == "__main__":
    main()
