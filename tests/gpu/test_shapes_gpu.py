"""join, split, cat, interleave, gather, histogram, swizzle2d, sort, topk, bitonic_merge,
flip, map_elementwise, clamp and umulhi on the GPU (tile and Gluon kernels of the
interpreter tests), each compared with numpy. Skipped without a GPU.

`run_on_gpu` copies the numpy arguments to the device, launches, and copies every array
back, so each test reads its outputs exactly as the interpreter tests do."""

import os
import sys

import ml_dtypes
import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "tile", "language"))
sys.path.insert(0, os.path.join(HERE, "..", "gluon", "language"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def run_on_gpu(torch, kernel, arrays, num_warps=4, **constexprs):
    """Launch `kernel[(1,)]` on device copies of `arrays` (numpy; other values pass as they
    are) and write the device results back into the numpy arrays."""
    device_args = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            if a.dtype == ml_dtypes.bfloat16:
                t = torch.from_numpy(a.astype(np.float32)).to("cuda", torch.bfloat16)
            else:
                t = torch.from_numpy(np.ascontiguousarray(a)).cuda()
            device_args.append(t)
        else:
            device_args.append(a)
    kernel[(1,)](*device_args, num_warps=num_warps, **constexprs)
    torch.cuda.synchronize()
    for a, t in zip(arrays, device_args):
        if isinstance(a, np.ndarray):
            host = t.float().cpu().numpy() if t.dtype == torch.bfloat16 else t.cpu().numpy()
            a[...] = host.astype(a.dtype)


# ---- tile: join, split, cat, interleave, gather, histogram, swizzle2d ------------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "int64", "int1"])
@pytest.mark.parametrize("shape", [(1, 4), (32, 16), (64, 64)])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_join_and_split_on_gpu(torch, dtype, shape, num_warps):
    from test_movement import join_split_kernel
    from tl_test_util import NP, rand

    a, b = rand(shape, dtype, seed=1), rand(shape, dtype, seed=2)
    out = np.zeros(shape + (2,), NP[dtype])
    lo, hi = np.zeros(shape, NP[dtype]), np.zeros(shape, NP[dtype])
    run_on_gpu(torch, join_split_kernel, [a, b, out, lo, hi], num_warps, M=shape[0], N=shape[1])
    np.testing.assert_array_equal(out, np.stack([a, b], axis=-1))
    np.testing.assert_array_equal(lo, b)
    np.testing.assert_array_equal(hi, a)


def test_join_broadcast_and_scalars_on_gpu(torch):
    from test_movement import join_broadcast_kernel

    a = np.random.default_rng(3).random(8, np.float32)
    b = np.random.default_rng(4).random(16, np.float32)
    out, s = np.zeros((8, 16, 2), np.float32), np.zeros(3, np.float32)
    run_on_gpu(torch, join_broadcast_kernel, [a, b, out, s], M=8, N=16)
    np.testing.assert_array_equal(out, np.stack(np.broadcast_arrays(a[:, None], b[None, :]), -1))
    np.testing.assert_allclose(s, [a[0], b[0], a[0] * 10 + b[0]], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "int32"])
@pytest.mark.parametrize("n", [2, 64, 1024])
def test_cat_and_interleave_on_gpu(torch, dtype, n):
    from test_movement import cat_interleave_kernel
    from tl_test_util import NP, rand

    a, b = rand((n,), dtype, seed=5), rand((n,), dtype, seed=6)
    cat, il, il2 = (np.zeros(2 * n, NP[dtype]) for _ in range(3))
    run_on_gpu(torch, cat_interleave_kernel, [a, b, cat, il, il2], N=n)
    np.testing.assert_array_equal(cat, np.concatenate([a, b]))
    np.testing.assert_array_equal(il, np.stack([a, b], -1).reshape(-1))
    expected2 = np.stack([a.reshape(2, -1), b.reshape(2, -1)], -1).reshape(-1)
    np.testing.assert_array_equal(il2, expected2)


@pytest.mark.parametrize("dtype,idx_dtype", [("float32", "int32"), ("float16", "int64"),
                                             ("bfloat16", "int16")])
@pytest.mark.parametrize("src_shape,idx_shape,axis", [
    ((16, 8), (32, 8), 0), ((8, 32), (8, 64), 1), ((4, 64), (4, 16), 1), ((64, 64), (64, 64), 0),
    ((128, 64), (256, 64), 0), ((128, 64), (128, 128), 1)])  # the last two: Triton's test_core
@pytest.mark.parametrize("num_warps", [4, 8])
def test_gather_on_gpu(torch, dtype, idx_dtype, src_shape, idx_shape, axis, num_warps):
    from test_movement import gather_kernel
    from tl_test_util import NP, rand

    src = rand(src_shape, dtype, seed=7)
    idx = np.random.default_rng(8).integers(0, src_shape[axis], idx_shape).astype(NP[idx_dtype])
    out = np.zeros(idx_shape, NP[dtype])
    run_on_gpu(torch, gather_kernel, [src, idx, out], num_warps, M=src_shape[0],
               N=src_shape[1], IM=idx_shape[0], IN=idx_shape[1], AXIS=axis)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx.astype(np.int64), axis))


