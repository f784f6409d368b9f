"""The frontend-gap kernels of tests/tile/language/test_frontend_gaps.py on the GPU, against
the same numpy references. Skipped without a GPU."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tile", "language"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_grouped_ordering_early_exit_and_accumulators_on_gpu(torch):
    import test_frontend_gaps as gaps

    M, N = 300, 200
    grid = (-(-M // 64) * -(-N // 32),)
    out = torch.zeros(2 * grid[0], dtype=torch.int32, device="cuda")
    gaps.grouped_order_kernel[grid](out, M, N, BLOCK_M=64, BLOCK_N=32, GROUP_SIZE_M=4)
    np.testing.assert_array_equal(out.cpu().numpy(), gaps._grouped_reference(M, N, 64, 32, 4))

    x = torch.tensor([1, 2, -9, 1, 3, 3, 0, 0], dtype=torch.float32, device="cuda")
    res = torch.full((8,), 7.0, device="cuda")
    gaps.early_exit_kernel[(4,)](x, res, 6, BLOCK=2)
    np.testing.assert_array_equal(res.cpu().numpy(), [2, 4, 9, -1, 6, 6, 7, 7])

    xs = torch.arange(3 * 128, dtype=torch.float16, device="cuda").reshape(3, 128)
    acc = torch.zeros(128, dtype=torch.float32, device="cuda")
    gaps.int_accumulator_kernel[(1,)](xs, acc, 3, N=128)
    np.testing.assert_array_equal(acc.cpu().numpy(), xs.float().sum(0).cpu().numpy() + 3)

    a = torch.tensor([0, 9], dtype=torch.int32, device="cuda")
    b = torch.zeros(2, dtype=torch.int32, device="cuda")
    gaps.conditional_call_kernel[(1,)](a, b, 0)
    assert b.tolist() == [2, 5] and a.tolist() == [0, 9]
