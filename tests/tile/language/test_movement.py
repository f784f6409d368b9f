"""join, split, cat, interleave, gather, histogram and swizzle2d in the CPU interpreter against
numpy (several shapes and dtypes), their PTX for sm_90a and sm_80, and their error messages."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import NP, TL, rand


@tile.jit
def _offsets(M: tl.constexpr, N: tl.constexpr):
    return tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]


@tile.jit
def join_split_kernel(a_ptr, b_ptr, out_ptr, lo_ptr, hi_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = _offsets(M, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    c = tl.join(a, b)                                    # M x N x 2
    tl.store(out_ptr + offs[:, :, None] * 2 + tl.arange(0, 2)[None, None, :], c)
    lo, hi = tl.split(tl.permute(tl.join(b, a), (0, 1, 2)))
    tl.store(lo_ptr + offs, lo)
    tl.store(hi_ptr + offs, hi)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "int64", "int1"])
@pytest.mark.parametrize("shape", [(1, 4), (4, 8), (32, 16)])
def test_join_and_split(dtype, shape):
    a, b = rand(shape, dtype, seed=1), rand(shape, dtype, seed=2)
    out = np.zeros(shape + (2,), NP[dtype])
    lo, hi = np.zeros(shape, NP[dtype]), np.zeros(shape, NP[dtype])
    join_split_kernel[(1,)](a, b, out, lo, hi, M=shape[0], N=shape[1])
    np.testing.assert_array_equal(out, np.stack([a, b], axis=-1))
    np.testing.assert_array_equal(lo, b)
    np.testing.assert_array_equal(hi, a)


@tile.jit
def join_broadcast_kernel(a_ptr, b_ptr, out_ptr, s_ptr, M: tl.constexpr, N: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M))[:, None]       # M x 1
    b = tl.load(b_ptr + tl.arange(0, N))[None, :]       # 1 x N
    c = tl.join(a, b)                                   # M x N x 2
    tl.store(out_ptr + _offsets(M, N)[:, :, None] * 2 + tl.arange(0, 2)[None, None, :], c)
    # Scalars: join gives [2], split gives two scalars back.
    pair = tl.join(tl.load(a_ptr), tl.load(b_ptr))
    x, y = tl.split(pair)
    tl.store(s_ptr + tl.arange(0, 2), pair)
    tl.store(s_ptr + 2, x * 10 + y)


def test_join_broadcasts_and_joins_scalars():
    a, b = rand((8,), "float32", seed=3), rand((16,), "float32", seed=4)
    out, s = np.zeros((8, 16, 2), np.float32), np.zeros(3, np.float32)
    join_broadcast_kernel[(1,)](a, b, out, s, M=8, N=16)
    np.testing.assert_array_equal(out, np.stack(np.broadcast_arrays(a[:, None], b[None, :]), -1))
    np.testing.assert_allclose(s, [a[0], b[0], a[0] * 10 + b[0]], rtol=1e-6)


@tile.jit
def cat_interleave_kernel(a_ptr, b_ptr, cat_ptr, il_ptr, il2_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r)
    b = tl.load(b_ptr + r)
    tl.store(cat_ptr + tl.arange(0, 2 * N), tl.cat(a, b, can_reorder=True))
    tl.store(il_ptr + tl.arange(0, 2 * N), tl.interleave(a, b))
    a2 = tl.reshape(a, (2, N // 2))
    b2 = tl.reshape(b, (2, N // 2))
    tl.store(il2_ptr + _offsets(2, N), tl.interleave(a2, b2))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "uint8"])
@pytest.mark.parametrize("n", [2, 64, 256])
def test_cat_and_interleave(dtype, n):
    a, b = rand((n,), dtype, seed=5), rand((n,), dtype, seed=6)
    cat, il, il2 = (np.zeros(2 * n, NP[dtype]) for _ in range(3))
    cat_interleave_kernel[(1,)](a, b, cat, il, il2, N=n)
    np.testing.assert_array_equal(cat, np.concatenate([a, b]))
    np.testing.assert_array_equal(il, np.stack([a, b], -1).reshape(-1))
    expected2 = np.stack([a.reshape(2, -1), b.reshape(2, -1)], -1).reshape(2, -1)
    np.testing.assert_array_equal(il2, expected2.reshape(-1))


@tile.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
                  IM: tl.constexpr, IN: tl.constexpr, AXIS: tl.constexpr):
    src = tl.load(src_ptr + _offsets(M, N))
    idx = tl.load(idx_ptr + _offsets(IM, IN))
    tl.store(out_ptr + _offsets(IM, IN), tl.gather(src, idx, AXIS))


@pytest.mark.parametrize("dtype,idx_dtype", [("float32", "int32"), ("float16", "int64"),
                                             ("int8", "uint8"), ("bfloat16", "int16")])
@pytest.mark.parametrize("src_shape,idx_shape,axis", [
    ((16, 8), (32, 8), 0), ((16, 8), (4, 8), -2), ((8, 32), (8, 64), 1), ((4, 64), (4, 16), 1)])
def test_gather(dtype, idx_dtype, src_shape, idx_shape, axis):
    src = rand(src_shape, dtype, seed=7)
    n = src_shape[axis]
    idx = np.random.default_rng(8).integers(0, n, idx_shape).astype(NP[idx_dtype])
    out = np.zeros(idx_shape, NP[dtype])
    gather_kernel[(1,)](src, idx, out, M=src_shape[0], N=src_shape[1], IM=idx_shape[0],
                        IN=idx_shape[1], AXIS=axis)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx.astype(np.int64), axis))


@tile.jit
def gather_3d_kernel(src_ptr, idx_ptr, out_ptr):
    i = tl.arange(0, 2)[:, None, None] * 32 + tl.arange(0, 4)[None, :, None] * 8 \
        + tl.arange(0, 8)[None, None, :]
    j = tl.arange(0, 2)[:, None, None] * 64 + tl.arange(0, 8)[None, :, None] * 8 \
        + tl.arange(0, 8)[None, None, :]
    src = tl.load(src_ptr + i)                          # 2 x 4 x 8
    idx = tl.load(idx_ptr + j)                          # 2 x 8 x 8
    tl.store(out_ptr + j, src.gather(idx, axis=1))


def test_gather_3d_as_a_method():
    src = rand((2, 4, 8), "float32", seed=9)
    idx = np.random.default_rng(10).integers(0, 4, (2, 8, 8)).astype(np.int32)
    out = np.zeros((2, 8, 8), np.float32)
    gather_3d_kernel[(1,)](src, idx, out)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 1))


def test_gather_out_of_range_index_is_reported_by_the_interpreter():
    src = np.zeros((16, 8), np.float32)
    idx = np.zeros((4, 8), np.int32)
    idx[2, 3] = 16
    with pytest.raises(tile.InterpreterError, match=r"gather: index 16 at position \[2, 3\] is "
                                                    r"out of range for axis 0 of size 16"):
        gather_kernel[(1,)](src, idx, np.zeros((4, 8), np.float32), M=16, N=8, IM=4, IN=8,
                            AXIS=0)


@tile.jit
def histogram_kernel(x_ptr, out_ptr, N: tl.constexpr, BINS: tl.constexpr,
                     MASKED: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    if MASKED:
        h = x.histogram(BINS, mask=r % 3 != 0)
    else:
        h = tl.histogram(x, BINS)
    tl.store(out_ptr + tl.arange(0, BINS), h)


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64", "uint16"])
@pytest.mark.parametrize("n,bins,masked", [(128, 16, False), (256, 64, True), (32, 256, False),
                                           (1024, 8, True)])
def test_histogram(dtype, n, bins, masked):
    low = 0 if dtype.startswith("u") else -3
    x = np.random.default_rng(11).integers(low, min(bins + 3, 127), n).astype(NP[dtype])
    out = np.zeros(bins, np.int32)
    histogram_kernel[(1,)](x, out, N=n, BINS=bins, MASKED=masked)
    keep = (x.astype(np.int64) >= 0) & (x.astype(np.int64) < bins)
    if masked:
        keep &= np.arange(n) % 3 != 0
    np.testing.assert_array_equal(out, np.bincount(x[keep].astype(np.int64), minlength=bins))


def swizzle2d_reference(i, j, size_i, size_j, size_g):
    ij = i * size_j + j
    size_gj = size_g * size_j
    group = ij // size_gj
    off_i = group * size_g
    size_g = np.minimum(size_i - off_i, size_g)
    ij = ij % size_gj
    return off_i + ij % size_g, ij // size_g


@tile.jit
def swizzle_kernel(out_i_ptr, out_j_ptr, size_i, size_j, BI: tl.constexpr, BJ: tl.constexpr,
                   G: tl.constexpr):
    i = tl.minimum(tl.arange(0, BI)[:, None], size_i - 1)  # rows past size_i: no group
    j = tl.minimum(tl.arange(0, BJ)[None, :], size_j - 1)
    ni, nj = tl.swizzle2d(i, j, size_i, size_j, G)
    i = tl.arange(0, BI)[:, None]
    j = tl.arange(0, BJ)[None, :]
    tl.store(out_i_ptr + i * BJ + j, ni)
    tl.store(out_j_ptr + i * BJ + j, nj)


@pytest.mark.parametrize("size_i,size_j,g", [(4, 4, 2), (7, 8, 3), (16, 5, 4)])
def test_swizzle2d(size_i, size_j, g):
    oi, oj = np.zeros((16, 8), np.int32), np.zeros((16, 8), np.int32)
    swizzle_kernel[(1,)](oi, oj, size_i, size_j, BI=16, BJ=8, G=g)
    i, j = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
    i, j = np.minimum(i, size_i - 1), np.minimum(j, size_j - 1)
    ri, rj = swizzle2d_reference(i, j, size_i, size_j, g)
    valid = (np.arange(16)[:, None] < size_i) & (np.arange(8)[None, :] < size_j)
    np.testing.assert_array_equal(oi[valid], ri[valid])
    np.testing.assert_array_equal(oj[valid], rj[valid])
    if (size_i, size_j, g) == (4, 4, 2):  # Triton's docstring example
        order = (oi * 4 + oj)[:4, :4]
        np.testing.assert_array_equal(np.argsort(order.reshape(-1)).reshape(4, 4),
                                      [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14],
                                       [9, 11, 13, 15]])


# ---- PTX -------------------------------------------------------------------------------------

def _ptx(kernel, signature, constexprs, target="sm_90a"):
    compiled = tile.compile(kernel, signature=signature, constexprs=constexprs, target=target)
    return compiled.asm["ptx"]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_join_split_and_histogram_compile(target):
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "out_ptr": "*fp16:16",
           "lo_ptr": "*fp16:16", "hi_ptr": "*fp16:16"}
    ptx = _ptx(join_split_kernel, sig, {"M": 32, "N": 16}, target)
    assert ptx.count("st.global") >= 3 and f".target {target}" in ptx
    hist = _ptx(histogram_kernel, {"x_ptr": "*i32:16", "out_ptr": "*i32:16"},
                {"N": 256, "BINS": 64, "MASKED": True}, target)
    assert "atom.shared.add.u32" in hist or "red.shared.add.u32" in hist
    assert hist.count("bar.sync") >= 2


def test_gather_goes_through_shared_memory():
    ptx = _ptx(gather_kernel, {"src_ptr": "*fp32:16", "idx_ptr": "*i32:16", "out_ptr": "*fp32:16"},
               {"M": 16, "N": 8, "IM": 32, "IN": 8, "AXIS": 0})
    # 32x8 results on 128 threads: two loads from the staged source per thread.
    assert ptx.count("ld.shared.b32") == 2
    assert "st.shared.b32" in ptx


def test_split_of_a_joined_value_moves_no_data():
    @tile.jit
    def roundtrip(x_ptr, y_ptr, N: tl.constexpr):
        r = tl.arange(0, N)
        a = tl.load(x_ptr + r)
        lo, hi = tl.split(tl.join(a, a + 1))
        tl.store(y_ptr + r, lo * hi)

    ptx = _ptx(roundtrip, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16"}, {"N": 512})
    assert "st.shared" not in ptx and "ld.shared" not in ptx and "bar.sync" not in ptx


# ---- errors ----------------------------------------------------------------------------------

@tile.jit
def movement_errors(x_ptr, CASE: tl.constexpr):
    r = tl.arange(0, 8)
    x = tl.load(x_ptr + r)
    if CASE == "split_last_dim":
        tl.split(tl.reshape(x, (2, 4)))
    elif CASE == "join_dtypes":
        tl.join(x, r)
    elif CASE == "cat_reorder":
        tl.cat(x, x)
    elif CASE == "cat_rank":
        tl.cat(x[:, None], x[:, None], can_reorder=True)
    elif CASE == "gather_rank":
        tl.gather(x, r[:, None], 0)
    elif CASE == "gather_float_index":
        tl.gather(x, x, 0)
    elif CASE == "gather_dims":
        tl.gather(x[:, None] + tl.zeros((8, 4), tl.float32), tl.zeros((2, 2), tl.int32), 0)
    elif CASE == "gather_axis":
        tl.gather(x, r, 1)
    elif CASE == "histogram_2d":
        tl.histogram(r[:, None], 8)
    elif CASE == "histogram_float":
        tl.histogram(x, 8)
    elif CASE == "histogram_bins":
        tl.histogram(r, 6)
    else:
        tl.histogram(r, 8, mask=r)


@pytest.mark.parametrize("case,message", [
    ("split_last_dim", "tl.split needs a tensor whose last dimension has size 2, got "
                       "tensor<2x4xfp32>"),
    ("join_dtypes", "tl.join: both inputs must have one dtype, got fp32 and i32"),
    ("cat_reorder", "tl.cat: the current implementation of `cat` always may reorder elements; "
                    "pass can_reorder=True (as Triton 3.6 requires)"),
    ("cat_rank", "tl.cat takes rank-1 tensors, got tensor<8x1xfp32>"),
    ("gather_rank", "tl.gather: the source and index tensors must have the same rank, got "
                    "tensor<8xfp32> and tensor<8x1xi32>"),
    ("gather_float_index", "tl.gather: the index must be an integer tensor, got fp32"),
    ("gather_dims", "tl.gather: index dim 1 has size 2 but the source's has 4; only the gather "
                    "axis (0) may differ"),
    ("gather_axis", "tl.gather: axis 1 is out of range for a source of rank 1"),
    ("histogram_2d", "tl.histogram only supports 1-D input, got tensor<8x1xi32>"),
    ("histogram_float", "tl.histogram only supports integer input, got fp32"),
    ("histogram_bins", "tl.histogram: `num_bins` must be a power of 2 (it is the result's "
                       "shape), got 6"),
    ("histogram_mask", "tl.histogram: the mask must be a boolean tensor, got i32"),
])
def test_movement_errors(case, message):
    x = np.zeros(8, np.float32)
    with pytest.raises(tile.CompilationError) as e:
        movement_errors[(1,)](x, CASE=case)
    assert e.value.message == message


# ---- permute of 3-D tensors ------------------------------------------------------------------

@tile.jit
def permute_3d_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                      D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr):
    offs = tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C \
        + tl.arange(0, C)[None, None, :]
    y = tl.permute(tl.load(x_ptr + offs), D0, D1, D2)
    tl.store(out_ptr + tl.arange(0, A * B * C), tl.reshape(y, [A * B * C]))


PERMUTATIONS_3D = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


@pytest.mark.parametrize("dims", PERMUTATIONS_3D)
def test_permute_3d(dims):
    x = rand((2, 4, 32), "float16", seed=12)
    out = np.zeros(x.size, np.float16)
    permute_3d_kernel[(1,)](x, out, A=2, B=4, C=32, D0=dims[0], D1=dims[1], D2=dims[2])
    np.testing.assert_array_equal(out, np.transpose(x, dims).reshape(-1))


def test_permute_3d_compiles():
    ptx = _ptx(permute_3d_kernel, {"x_ptr": "*fp16:16", "out_ptr": "*fp16:16"},
               {"A": 2, "B": 4, "C": 32, "D0": 2, "D1": 0, "D2": 1})
    assert "st.global" in ptx and ".local" not in ptx
