"""Two matmuls with the structure of Triton's tutorial 09 (persistent matmul), written for this
project: `matmul_tma` (host tensor descriptors, a K loop marked warp_specialize) and
`matmul_descriptor_persistent` (descriptors built in the kernel, the persistent tile loop
marked warp_specialize, flatten off as the tutorial does on Hopper). B is given N x K.
`benchmarks/tutorial09_warp_spec.py` imports this file twice, once with
MATMUL_FRONTEND=triton, so the identical source runs under Triton 3.6 and our tile DSL; the
tests of the warp-specialization pass use it too (tests/tile/passes/tile_ws_kernels.py).
"""

import os

if os.environ.get("MATMUL_FRONTEND") == "triton":
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor
else:
    import tile as triton
    import tile.language as tl
    from tile.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _tile_of(tile_id, tiles_in_group, tiles_m, GROUP_M: tl.constexpr):
    """(row, column) of output tile `tile_id`, GROUP_M row blocks at a time for L2 reuse."""
    first_m = (tile_id // tiles_in_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    return first_m + tile_id % group_rows, (tile_id % tiles_in_group) // group_rows


@triton.jit
def _row_major(ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """A descriptor of the row-major rows x cols tensor at `ptr`, moving BLOCK_R x BLOCK_C."""
    return tl.make_tensor_descriptor(ptr, shape=[rows, cols], strides=[cols, 1],
                                     block_shape=[BLOCK_R, BLOCK_C])


@triton.jit
def tile_product(a_desc, b_desc, pid_m, pid_n, K, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """A[pid_m] @ B[pid_n]^T in fp32: the K loop of one output tile (persistent kernels)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    return acc


@triton.jit
def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    tiles_m = tl.cdiv(M, BLOCK_M)
    pid_m, pid_n = _tile_of(tl.program_id(0), GROUP_M * tl.cdiv(N, BLOCK_N), tiles_m, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(tl.cdiv(K, BLOCK_K), warp_specialize=WARP_SPECIALIZE):
        acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k * BLOCK_K]),
                     b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def matmul_descriptor_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                 GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                                 WARP_SPECIALIZE: tl.constexpr):
    a_desc = _row_major(a_ptr, M, K, BLOCK_M, BLOCK_K)
    b_desc = _row_major(b_ptr, N, K, BLOCK_N, BLOCK_K)
    c_desc = _row_major(c_ptr, M, N, BLOCK_M, BLOCK_N)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_in_group = GROUP_M * tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(0), tiles_m * tl.cdiv(N, BLOCK_N), NUM_SMS,
                            flatten=False, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_of(tile_id, tiles_in_group, tiles_m, GROUP_M)
        acc = tile_product(a_desc, b_desc, pid_m, pid_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


def launcher(kind: str, a, b, c, config: dict, ws: bool, num_sms: int):
    """A function of no arguments running `kind` ('tma' or 'persistent') on a (M x K),
    b (N x K) into c (M x N); descriptors are made once."""
    (m, k), n = a.shape, b.shape[0]
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, WARP_SPECIALIZE=ws,
                num_warps=config["num_warps"], num_stages=config["num_stages"])
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    if kind == "tma":
        descs = (TensorDescriptor.from_tensor(a, [bm, bk]),
                 TensorDescriptor.from_tensor(b, [bn, bk]),
                 TensorDescriptor.from_tensor(c, [bm, bn]))
        launch = matmul_tma[(tiles,)]
        return lambda: launch(*descs, m, n, k, **meta)
    programs = min(num_sms, tiles)
    launch = matmul_descriptor_persistent[(programs,)]
    return lambda: launch(a, b, c, m, n, k, NUM_SMS=programs, **meta)
