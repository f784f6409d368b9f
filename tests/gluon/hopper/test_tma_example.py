"""examples/gluon/tma_copy.py: main() in the interpreter (ragged edges included), its PTX, and
on the GPU (marker `gpu`) the example plus the TMA test kernels with CUDA tensor maps."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples",
                                "gluon"))

import tma_copy  # noqa: E402

import gluon  # noqa: E402


@pytest.mark.parametrize("shape", [(64, 64), (100, 200)])
def test_main_copies_exactly_in_the_interpreter(shape):
    assert tma_copy.main(shape=shape, gpu=False)


def test_the_example_kernel_compiles_to_tma_ptx():
    from gluon import language as gl
    from gluon.nvidia.hopper import TensorDescriptor

    d = TensorDescriptor.from_tensor(np.zeros((128, 128), np.float16), [64, 64],
                                     gl.NVMMASharedLayout(128, 16))
    ptx = gluon.compile(tma_copy.tma_copy_kernel, {"in_desc": d, "out_desc": d}).asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    assert "mbarrier.try_wait" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype", [((1000, 1024), np.float16), ((256, 512), np.float32)])
def test_main_on_the_gpu(shape, dtype):
    pytest.importorskip("torch")
    assert tma_copy.main(shape=shape, dtype=dtype, gpu=True)


@pytest.mark.gpu
def test_tma_kernels_on_the_gpu_match_the_interpreter():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.dirname(__file__))
    from hopper_kernels import arange2d, desc, tma_ring_kernel, tma_round_trip_kernel

    x = arange2d(128, 256)
    out = torch.zeros(128, 256, dtype=torch.float16, device="cuda")
    tma_round_trip_kernel[(4, 1)](desc(torch.from_numpy(x).cuda(), [32, 256]), out, 256,
                                  32 * 256 * 2, False)
    np.testing.assert_array_equal(out.cpu().numpy(), x)
    x = arange2d(64 * 7, 64)
    src = torch.from_numpy(x).cuda()
    dst = torch.zeros_like(src)
    tma_ring_kernel[(1,)](desc(src, [64, 64]), desc(dst, [64, 64]), 7, 3)
    np.testing.assert_array_equal(dst.cpu().numpy(), x + 1)
