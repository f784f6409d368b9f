"""The pipeliner's multi-dot loops on the GPU: the attention backward's dK/dV loop (Q^T and dO
each read by two dots, once transposed; four wgmmas per iteration, async with waits where
their results are read, dV and dK in flight across the back edge) against a float64
reference and against the CPU interpreter on the same inputs, at the tutorial's block sizes:
HEAD_DIM 64 (the async schedule) and 128 (past the accumulator budget: synchronous)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tile", "passes"))
from test_pipelining_shared_loads import _inputs, _reference, dkdv_kernel  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("head_dim,mask", [(64, False), (64, True), (128, False)])
def test_dkdv_loop_matches_the_reference_and_the_interpreter(torch, head_dim, mask,
                                                             monkeypatch):
    n_q, n_k, bm, bn = 256, 256, 32, 128
    arrays = _inputs(n_q, n_k, head_dim, seed=head_dim + mask)
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=head_dim, MASK=mask, num_warps=4,
                num_stages=5)
    grid = (n_k // bn,)
    dev = [torch.from_numpy(x).cuda() for x in arrays]
    dk, dv = (torch.zeros((n_k, head_dim), dtype=torch.float32, device="cuda")
              for _ in range(2))
    dkdv_kernel[grid](*dev, dk, dv, n_q // bm, **meta)
    torch.cuda.synchronize()
    want_dk, want_dv = _reference(*arrays, mask)
    np.testing.assert_allclose(dv.cpu().numpy(), want_dv, rtol=1e-2, atol=2e-2)
    np.testing.assert_allclose(dk.cpu().numpy(), want_dk, rtol=1e-2, atol=2e-2)
    # The interpreter runs the same pipelined IR on the same inputs; the two differ only by
    # where P^T and dS^T round to fp16 (the GPU's ex2.approx against numpy's exp2).
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    host_dk, host_dv = (np.zeros((n_k, head_dim), np.float32) for _ in range(2))
    dkdv_kernel[grid](*arrays, host_dk, host_dv, n_q // bm, **meta)
    for gpu, host in ((dv, host_dv), (dk, host_dk)):
        gpu = gpu.cpu().numpy().astype(np.float64)
        diff = float(np.abs(gpu - host).max() / np.abs(host).max())
        assert diff <= 5e-3, diff
