"""mma_v2 with an fp16 accumulator (`mma.sync ... m16n8k16 .f16.f16.f16.f16`, Triton 3.6
allows it): interpreter numerics and the PTX, where C/D are f16x2 pairs."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.ampere import mma_v2


@gluon.jit
def mma_f16_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                   K: gl.constexpr):
    mma: gl.constexpr = gl.NVMMADistributedLayout([2, 0], [2, 2], [16, 8])
    a_l: gl.constexpr = gl.DotOperandLayout(0, mma, 2)
    b_l: gl.constexpr = gl.DotOperandLayout(1, mma, 2)
    am = gl.arange(0, M, gl.SliceLayout(1, a_l))
    ak = gl.arange(0, K, gl.SliceLayout(0, a_l))
    bk = gl.arange(0, K, gl.SliceLayout(1, b_l))
    bn = gl.arange(0, N, gl.SliceLayout(0, b_l))
    cm = gl.arange(0, M, gl.SliceLayout(1, mma))
    cn = gl.arange(0, N, gl.SliceLayout(0, mma))
    a = gl.load(a_ptr + am[:, None] * K + ak[None, :])
    b = gl.load(b_ptr + bk[:, None] * N + bn[None, :])
    c = gl.load(c_ptr + cm[:, None] * N + cn[None, :])
    gl.store(out_ptr + cm[:, None] * N + cn[None, :], mma_v2(a, b, c))


@pytest.mark.parametrize("mnk", [(32, 16, 16), (64, 32, 32)])
def test_an_fp16_accumulator_matches_numpy(mnk):
    m, n, k = mnk
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    c = rng.uniform(-1, 1, (m, n)).astype(np.float16)
    out = np.zeros((m, n), np.float16)
    mma_f16_kernel[(1,)](a, b, c, out, m, n, k)
    want = a.astype(np.float32) @ b.astype(np.float32) + c.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_the_fp16_accumulator_form_compiles_to_f16x2_registers():
    ptx = gluon.compile(mma_f16_kernel, {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16",
                                         "c_ptr": "*fp16:16", "out_ptr": "*fp16:16"},
                        {"M": 32, "N": 16, "K": 16}, target="sm_90a").asm["ptx"]
    # One 16x8 tile per warp (warps_per_cta=[2, 2]) and one K step.
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16") == 1
    assert "f32.f16.f16.f32" not in ptx


@pytest.mark.gpu
def test_an_fp16_accumulator_on_the_gpu_matches_torch():
    torch = pytest.importorskip("torch")
    m, n, k = 64, 32, 32
    a, b, c = (torch.rand(shape, device="cuda").half() * 2 - 1
               for shape in ((m, k), (k, n), (m, n)))
    out = torch.empty(m, n, device="cuda", dtype=torch.float16)
    mma_f16_kernel[(1,)](a, b, c, out, m, n, k)
    want = a.float() @ b.float() + c.float()
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
