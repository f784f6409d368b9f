"""A pipelined fp16 matmul in Gluon for sm_80+: cp.async multi-buffering + mma_v2 (mma.sync).

    C (M x N, fp16) = A (M x K, fp16, row-major) @ B (K x N, fp16, row-major), fp32 accumulate

Each program computes one BLOCK_M x BLOCK_N tile of C. The K loop is software-pipelined over
NUM_STAGES shared-memory buffers per operand:

    prologue   issue the copies of K-steps 0 .. NUM_STAGES-2, one commit group each
    step ki    wait_group(NUM_STAGES - 2)          K-step ki's group has landed
               issue the copies of K-step ki + NUM_STAGES - 1 into the stage read last step
               load stage ki % NUM_STAGES into registers (DotOperandLayout)
               acc = mma_v2(a, b, acc)             while the new copies fly

so NUM_STAGES - 1 tiles are in flight while the tensor cores work. The compiler inserts the
`bar.sync`s (a copy must not overwrite a stage another warp still reads; data another warp
copied is visible only after a barrier that follows the wait). Copies past the end of K are
masked off (zero-filled, reading nothing), so the loop needs no epilogue special case.

Run `python examples/gluon/matmul_mma_v2.py`: on a GPU with torch it runs there, otherwise
in the CPU interpreter at a small size.
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402
from gluon.language.nvidia import ampere  # noqa: E402
from gluon.language.nvidia.ampere import async_copy  # noqa: E402
from _common import to_device, to_host, use_gpu  # noqa: E402


@gluon.constexpr_function
def copy_layout(block_rows, block_cols, num_warps):
    """16 bytes (8 fp16) per thread along the contiguous dim: one cp.async each."""
    lanes_col = min(32, block_cols // 8)
    return gl.BlockedLayout([1, 8], [32 // lanes_col, lanes_col], [num_warps, 1], [1, 0])


@gluon.constexpr_function
def operand_smem_layout(block_cols):
    """Rows of `block_cols` fp16 with 16-byte chunks XOR-swizzled across rows, so the eight
    rows one mma fragment reads land in different banks (Triton's mma v2 swizzle)."""
    per_phase = max(1, 128 // (block_cols * 2))
    return gl.SwizzledSharedLayout(8, per_phase, max(1, 8 // per_phase), [1, 0])


@gluon.jit
def issue_copies(a_smem, b_smem, a_ptr, b_ptr, stage, k0, off_m, off_n, M, N, K,
                 stride_am, stride_bk, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 BLOCK_K: gl.constexpr, A_LAYOUT: gl.constexpr, B_LAYOUT: gl.constexpr):
    rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, A_LAYOUT))
    ks = k0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, A_LAYOUT))
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :]
    a_mask = (rows[:, None] < M) & (ks[None, :] < K)
    async_copy.async_copy_global_to_shared(a_smem.index(stage), a_ptrs, mask=a_mask)
    kr = k0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, B_LAYOUT))
    cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, B_LAYOUT))
    b_ptrs = b_ptr + kr[:, None] * stride_bk + cols[None, :]
    b_mask = (kr[:, None] < K) & (cols[None, :] < N)
    async_copy.async_copy_global_to_shared(b_smem.index(stage), b_ptrs, mask=b_mask)
    async_copy.commit_group()


