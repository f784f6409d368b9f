"""Gluon kernels on the GPU: the examples, >48 KB shared memory, mma_v2 shapes."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "gluon"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_gluon_copy_and_transpose_examples(torch, dtype):
    import copy_kernel
    import transpose_kernel

    assert copy_kernel.main(n=1_000_003, dtype=dtype, gpu=True)
    assert transpose_kernel.main(m=1000, n=777, dtype=dtype, gpu=True)


@pytest.mark.parametrize("shape", [(128, 128, 64), (1000, 520, 264), (2048, 2048, 1024)])
def test_mma_v2_matmul_example(torch, shape):
    import matmul_mma_v2

    assert matmul_mma_v2.main(*shape, gpu=True) < 1e-2


def test_kernel_with_more_than_48kb_of_shared_memory(torch):
    import gluon
    from gluon import language as gl

    blocked = gl.constexpr(gl.BlockedLayout([1, 4], [4, 8], [8, 1], [1, 0]))
    shared = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))

    @gluon.jit
    def roundtrip(src, dst):
        rows = gl.arange(0, 128, layout=gl.SliceLayout(1, blocked))
        cols = gl.arange(0, 128, layout=gl.SliceLayout(0, blocked))
        offs = gl.expand_dims(rows, 1) * 128 + gl.expand_dims(cols, 0)
        a = gl.allocate_shared_memory(gl.float32, [128, 128], shared)  # 64 KB
        b = gl.allocate_shared_memory(gl.float32, [128, 128], shared)  # 64 KB more
        a.store(gl.load(src + offs))
        b.store(a.load(blocked) * 2.0)
        gl.store(dst + offs, b.load(blocked) + a.load(blocked))

    x = torch.randn(128, 128, device="cuda")
    y = torch.empty_like(x)
    compiled = roundtrip[(1,)](x, y, num_warps=8)
    assert compiled.metadata["shared_bytes"] >= 2 * 64 * 1024
    torch.testing.assert_close(y, x * 3)


@pytest.mark.parametrize("flagged", [[], [3], [9, 30], list(range(32))])
def test_warp_any_branch_runs_in_the_warps_that_vote_yes(torch, flagged):
    # The interpreter's reading of gl.warp_any (tests/gluon/language/test_gluon_warp_any.py)
    # is the GPU's: only the rows of warps holding a flag move.
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "language"))
    from test_gluon_warp_any import _expected, bump_warps_with_a_flag

    x = torch.arange(32 * 16, dtype=torch.float32, device="cuda").reshape(32, 16)
    flag = torch.zeros(32, dtype=torch.int32, device="cuda")
    flag[flagged] = 1
    out = torch.empty_like(x)
    bump_warps_with_a_flag[(1,)](x, flag, out, 32, 16, num_warps=4)
    np.testing.assert_array_equal(out.cpu().numpy(), _expected(x.cpu().numpy(),
                                                               flag.cpu().numpy()))
