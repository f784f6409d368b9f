"""The flash attention kernels of tests/tile/test_attention_patterns.py (tutorial 06's features:
host tensor descriptors, P in registers, exp2, causal stages, the backward's transposed dots)
on the GPU, against the same float64 numpy reference and against the interpreter."""

import importlib.util
import os

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

PATH = os.path.join(os.path.dirname(__file__), "..", "tile", "test_attention_patterns.py")


def _patterns():
    spec = importlib.util.spec_from_file_location("attention_patterns_gpu", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention_forward_and_backward_on_gpu_match_numpy(causal, head_dim):
    torch = _torch()
    pat = _patterns()
    TensorDescriptor = pat.TensorDescriptor
    heads, n, sm_scale = 2, 256, 0.5
    q, k, v, do = pat._inputs(heads, n, head_dim, seed=3)
    want_o, want_lse, want_dq, want_dk, want_dv = pat._reference(q, k, v, do, sm_scale, causal)
    gq, gk, gv, gdo = (torch.from_numpy(x).cuda() for x in (q, k, v, do))
    o = torch.zeros_like(gq)
    lse = torch.zeros((heads, n), dtype=torch.float32, device="cuda")
    rows = lambda x, block: TensorDescriptor(x.view(heads * n, head_dim), [heads * n, head_dim],
                                             [head_dim, 1], [block, head_dim])
    pat.attention_forward[(n // 64, heads)](rows(gq, 64), rows(gk, 32), rows(gv, 32),
                                            rows(o, 64), lse, sm_scale, n, HEAD_DIM=head_dim,
                                            BLOCK_M=64, BLOCK_N=32, CAUSAL=causal, num_warps=4)
    torch.cuda.synchronize()
    np.testing.assert_allclose(o.cpu().numpy().astype(np.float64), want_o, atol=4e-3, rtol=0)
    np.testing.assert_allclose(lse.cpu().numpy(), want_lse, atol=2e-5, rtol=1e-5)
    delta = (o.float() * gdo.float()).sum(-1)
    dq, dk, dv = (torch.zeros_like(gq) for _ in range(3))
    pat.attention_backward_dkdv[(n // 64, heads)](gq, gk, gv, gdo, dk, dv, lse, delta, sm_scale,
                                                  n, HEAD_DIM=head_dim, BLOCK_M=32, BLOCK_N=64,
                                                  CAUSAL=causal, num_warps=4)
    pat.attention_backward_dq[(n // 64, heads)](gq, gk, gv, gdo, dq, lse, delta, sm_scale, n,
                                                HEAD_DIM=head_dim, BLOCK_M=64, BLOCK_N=32,
                                                CAUSAL=causal, num_warps=4)
    torch.cuda.synchronize()
    for got, want in ((dq, want_dq), (dk, want_dk), (dv, want_dv)):
        np.testing.assert_allclose(got.cpu().numpy().astype(np.float64), want, atol=1e-2, rtol=0)