@gluon.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                  NUM_STAGES: gl.constexpr, WARPS_M: gl.constexpr, WARPS_N: gl.constexpr):
    num_warps: gl.constexpr = WARPS_M * WARPS_N
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0],
                                                  warps_per_cta=[WARPS_M, WARPS_N],
                                                  instr_shape=[16, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    b_op: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    a_copy: gl.constexpr = copy_layout(BLOCK_M, BLOCK_K, num_warps)
    b_copy: gl.constexpr = copy_layout(BLOCK_K, BLOCK_N, num_warps)
    a_smem = gl.allocate_shared_memory(gl.float16, [NUM_STAGES, BLOCK_M, BLOCK_K],
                                       operand_smem_layout(BLOCK_K))
    b_smem = gl.allocate_shared_memory(gl.float16, [NUM_STAGES, BLOCK_K, BLOCK_N],
                                       operand_smem_layout(BLOCK_N))

    # matmul() checks K and N are multiples of 8 (16-byte rows for cp.async); say so, since the
    # launch only specializes on multiples of 16.
    K = gl.multiple_of(K, 8)
    N = gl.multiple_of(N, 8)
    stride_am = gl.multiple_of(stride_am, 8)
    stride_bk = gl.multiple_of(stride_bk, 8)
    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    num_k = gl.cdiv(K, BLOCK_K)
    for s in gl.static_range(NUM_STAGES - 1):
        issue_copies(a_smem, b_smem, a_ptr, b_ptr, s, s * BLOCK_K, off_m, off_n, M, N, K,
                     stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, a_copy, b_copy)

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    for ki in range(num_k):
        async_copy.wait_group(NUM_STAGES - 2)
        # The stage read one step ago is free again: refill it with K-step ki + NUM_STAGES - 1
        # before reading this step's stage, so one barrier (the compiler puts it here, after
        # the wait) both publishes the landed copies and retires last step's reads.
        nxt = ki + NUM_STAGES - 1
        issue_copies(a_smem, b_smem, a_ptr, b_ptr, nxt % NUM_STAGES, nxt * BLOCK_K, off_m,
                     off_n, M, N, K, stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, a_copy,
                     b_copy)
        stage = ki % NUM_STAGES
        a = a_smem.index(stage).load(a_op)
        b = b_smem.index(stage).load(b_op)
        acc = ampere.mma_v2(a, b, acc)
    async_copy.wait_group(0)

    rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    gl.store(c_ptrs, acc.to(gl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


# The fastest of `benchmarks/gluon_matmul.py --sweep` on the H100 (2026-11-21): 400 TFLOP/s at
# 4096^3 against 251 for 128x128x32 with 8 warps.
DEFAULT_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, NUM_STAGES=3, WARPS_M=2,
                      WARPS_N=2)


def matmul(a, b, c=None, config=None):
    """C = A @ B for 2-D fp16 arrays / tensors (row-major; K a multiple of 8)."""
    cfg = dict(DEFAULT_CONFIG if config is None else config)
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, f"inner dimensions differ: {a.shape} @ {b.shape}"
    assert k % 8 == 0 and n % 8 == 0, \
        f"cp.async moves 16-byte rows: K and N must be multiples of 8, got K={k}, N={n}"
    if c is None:
        if isinstance(a, np.ndarray):
            c = np.empty((m, n), np.float16)
        else:
            import torch
            c = torch.empty((m, n), dtype=torch.float16, device=a.device)
    grid = (-(-m // cfg["BLOCK_M"]), -(-n // cfg["BLOCK_N"]))
    matmul_kernel[grid](a, b, c, m, n, k, k, n, n, num_warps=cfg["WARPS_M"] * cfg["WARPS_N"],
                        **cfg)
    return c


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)


def main(m: int = 1024, n: int = 1024, k: int = 1024, gpu=None, config=None) -> float:
    """Run once against the reference; returns the largest error relative to max |C|."""
    gpu = use_gpu() if gpu is None else gpu
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = to_host(matmul(to_device(a, gpu), to_device(b, gpu), config=config))
    want = reference(a, b).astype(np.float32)
    err = float(np.abs(out.astype(np.float32) - want).max() / max(1.0, np.abs(want).max()))
    where = "GPU" if gpu else "CPU interpreter"
    print(f"gluon mma_v2 matmul {m}x{n}x{k} fp16 on the {where}: max relative error "
          f"{err:.2e}")
    if err > 1e-2:
        raise SystemExit("gluon mma_v2 matmul is wrong")
    return err


if __name__ == "__main__":
    if use_gpu():
        main()
    else:
        main(m=64, n=64, k=96, gpu=False, config=dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32,
                                                       NUM_STAGES=3, WARPS_M=2, WARPS_N=2))
