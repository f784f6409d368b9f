"""Kernels for the tests of `tl.range(warp_specialize=True)` (tile/passes/warp_specialize.py):
the two shapes tutorial 09 marks on Hopper, and one with two dots per step.

- `matmul_tma` and `matmul_descriptor_persistent`: benchmarks/tutorial09_kernels.py (ours,
  the source the H100 benchmark times): a K loop of host-descriptor loads feeding tl.dot (B
  given N x K, grouped tiles), and the persistent tile loop with descriptors the kernel
  builds;
- `persistent_matmul`: the persistent tile loop marked, host descriptors, the epilogue's
  tile recomputed from a counter of its own (as the tutorial does);
- `two_dot_matmul`: two products per K step, one scaled in the loop (the wgmmas stay
  synchronous and the slot is released after the last).
"""

import os
import sys

import numpy as np

import tile
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor


os.environ.pop("MATMUL_FRONTEND", None)  # the file's default: our tile DSL
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
from tutorial09_kernels import _tile_of as tile_position  # noqa: E402
from tutorial09_kernels import matmul_descriptor_persistent, matmul_tma, tile_product  # noqa


@tile.jit
def persistent_matmul(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                      WS: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_in_group = GROUP_M * tl.cdiv(N, BN)
    num_tiles = tiles_m * tl.cdiv(N, BN)
    tile_id_c = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, warp_specialize=WS):
        pid_m, pid_n = tile_position(tile_id, tiles_in_group, tiles_m, GROUP_M)
        acc = tile_product(a_desc, b_desc, pid_m, pid_n, K, BM, BN, BK)
        # As the tutorial: the epilogue recomputes its tile from a counter of its own.
        tile_id_c += NUM_SMS
        pid_m, pid_n = tile_position(tile_id_c, tiles_in_group, tiles_m, GROUP_M)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@tile.jit
def two_dot_matmul(a_desc, b_desc, c_desc, o_ptr, p_ptr, K, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0) * BM
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    decayed = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(tl.cdiv(K, BK), warp_specialize=True):
        a = a_desc.load([pm, k * BK])
        acc = tl.dot(a, b_desc.load([0, k * BK]).T, acc)
        decayed = tl.dot(a, c_desc.load([0, k * BK]).T, decayed) * 0.5
    offs = (pm + tl.arange(0, BM))[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(o_ptr + offs, acc)
    tl.store(p_ptr + offs, decayed)


def descriptors(a, b, c, bm, bn, bk):
    """Host descriptors of A (M x K), B (N x K) and C (M x N) for these blocks."""
    return (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
            TensorDescriptor.from_tensor(c, [bm, bn]))


def operands(m, n, k, seed):
    """fp16 A (M x K) and B (N x K) and their product in float64."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


def fp32_tolerance(k: int) -> dict:
    """fp16 products summed in fp32 over K: a few fp32 ulps of the partial sums, which grow
    as sqrt(K) for standard-normal inputs."""
    return dict(rtol=1e-5, atol=1e-3 * np.sqrt(k))
