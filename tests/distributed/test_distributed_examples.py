"""The distributed examples on 2, 4 and 8 simulated ranks against numpy (each `main()`
raises when its result is off by more than its dtype-fit tolerance)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                "distributed"))

import all_gather_gemm  # noqa: E402
import flash_decode  # noqa: E402
import gemm_reduce_scatter  # noqa: E402

# Small heaps keep the race detector's shadow memory small (24 bytes per 2 heap bytes).
HEAP = 1 << 16


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_all_gather_gemm_matches_numpy(world_size):
    assert all_gather_gemm.main(world_size=world_size, m_local=16, n=16, k=32,
                                heap_bytes=HEAP) < 0.1


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_gemm_reduce_scatter_matches_numpy(world_size):
    assert gemm_reduce_scatter.main(world_size=world_size, m_local=16, n=16, k_local=16,
                                    heap_bytes=HEAP) < 0.05


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_flash_decode_combines_the_ranks_by_lse(world_size):
    assert flash_decode.main(world_size=world_size, heads=2, s_local=32, d=16,
                             heap_bytes=HEAP) < 1e-3
