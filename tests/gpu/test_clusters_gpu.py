"""Thread-block clusters on the H100 (docs/clusters.md): a 2-CTA cluster whose A tiles are TMA
multicast (each CTA fetches half the rows for both) computes a GEMM that matches numpy; CTA
ranks, cluster ids and the cluster barrier; remote mbarrier arrivals on CTA 0's barrier.

    PYTHONPATH=. python3 -m pytest -q tests/gpu/test_clusters_gpu.py
"""

import os
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "gluon",
                                                "hopper")))
import cluster_kernels as ck  # noqa: E402

from gluon import language as gl  # noqa: E402
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_a_multicast_gemm_in_clusters_matches_numpy(torch, num_ctas):
    m, n, k, bm, bn, bk = 256, 128 * num_ctas, 512, 64, 64, 64
    gen = torch.Generator().manual_seed(num_ctas)
    a = torch.randn(m, k, generator=gen).to(torch.float16)
    b = torch.randn(k, n, generator=gen).to(torch.float16)
    a_dev, b_dev = a.cuda(), b.cuda()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    a_desc = TensorDescriptor.from_tensor(
        a_dev, [bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], gl.float16))
    b_desc = TensorDescriptor.from_tensor(
        b_dev, [bk, bn], gl.NVMMASharedLayout.get_default_for([bk, bn], gl.float16))
    kernel = ck.multicast_gemm_kernel[(m // bm, n // (num_ctas * bn))](
        a_desc, b_desc, c, n, k, num_ctas=num_ctas)
    torch.cuda.synchronize()
    ref = a.double().numpy() @ b.double().numpy()
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=1e-3, atol=2e-2)
    assert kernel.metadata["tma_boxes"] == {"0": [bm // num_ctas, bk]}
    assert "multicast::cluster" in kernel.asm["ptx"]


def test_cta_ranks_cluster_ids_and_remote_arrivals(torch):
    out = torch.full((8,), -1, device="cuda", dtype=torch.int32)
    ck.cluster_ids_kernel[(4,)](out, num_ctas=2)
    torch.cuda.synchronize()
    assert out.tolist() == [0, 1, 10, 11, 20, 21, 30, 31]
    counts = torch.zeros(3, device="cuda", dtype=torch.int32)
    ck.gather_arrivals_kernel[(3,)](counts, 4, num_ctas=4)
    torch.cuda.synchronize()
    assert counts.tolist() == [4, 4, 4]


def test_a_warp_specialized_multicast_pipeline_matches_numpy(torch):
    # The worker warps take part in the cluster barrier before the split, and the consumers
    # release the slot to every CTA with multicast_cta arrivals.
    steps, bm, bk = 8, 64, 64
    a = torch.randn(steps * bm, bk, generator=torch.Generator().manual_seed(3)).to(
        torch.float16)
    a_desc = TensorDescriptor.from_tensor(
        a.cuda(), [bm, bk], gl.NVMMASharedLayout.get_default_for([bm, bk], gl.float16))
    out = torch.zeros((4, 2, bm, bk), device="cuda", dtype=torch.float32)
    ck.multicast_pipeline_kernel[(4,)](a_desc, out, steps, num_ctas=2)
    torch.cuda.synchronize()
    ref = a.float().numpy().reshape(steps, bm, bk).sum(0)
    np.testing.assert_allclose(out.cpu().numpy(), np.broadcast_to(ref, (4, 2, bm, bk)),
                               rtol=1e-5, atol=1e-4)