def test_gather_3d_on_gpu(torch):
    from test_movement import gather_3d_kernel
    from tl_test_util import rand

    src = rand((2, 4, 8), "float32", seed=9)
    idx = np.random.default_rng(10).integers(0, 4, (2, 8, 8)).astype(np.int32)
    out = np.zeros((2, 8, 8), np.float32)
    run_on_gpu(torch, gather_3d_kernel, [src, idx, out])
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 1))


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
@pytest.mark.parametrize("n,bins,masked", [(128, 16, False), (256, 64, True), (32, 256, False),
                                           (4096, 8, True), (2048, 2, False), (1024, 128, False),
                                           (256, 512, False), (8, 512, True), (8, 2, False)])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_histogram_on_gpu(torch, dtype, n, bins, masked, num_warps):
    from test_movement import histogram_kernel
    from tl_test_util import NP

    x = np.random.default_rng(11).integers(-3, min(bins + 3, 127), n).astype(NP[dtype])
    out = np.zeros(bins, np.int32)
    run_on_gpu(torch, histogram_kernel, [x, out], num_warps, N=n, BINS=bins, MASKED=masked)
    keep = (x.astype(np.int64) >= 0) & (x.astype(np.int64) < bins)
    if masked:
        keep &= np.arange(n) % 3 != 0
    np.testing.assert_array_equal(out, np.bincount(x[keep].astype(np.int64), minlength=bins))


@pytest.mark.parametrize("size_i,size_j,g", [(4, 4, 2), (7, 8, 3), (16, 5, 4)])
def test_swizzle2d_on_gpu(torch, size_i, size_j, g):
    from test_movement import swizzle2d_reference, swizzle_kernel

    oi, oj = np.zeros((16, 8), np.int32), np.zeros((16, 8), np.int32)
    run_on_gpu(torch, swizzle_kernel, [oi, oj, size_i, size_j], BI=16, BJ=8, G=g)
    i, j = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
    ri, rj = swizzle2d_reference(np.minimum(i, size_i - 1), np.minimum(j, size_j - 1), size_i,
                                 size_j, g)
    valid = (i < size_i) & (j < size_j)
    np.testing.assert_array_equal(oi[valid], ri[valid])
    np.testing.assert_array_equal(oj[valid], rj[valid])


# ---- tile: sort, topk, bitonic_merge, flip ------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "int32", "uint8",
                                   "int64"])
