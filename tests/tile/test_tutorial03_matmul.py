"""The tutorial-03-style matmul (benchmarks/tutorial03_matmul.py, our kernel) in
the interpreter against numpy, on the IR each target gets: pipelined wgmma (sm_90a) and
pipelined mma_v2 (sm_80), with partial tiles and grouped ordering."""

import importlib.util
import os

import numpy as np
import pytest

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "tutorial03_matmul.py")


def _module():
    os.environ.pop("MATMUL_FRONTEND", None)
    spec = importlib.util.spec_from_file_location("tutorial03_tile", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_tutorial_03_matmul_matches_numpy(target, monkeypatch):
    monkeypatch.setenv("SC_TARGET", target)
    tut = _module()
    rng = np.random.default_rng(0)
    m, n, k = 192, 160, 144  # 3 x 3 tiles of 64 (partial in N), K in 3 steps (last partial)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    bm, bn, bk = 64, 64, 64
    grid = (-(-m // bm) * -(-n // bn),)
    tut.matmul_kernel[grid](a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_SIZE_M=bm,
                            BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=2, ACTIVATION="",
                            num_warps=4, num_stages=3)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-3, atol=2e-2)
