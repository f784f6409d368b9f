"""sort, topk, bitonic_merge and flip (bitonic networks over a hypercube view) in the CPU
interpreter against numpy, their PTX, and their error messages."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import NP, rand


@tile.jit
def sort_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                OP: tl.constexpr, DESC: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    if OP == "sort":
        y = tl.sort(x, descending=DESC)
    elif OP == "sort_dim":
        y = x.sort(dim=1, descending=DESC)
    elif OP == "topk":
        y = tl.topk(x, K)
    else:  # bitonic_merge of rows made bitonic: ascending then descending halves
        half = tl.reshape(x, (M, 2, N // 2))
        lo, hi = tl.split(tl.permute(half, (0, 2, 1)))
        rows = tl.join(tl.sort(lo), tl.sort(hi, descending=True))  # M x N/2 x 2
        y = tl.bitonic_merge(tl.reshape(tl.permute(rows, (0, 2, 1)), (M, N)), descending=DESC)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], y)


def _sorted(x, descending):
    s = np.sort(x, axis=-1, kind="stable")
    return s[..., ::-1] if descending else s


@pytest.mark.parametrize("dtype,shape,descending", [
    ("float32", (1, 8), False), ("float32", (2, 128), True), ("float16", (4, 16), True),
    ("bfloat16", (4, 16), False), ("int8", (2, 128), False), ("int32", (4, 16), True),
    ("uint8", (1, 8), True), ("int64", (4, 16), False)])
def test_sort(dtype, shape, descending):
    x = rand(shape, dtype, seed=shape[1])
    out = np.zeros(shape, NP[dtype])
    sort_kernel[(1,)](x, out, M=shape[0], N=shape[1], K=shape[1], OP="sort", DESC=descending)
    np.testing.assert_array_equal(out, _sorted(x, descending))


@pytest.mark.parametrize("k", [1, 4, 32])
@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_topk(k, dtype):
    x = rand((4, 32), dtype, seed=k)
    out = np.zeros((4, k), NP[dtype])
    sort_kernel[(1,)](x, out, M=4, N=32, K=k, OP="topk", DESC=True)
    np.testing.assert_array_equal(out, _sorted(x, True)[:, :k])


@pytest.mark.parametrize("descending", [False, True])
def test_sort_method_with_dim_and_bitonic_merge(descending):
    x = rand((4, 64), "float32", seed=3)
    out = np.zeros((4, 64), np.float32)
    sort_kernel[(1,)](x, out, M=4, N=64, K=64, OP="sort_dim", DESC=descending)
    np.testing.assert_array_equal(out, _sorted(x, descending))
    sort_kernel[(1,)](x, out, M=4, N=64, K=64, OP="merge", DESC=descending)
    np.testing.assert_array_equal(out, _sorted(x, descending))


@tile.jit
def flip_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                DIM: tl.constexpr):
    offs = tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C \
        + tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + offs)
    if DIM is None:
        y = tl.flip(x)
    else:
        y = x.flip(DIM)
    tl.store(out_ptr + offs, y)


@pytest.mark.parametrize("dim,dtype", [(None, "float32"), (0, "bfloat16"), (1, "int8"),
                                       (2, "int1"), (-2, "float32")])
def test_flip(dim, dtype):
    shape = (2, 8, 16)
    x = rand(shape, dtype, seed=5)
    out = np.zeros(shape, NP[dtype])
    flip_kernel[(1,)](x, out, A=2, B=8, C=16, DIM=dim)
    np.testing.assert_array_equal(out, np.flip(x, axis=-1 if dim is None else dim))


def test_flip_of_a_size_one_dim_is_the_identity():
    x = rand((1, 4, 8), "float32", seed=6)
    out = np.zeros_like(x)
    flip_kernel[(1,)](x, out, A=1, B=4, C=8, DIM=0)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_sort_and_flip_compile_to_shuffles(target):
    sig = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"}
    ptx = tile.compile(sort_kernel, signature=sig, constexprs={
        "M": 4, "N": 64, "K": 64, "OP": "sort", "DESC": True}, target=target).asm["ptx"]
    assert "shfl.sync.bfly" in ptx and ".local" not in ptx
    ptx = tile.compile(flip_kernel, signature=sig, constexprs={
        "A": 2, "B": 8, "C": 16, "DIM": 2}, target=target).asm["ptx"]
    assert "st.global" in ptx and ".local" not in ptx


@tile.jit
def sort_errors(x_ptr, CASE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :])
    if CASE == "sort_dim":
        tl.sort(x, dim=0)
    elif CASE == "topk_k":
        tl.topk(x, 3)
    elif CASE == "topk_big":
        tl.topk(x, 16)
    elif CASE == "flip_dim":
        tl.flip(x, 2)
    elif CASE == "descending":
        tl.sort(x, descending=2)
    else:
        tl.sort(tl.load(x_ptr))


@pytest.mark.parametrize("case,message", [
    ("sort_dim", "tl.sort: only the last (minor) dimension is supported, got dim=0 for a "
                 "tensor of rank 2"),
    ("topk_k", "tl.topk: k must be a power of 2 between 1 and the size of the last dimension "
               "(8), got 3"),
    ("topk_big", "tl.topk: k must be a power of 2 between 1 and the size of the last "
                 "dimension (8), got 16"),
    ("flip_dim", "tl.flip: dim 2 is out of range for a tensor of rank 2"),
    ("descending", "tl.sort: `descending` must be a compile-time bool, got 2"),
    ("scalar", "tl.sort needs a tensor, got fp32"),
])
def test_sort_errors(case, message):
    with pytest.raises(tile.CompilationError) as e:
        sort_errors[(1,)](np.zeros(32, np.float32), CASE=case)
    assert e.value.message == message
