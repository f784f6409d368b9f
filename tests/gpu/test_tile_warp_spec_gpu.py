"""tl.range(warp_specialize=True) on the GPU (sm_90a): the TMA matmul, the persistent matmul
with host descriptors and the persistent matmul with descriptors the kernel builds, each
against float64 numpy at tutorial 09's block sizes (128 x 128 x 64, 8 consumer warps plus
the producer warp), ragged in M, N and K."""

import os
import sys

import numpy as np
import pytest

import tile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tile", "passes"))
from tile_ws_kernels import (descriptors, fp32_tolerance, matmul_descriptor_persistent,  # noqa
                             matmul_tma, operands, persistent_matmul)

pytestmark = pytest.mark.gpu
BM, BN, BK = 128, 128, 64


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("m,n,k,num_stages", [(1000, 520, 1000, 3), (256, 256, 64, 4),
                                              (4096, 4096, 4096, 4)])
@pytest.mark.parametrize("persistent", [False, True])
def test_warp_specialized_matmul_matches_numpy(torch, m, n, k, num_stages, persistent):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("sm_90a only")
    a, b, want = operands(m, n, k, seed=m + k)
    ad, bd = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    descs = descriptors(ad, bd, c, BM, BN, BK)
    tiles = -(-m // BM) * -(-n // BN)
    if persistent:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        persistent_matmul[(min(sms, tiles),)](*descs, m, n, k, BM=BM, BN=BN, BK=BK, GROUP_M=8,
                                              NUM_SMS=min(sms, tiles), WS=True, num_warps=8,
                                              num_stages=num_stages)
    else:
        matmul_tma[(tiles,)](*descs, m, n, k, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                             WARP_SPECIALIZE=True, num_warps=8, num_stages=num_stages)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), want, **fp32_tolerance(k))


def test_kernel_built_descriptors_in_the_producer(torch):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("sm_90a only")
    m, n, k = 1000, 520, 1000
    a, b, want = operands(m, n, k, seed=3)
    ad, bd = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = torch.zeros((m, n), dtype=torch.float16, device="cuda")
    tile.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                               device="cuda"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    matmul_descriptor_persistent[(sms,)](ad, bd, c, m, n, k, BLOCK_M=BM, BLOCK_N=BN,
                                         BLOCK_K=BK, GROUP_M=8, NUM_SMS=sms,
                                         WARP_SPECIALIZE=True, num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    # fp16 output: half an ulp of |C| (up to ~150 here) plus the fp32 accumulation.
    np.testing.assert_allclose(c.cpu().numpy().astype(np.float64), want, rtol=2e-3, atol=0.1)
