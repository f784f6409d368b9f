"""Do TMA loads and stores take negative coordinates on this GPU? One case per process
(an illegal instruction ends the CUDA context): `python tma_negative_probe.py LOAD STORE MODE`
copies the [64, 64] fp16 box at row LOAD of a 4-D [1, 1, 256, 64] tensor to row STORE of
another (MODE store, or add: a TMA reduce-add), and prints what the GPU wrote against the
interpreter's result. Without arguments it runs the cases one process each.

H100, 2026-12-07: loads at negative rows (partly or wholly before row 0) read zeros, as the
interpreter says; stores and reduce-adds at rows -24 and -64 end the kernel with an illegal
instruction (the interpreter now reports them)."""

import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402
from gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma  # noqa: E402
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=4)


@gluon.jit
def probe_kernel(in_desc, out_desc, m_load, m_store, ADD: gl.constexpr):
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [0, 0, m_load, 0], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    fence_async_shared()
    if ADD:  # cp.reduce.async.bulk.tensor .add
        tma.async_atomic_add(out_desc, [0, 0, m_store, 0], smem)
    else:
        tma.async_copy_shared_to_global(out_desc, [0, 0, m_store, 0], smem)
    tma.store_wait(0)


def run(x, out, m_load, m_store, add=False):
    mk = lambda t: TensorDescriptor.from_tensor(t, [1, 1, 64, 64], LAYOUT)  # noqa: E731
    probe_kernel[(1,)](mk(x), mk(out), m_load, m_store, add)
    return out


def one(m_load, m_store, add):
    import torch
    x = (np.arange(256 * 64) % 1999).reshape(1, 1, 256, 64).astype(np.float16) + 1
    ref = run(x, np.full_like(x, -1), m_load, m_store, add)
    xg = torch.from_numpy(x).cuda()
    out = torch.full_like(xg, -1)
    run(xg, out, m_load, m_store, add)
    torch.cuda.synchronize()
    same = np.array_equal(out.cpu().numpy(), ref)
    print(f"{'add' if add else 'store'}: {'matches the interpreter' if same else 'DIFFERS'}",
          flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4:
        one(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "add")
    else:
        for m_load, m_store, mode in ((0, 0, "store"), (-24, 0, "store"), (0, -24, "store"),
                                      (-64, 0, "store"), (0, -64, "store"), (0, 0, "add"),
                                      (0, -24, "add"), (0, -64, "add")):
            r = subprocess.run([sys.executable, __file__, str(m_load), str(m_store), mode],
                               capture_output=True, text=True, timeout=120)
            tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
            print(f"load {m_load:4d} store {m_store:4d}: rc={r.returncode} {tail[0][:200]}",
                  flush=True)
