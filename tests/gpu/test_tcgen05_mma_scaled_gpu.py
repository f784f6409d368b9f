"""Block-scaled tcgen05 MMA on a Blackwell GPU (sm_100): the interpreter-checked kernels of
tests/gluon/blackwell/test_tcgen05_mma_scaled.py against a float64 decode of the formats.
Nothing here has run on hardware yet (no Blackwell GPU was available): the scale placement
in tensor memory, the scale IDs and the fp4-padded TMA are what these would confirm. On
other GPUs the tests skip."""

import os
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "blackwell"))


def _blackwell():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 10:
        pytest.skip("needs a Blackwell (sm_100) GPU")
    return torch


def _cuda(torch, x):
    """A numpy array (ml_dtypes floats included) on the GPU, bytes kept."""
    import ml_dtypes
    kinds = {np.dtype(ml_dtypes.float8_e4m3fn): torch.float8_e4m3fn,
             np.dtype(ml_dtypes.float8_e5m2): torch.float8_e5m2}
    raw = torch.from_numpy(np.ascontiguousarray(x).view(np.uint8)).cuda()
    return raw.view(kinds[x.dtype]) if x.dtype in kinds else raw.view(
        getattr(torch, x.dtype.name))


@pytest.mark.parametrize("a_type,b_type,n,k,ue4m3", [
    ("e4m3", "e4m3", 128, 256, False), ("e5m2", "e4m3", 64, 128, False),
    ("e2m1", "e2m1", 256, 256, False), ("e2m1", "e2m1", 128, 128, True),
    ("e4m3", "e2m1", 64, 128, False), ("e2m1", "e5m2", 32, 128, False),
])
@pytest.mark.parametrize("scales_smem", [False, True])
def test_scaled_mma_on_blackwell(a_type, b_type, n, k, ue4m3, scales_smem):
    torch = _blackwell()
    from test_tcgen05_mma_scaled import PACKED_BLOCK, quantized, scaled_kernel
    m, vec = 128, 16 if ue4m3 else 32
    if scales_smem and (n, k // vec) != (128, 8):
        pytest.skip("the packed-block scale layout of the test kernel is [128, 8]")
    rng = np.random.default_rng(0)
    a, av, sa, sav = quantized(rng, m, k, a_type, vec, ue4m3)
    b, bv, sb, sbv = quantized(rng, n, k, b_type, vec, ue4m3)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = torch.zeros(m, n, device="cuda")
    scaled_kernel[(1,)](_cuda(torch, a), _cuda(torch, b), _cuda(torch, sa), _cuda(torch, sb),
                        _cuda(torch, c), out, M=m, N=n, KA=a.shape[1], KB=b.shape[1],
                        S=k // vec, A_TYPE=a_type, B_TYPE=b_type, RACE=False,
                        SCALES_SMEM=PACKED_BLOCK if scales_smem else None)
    ref = (av * sav.repeat(vec, axis=1)) @ (bv * sbv.repeat(vec, axis=1)).T + c
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("k", [128, 512])
def test_fp4_padded_tma_on_blackwell(k):
    torch = _blackwell()
    from gluon import language as gl
    from gluon.nvidia.blackwell import TensorDescriptor
    from test_tcgen05_mma_scaled import quantized, tma_mixed_kernel
    n = 64
    rng = np.random.default_rng(4)
    a, av, sa, sav = quantized(rng, 128, k, "e4m3", 32, False)
    b, bv, sb, sbv = quantized(rng, n, k, "e2m1", 32, False)
    a_desc = TensorDescriptor.from_tensor(
        _cuda(torch, a), [128, k], gl.NVMMASharedLayout.get_default_for([128, k], gl.float8e4nv))
    b_desc = TensorDescriptor.from_tensor(
        _cuda(torch, b), [n, k // 2],
        gl.NVMMASharedLayout.get_default_for([n, k // 2], gl.uint8, fp4_padded=True))
    out = torch.zeros(128, n, device="cuda")
    tma_mixed_kernel[(1,)](a_desc, b_desc, _cuda(torch, sa), _cuda(torch, sb), out, 0, N=n, K=k)
    ref = (av * sav.repeat(32, axis=1)) @ (bv * sbv.repeat(32, axis=1)).T
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-5, atol=1e-4)