@pytest.mark.parametrize("shape", [(1, 8), (4, 16), (2, 128), (8, 256), (1, 512), (512, 8)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_on_gpu(torch, dtype, shape, descending):
    from test_sorting import _sorted, sort_kernel
    from tl_test_util import NP, rand

    x = rand(shape, dtype, seed=shape[1])
    out = np.zeros(shape, NP[dtype])
    run_on_gpu(torch, sort_kernel, [x, out], M=shape[0], N=shape[1], K=shape[1], OP="sort",
               DESC=descending)
    np.testing.assert_array_equal(out, _sorted(x, descending))


@pytest.mark.parametrize("k", [1, 4, 32])
@pytest.mark.parametrize("op", ["topk", "sort_dim", "merge"])
def test_topk_sort_method_and_bitonic_merge_on_gpu(torch, k, op):
    from test_sorting import _sorted, sort_kernel
    from tl_test_util import rand

    x = rand((4, 32), "float32", seed=k)
    width = k if op == "topk" else 32
    out = np.zeros((4, width), np.float32)
    run_on_gpu(torch, sort_kernel, [x, out], M=4, N=32, K=width, OP=op, DESC=True)
    np.testing.assert_array_equal(out, _sorted(x, True)[:, :width])


@pytest.mark.parametrize("dim", [None, 0, 1, 2, -2])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "int1"])
def test_flip_on_gpu(torch, dim, dtype):
    from test_sorting import flip_kernel
    from tl_test_util import NP, rand

    x = rand((2, 8, 16), dtype, seed=5)
    out = np.zeros(x.shape, NP[dtype])
    run_on_gpu(torch, flip_kernel, [x, out], A=2, B=8, C=16, DIM=dim)
    np.testing.assert_array_equal(out, np.flip(x, axis=-1 if dim is None else dim))


