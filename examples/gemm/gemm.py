"""A hand-scheduled persistent GEMM for Hopper (sm_90a) in Gluon: TMA, mbarriers, async wgmma and
warp specialization.

    C (M x N) = A (M x K, row-major) @ B (K x N, row-major; or given as N x K, K-major)
    fp16 / bf16 / fp8 (e4m3, e5m2) inputs, fp32 accumulation, C in fp16 / bf16 / fp32

One CTA per SM walks the output tiles `pid, pid + num_programs, ...` (grouped along M so that
GROUP_M row blocks share their B columns in L2). Its warps split into two partitions:

    producer (1 warp, 24 registers)        consumers (2 warpgroups, the rest of the registers)
    for every tile, every K step:          for every tile:
      wait `empty[s]`                        for every K step:
      expect A + B bytes on `ready[s]`         wait `ready[s]`
      TMA A[BM, BK] -> a_ring[s]               wgmma.mma_async(a_ring[s], b_ring[s]) -> acc
      TMA B[BK, BN] -> b_ring[s]               wait until one wgmma is in flight, then release
                                               the stage the previous one read (`empty`)
                                             TMA-store the previous tile is done reading c_smem
                                             acc -> c_smem -> TMA store (runs on behind us)

The producer runs up to STAGES K steps ahead, across tile boundaries, so the next tile's
operands stream in while the consumers finish the epilogue. Each consumer warpgroup owns 64 of
the BM = 128 rows: its accumulator is 64 x 256 fp32, 128 registers a thread, which is why the
producer gives its registers away (`worker_num_regs=[24]`; setmaxnreg moves them).
`gluon.warp_spec.pipeline` counts the stages and barrier phases.

Run `python examples/gemm/gemm.py`: on an H100 with torch it checks a 4096^3 product against
torch.matmul and prints TFLOP/s; elsewhere the CPU interpreter runs the same kernel on a small
problem (one program walking several tiles, both partitions as cooperative threads).
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
from gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,  # noqa: E402
                                          warpgroup_mma, warpgroup_mma_wait)
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from gluon.warp_spec import pipeline  # noqa: E402
import tile.profiler.language as pl  # noqa: E402  (timeline regions: nothing unless recorded)
from _common import to_device, to_host, use_gpu  # noqa: E402

CONSUMER_WARPS = 8  # two warpgroups, 64 rows of the 128-row tile each


@gluon.jit
def tile_position(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """(row block, column block) of output tile `tile`, walking GROUP_M row blocks at a time
    down each column block so consecutive tiles reuse B (and A) in L2."""
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile // tiles_per_group) * GROUP_M
    group_rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    in_group = tile % tiles_per_group
    return first_m + in_group % group_rows, in_group // group_rows


@gluon.jit
def _load_partition(a_desc, b_desc, a_ring, b_ring, pipe, M, N, K,
                    B_KMAJOR: gl.constexpr, GROUP_M: gl.constexpr):
    BM: gl.constexpr = a_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    BN: gl.constexpr = b_ring.shape[2] if not B_KMAJOR else b_ring.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    item = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_position(tile, num_pid_m, num_pid_n, GROUP_M)
        pl.enter_scope("load")
        for k in range(k_steps):
            s, ready = pipeline.producer_acquire(pipe, item)
            mbarrier.expect(ready, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, k * BK], ready, a_ring.index(s))
            if B_KMAJOR:
                tma.async_copy_global_to_shared(b_desc, [pid_n * BN, k * BK], ready,
                                                b_ring.index(s))
            else:
                tma.async_copy_global_to_shared(b_desc, [k * BK, pid_n * BN], ready,
                                                b_ring.index(s))
            item += 1
        pl.exit_scope("load")


@gluon.jit
def _mma_partition(a_ring, b_ring, c_smem, c_desc, pipe, M, N, K,
                   B_KMAJOR: gl.constexpr, GROUP_M: gl.constexpr):
    BM: gl.constexpr = c_desc.block_shape[0]
    BN: gl.constexpr = c_desc.block_shape[1]
    BK: gl.constexpr = a_ring.shape[2]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    item = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_position(tile, num_pid_m, num_pid_n, GROUP_M)
        # K step 0 starts the accumulator (use_acc=False ignores the previous tile's values).
        pl.enter_scope("mainloop")
        s = pipeline.consumer_wait(pipe, item)
        b = b_ring.index(s).permute([1, 0]) if B_KMAJOR else b_ring.index(s)
        acc = warpgroup_mma(a_ring.index(s), b, acc, use_acc=False, is_async=True)
        item += 1
        for k in range(1, k_steps):
            s = pipeline.consumer_wait(pipe, item)
            b = b_ring.index(s).permute([1, 0]) if B_KMAJOR else b_ring.index(s)
            acc = warpgroup_mma(a_ring.index(s), b, acc, is_async=True)
            # One wgmma stays in flight; the one before it is done reading its stage.
            acc = warpgroup_mma_wait(1, deps=[acc])
            pipeline.consumer_release(pipe, item - 1)
            item += 1
        acc = warpgroup_mma_wait(0, deps=[acc])
        pipeline.consumer_release(pipe, item - 1)
        pl.exit_scope("mainloop")

        # Epilogue: the previous tile's TMA store must be done reading c_smem.
        pl.enter_scope("epilogue")
        tma.store_wait(0)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
        pl.exit_scope("epilogue")
    tma.store_wait(0)


@gluon.jit
def gemm_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr,
                B_KMAJOR: gl.constexpr, GROUP_M: gl.constexpr):
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape,
                                       a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape,
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_shape, c_desc.layout)
    # Both consumer warpgroups release a stage with one arrival (the arrive syncs the
    # partition's warps first), so one arrival frees it.
    pipe = pipeline.create(STAGES)
    gl.warp_specialize([(_mma_partition, (a_ring, b_ring, c_smem, c_desc, pipe, M, N, K,
                                          B_KMAJOR, GROUP_M)),
                        (_load_partition, (a_desc, b_desc, a_ring, b_ring, pipe, M, N, K,
                                           B_KMAJOR, GROUP_M))],
                       [1], [24])
    pipeline.invalidate(pipe)


# ---- host side ---------------------------------------------------------------------------------

GL_DTYPES = {"float16": gl.float16, "bfloat16": gl.bfloat16, "float8_e4m3fn": gl.float8e4nv,
             "float8_e5m2": gl.float8e5, "float32": gl.float32}


def _itemsize(x) -> int:
    return x.itemsize if isinstance(x, np.ndarray) else x.element_size()


def _nvmma(x, block_inner: int) -> gl.NVMMASharedLayout:
    """The widest swizzle a block row fills: 128-byte rows (64 fp16) -> 128-byte swizzle."""
    bits = 8 * _itemsize(x)
    return gl.NVMMASharedLayout(min(128, block_inner * bits // 8), bits)


def num_sms() -> int:
    from shared_codegen.runtime.driver import get_device
    return get_device().sm_count


def gemm_launcher(a, b, c, *, b_kmajor=False, block=None, stages=3, group_m=8,
                  num_programs=None, cluster=None, launch_options=None):
    """A function of no arguments that computes c = a @ b with `gemm_kernel` (descriptors
    encoded once, so repeated launches cost only the launch). `a` is M x K; `b` is K x N, or
    N x K when `b_kmajor` (fp8 wgmma reads B K-major only); `c` is M x N. numpy arrays run in
    the interpreter, CUDA tensors on the GPU. `block` (BM, BN, BK) defaults to 128 x 256 with
    128-byte K rows (BK = 64 for 16-bit inputs, 128 for fp8). `cluster` launches the
    programs in thread-block clusters of that many CTAs (co-scheduled on one GPC).
    `launch_options` go to the kernel launch (`debug=True`, `timeline=True`:
    docs/debug_mode.md)."""
    bm, bn, bk = block or (128, 256, 128 // _itemsize(a))
    m, k = a.shape
    n = b.shape[0] if b_kmajor else b.shape[1]
    if (b.shape[1] if b_kmajor else b.shape[0]) != k:
        raise ValueError(f"gemm: a is {tuple(a.shape)} but b is {tuple(b.shape)} "
                         f"({'N x K' if b_kmajor else 'K x N'} expected, K = {k})")
    if tuple(c.shape) != (m, n):
        raise ValueError(f"gemm: c must be {(m, n)}, got {tuple(c.shape)}")
    if stages < 2:
        raise ValueError(f"gemm: stages must be at least 2, got {stages} (the consumers keep "
                         f"one wgmma in flight, which holds a stage while the next is read)")
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk], _nvmma(a, bk))
    b_block = [bn, bk] if b_kmajor else [bk, bn]
    b_desc = TensorDescriptor.from_tensor(b, b_block, _nvmma(b, b_block[1]))
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn], _nvmma(c, bn))
    tiles = -(-m // bm) * -(-n // bn)
    if num_programs is None:
        num_programs = num_sms() if not isinstance(a, np.ndarray) else 2
    grid = min(num_programs, tiles)
    options = {"num_warps": CONSUMER_WARPS, **(launch_options or {})}
    if cluster is not None:
        grid -= grid % cluster
        options["cluster_dims"] = (cluster, 1, 1)
    launch = gemm_kernel[(grid,)]

    def run():
        launch(a_desc, b_desc, c_desc, m, n, k, stages, b_kmajor, group_m, **options)
        return c
    return run


def gemm(a, b, c, **options):
    """c = a @ b (see `gemm_launcher` for the options); returns c."""
    return gemm_launcher(a, b, c, **options)()


def reference(a: np.ndarray, b: np.ndarray, b_kmajor=False) -> np.ndarray:
    """A @ B in float64 (the fp32-accumulated product must be within rounding of it)."""
    bb = b.astype(np.float64)
    return a.astype(np.float64) @ (bb.T if b_kmajor else bb)


def tolerance(dtype_name: str, k: int, fp8_inputs: bool = False) -> float:
    """Allowed max |C - reference| / max |reference|: the output's rounding (an ulp of C's
    type) plus the accumulation over K. wgmma accumulates 16-bit products in fp32 (a few ulps
    of fp32 times sqrt(K)); fp8 products are added with fewer mantissa bits, about 13-14 (as
    measured for the DeepSeek-V3 report, section 3.3.2: cuBLAS's use_fast_accum=True shows
    the same error as ours), so for fp8 inputs the accumulation term is 2^-13 sqrt(K)."""
    out_eps = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}[dtype_name]
    acc_eps = 2.0 ** -13 if fp8_inputs else 4 * 2.0 ** -24
    return 2 * out_eps + acc_eps * np.sqrt(k)


def random_operands(m, n, k, dtype_name="float16", b_kmajor=False, seed=0):
    """Inputs exactly representable in `dtype_name`, as numpy arrays."""
    import ml_dtypes

    np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
                "float8_e5m2": ml_dtypes.float8_e5m2}[dtype_name]
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np_dtype)
    b = rng.uniform(-1, 1, (n, k) if b_kmajor else (k, n)).astype(np_dtype)
    return a, b


def main(m=None, n=None, k=None, gpu=None) -> bool:
    gpu = use_gpu() if gpu is None else gpu
    if m is None:
        m, n, k = (4096, 4096, 4096) if gpu else (256, 512, 192)
    a, b = random_operands(m, n, k)
    block = (128, 256, 64) if gpu else (128, 128, 64)
    if gpu:
        import torch

        a_dev, b_dev = to_device(a, True), to_device(b, True)
        c_dev = torch.empty((m, n), dtype=torch.float16, device="cuda")
        gemm(a_dev, b_dev, c_dev, block=block)
        torch.cuda.synchronize()
        c = to_host(c_dev)
    else:
        c = gemm(a, b, np.empty((m, n), np.float16), block=block)
    ref = reference(a, b)
    err = float(np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max())
    ok = err <= tolerance("float16", k)
    where = "GPU" if gpu else "CPU interpreter"
    print(f"persistent warp-specialized GEMM {m}x{n}x{k} fp16 on the {where}: "
          f"max relative error {err:.2e} ({'ok' if ok else 'WRONG'})")
    if gpu and ok:
        import torch

        run = gemm_launcher(a_dev, b_dev, c_dev, block=block)  # descriptors encoded once
        run()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            run()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / 20
        print(f"  {2 * m * n * k / seconds / 1e12:.0f} TFLOP/s "
              f"(benchmarks/gemm_vs_cublas.py compares with cuBLAS)")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
