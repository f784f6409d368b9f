"""Warp-specialized Gluon kernels on the GPU: partitions, named barriers, mbarrier rings, TMA
and wgmma in separate warps, against torch."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "warp_spec"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_tma_producer_feeds_the_default_partition_on_gpu(torch, stages):
    from ws_kernels import desc, producer_consumer_kernel

    a = torch.randn(64 * 5, 64, device="cuda", dtype=torch.float16)
    out = torch.zeros(5, 64, 64, device="cuda", dtype=torch.float16)
    producer_consumer_kernel[(1,)](desc(a, [64, 64]), out, 5, stages)
    torch.testing.assert_close(out.reshape(-1, 64), a + 1)


def test_partitions_see_their_own_warps_and_the_default_returns_values_on_gpu(torch):
    from ws_kernels import results_kernel

    x = torch.arange(128, device="cuda", dtype=torch.float32)
    out = torch.zeros(66, device="cuda")
    results_kernel[(1,)](x, out, 3.0)
    torch.testing.assert_close(out[32:64], x[:32] * 6 + 1)
    assert out[64].item() == x.sum().item() and out[65].item() == 4


@pytest.mark.parametrize("stages", [2, 3])
def test_tma_producer_and_wgmma_consumer_matmul_tile_on_gpu(torch, stages):
    from ws_kernels import desc, ws_matmul_kernel

    a = torch.randn(64, 320, device="cuda", dtype=torch.float16)
    b = torch.randn(320, 64, device="cuda", dtype=torch.float16)
    out = torch.zeros(64, 64, device="cuda")
    ws_matmul_kernel[(1,)](desc(a, [64, 64]), desc(b, [64, 64]), out, 5, stages)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