# ---- tile: map_elementwise, clamp, umulhi ---------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 32), (16, 16)])
def test_map_elementwise_on_gpu(torch, shape):
    from test_map_elementwise import _collatz, map_kernel

    M, N = shape
    x = np.random.default_rng(M).uniform(-2, 2, shape).astype(np.float32)
    n = np.random.default_rng(N).integers(1, 50, N).astype(np.int32)
    out, out2 = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    gt, steps = np.zeros(shape, np.int8), np.zeros(N, np.int32)
    run_on_gpu(torch, map_kernel, [x, n, out, out2, gt, steps], M=M, N=N)
    np.testing.assert_allclose(out, np.where(x > 0, x, 1.5 * (np.exp(x) - 1)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(out2, x * x * 2 + 1, rtol=1e-5)
    np.testing.assert_array_equal(gt, (x > 2 * x).astype(np.int8))
    np.testing.assert_array_equal(steps, [_collatz(int(v)) for v in n])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("nan_all", [False, True])
@pytest.mark.parametrize("scalar", [True, False])
def test_clamp_on_gpu(torch, dtype, nan_all, scalar):
    import tile.language as tl
    from test_clamp_umulhi import N, clamp_kernel
    from tl_test_util import f64, rand

    nan = tl.PropagateNan.ALL if nan_all else tl.PropagateNan.NONE
    x = rand(N, dtype, 1, -2, 2)
    lo, hi = rand(N, dtype, 2, -1.5, 0), rand(N, dtype, 3, 0, 1.5)
    x[[3, 17]] = np.nan
    out = np.zeros(N, np.float64 if dtype == "float64" else np.float32)
    run_on_gpu(torch, clamp_kernel, [x, lo, hi, out], NAN=nan, SCALAR=scalar, N=N)
    low, high = (-0.5, 0.75) if scalar else (f64(lo), f64(hi))
    ref = np.clip(f64(x), low, high) if nan_all else np.fmin(np.fmax(f64(x), low), high)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(dtype, 0)
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(out[ok], ref[ok], rtol=tol, atol=0)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_umulhi_on_gpu(torch, dtype):
    from test_clamp_umulhi import N, _umulhi_reference, umulhi_kernel

    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    x[:3], y[:3] = [info.max, info.min, -1], [info.max, info.max, -1]
    out = np.zeros(N, dtype)
    run_on_gpu(torch, umulhi_kernel, [x, y, out], N=N)
    np.testing.assert_array_equal(out, _umulhi_reference(x, y, np.dtype(dtype).itemsize * 8))


# ---- Gluon ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_gluon_join_and_split_on_gpu(torch, dtype):
    from gl_test_util import L2, NP, rand
    from test_gluon_movement import L2_JOINED, L2_WIDE, M, N, join_split_kernel

    a, b = rand((M, N), dtype, seed=1), rand((M, N), dtype, seed=2)
    il = np.zeros((M, 2 * N), NP[dtype])
    lo, hi = np.zeros((M, N), NP[dtype]), np.zeros((M, N), NP[dtype])
    run_on_gpu(torch, join_split_kernel, [a, b, il, lo, hi], M=M, N=N, layout=L2,
               joined=L2_JOINED, wide=L2_WIDE)
    np.testing.assert_array_equal(il, np.stack([a, b], -1).reshape(M, 2 * N))
    np.testing.assert_array_equal(lo, b)
    np.testing.assert_array_equal(hi, (a * 2).astype(NP[dtype]))


def test_gluon_gather_histogram_and_map_on_gpu(torch):
    from gluon import language as gl
    from gl_test_util import L1, L2, L2T, rand
    from test_gluon_movement import M, N, gather_kernel, histogram_kernel, map_kernel

    src = rand((M, N), "float32", seed=4)
    idx = np.random.default_rng(5).integers(0, M, (32, N)).astype(np.int32)
    for src_layout, idx_layout in [(L2, L2), (L2, L2T), (L2T, L2)]:
        out = np.zeros((32, N), np.float32)
        run_on_gpu(torch, gather_kernel, [src, idx, out], M=M, N=N, IM=32,
                   src_layout=src_layout, idx_layout=idx_layout)
        np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 0))
    for n, bins, masked in [(128, 64, False), (512, 16, True), (64, 256, True)]:
        x = np.random.default_rng(6).integers(-1, bins + 1, n).astype(np.int32)
        out = np.zeros(bins, np.int32)
        run_on_gpu(torch, histogram_kernel, [x, out], N=n, BINS=bins, layout=L1,
                   bins_layout=gl.BlockedLayout([2], [32], [4], [0]), MASKED=masked)
        keep = (x >= 0) & (x < bins) & ((np.arange(n) % 2 == 0) if masked else True)
        np.testing.assert_array_equal(out, np.bincount(x[keep], minlength=bins))
    out = np.zeros((M, N), np.float32)
    run_on_gpu(torch, map_kernel, [src, out], M=M, N=N, layout=L2)
    np.testing.assert_allclose(out, np.where(src > 1.0, 1.0, src * src), rtol=1e-6)


@pytest.mark.parametrize("dims", [(0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])
@pytest.mark.parametrize("shape", [(2, 4, 32), (8, 16, 16)])
def test_permute_3d_on_gpu(torch, dims, shape):
    from test_movement import permute_3d_kernel
    from tl_test_util import rand

    x = rand(shape, "float16", seed=12)
    out = np.zeros(x.size, np.float16)
    run_on_gpu(torch, permute_3d_kernel, [x, out], A=shape[0], B=shape[1], C=shape[2],
               D0=dims[0], D1=dims[1], D2=dims[2])
    np.testing.assert_array_equal(out, np.transpose(x, dims).reshape(-1))


@pytest.mark.parametrize("n,k", [(64, 64), (64, 128), (128, 64)])
def test_gluon_warp_local_gather_on_gpu(torch, n, k):
    from gl_test_util import rand
    from test_gluon_movement import ROWS, row_gather_kernel

    src = rand((4, n), "float32", seed=8)
    idx = np.random.default_rng(9).integers(0, n, (4, k)).astype(np.int32)
    out = np.zeros((4, k), np.float32)
    run_on_gpu(torch, row_gather_kernel, [src, idx, out], M=4, N=n, K=k, layout=ROWS)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 1))
