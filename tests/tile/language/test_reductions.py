"""Reductions and scans in the CPU interpreter: axis / keep_dims on 2-D tiles, Triton's result
dtypes, argmax/argmin tie-breaking, user combine functions (also on tuples), scans."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import FLOATS, NP, TL, assert_close, f64, rand

M, N = 4, 8


@tile.jit
def reduce_kernel(x_ptr, out_ptr, FN: tl.constexpr, AXIS: tl.constexpr, KEEP: tl.constexpr,
                  EXPECT: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    if FN == "sum":
        r = tl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif FN == "max":
        r = tl.max(x, axis=AXIS, keep_dims=KEEP)
    elif FN == "min":
        r = x.min(AXIS, keep_dims=KEEP)
    elif FN == "argmax":
        r = tl.argmax(x, axis=AXIS, keep_dims=KEEP)
    elif FN == "argmin":
        r = tl.argmin(x, AXIS, keep_dims=KEEP)
    else:
        r = tl.xor_sum(x, axis=AXIS, keep_dims=KEEP)
    tl.static_assert(r.dtype == EXPECT, "unexpected reduction dtype")
    one = tl.arange(0, 1)
    if AXIS is None:
        if KEEP:
            tl.store(out_ptr + one[:, None] + one[None, :], r)
        else:
            tl.store(out_ptr, r)
    elif AXIS == 0:
        if KEEP:
            tl.store(out_ptr + one[:, None] + cols[None, :], r)
        else:
            tl.store(out_ptr + cols, r)
    else:
        if KEEP:
            tl.store(out_ptr + rows[:, None] + one[None, :], r)
        else:
            tl.store(out_ptr + rows, r)


def reference(fn, x, axis):
    if fn in ("argmax", "argmin"):
        flat = x if axis is not None else x.reshape(-1)
        return (np.argmax if fn == "argmax" else np.argmin)(f64(flat), axis=axis or 0)
    if fn == "xor_sum":
        return np.bitwise_xor.reduce(x, axis=axis) if axis is not None else \
            np.bitwise_xor.reduce(x.reshape(-1))
    return {"sum": np.sum, "max": np.max, "min": np.min}[fn](f64(x), axis=axis)


def run_reduce(fn, x, axis, keep, expect):
    out = np.zeros(max(M, N), NP[expect])
    reduce_kernel[(1,)](x, out, FN=fn, AXIS=axis, KEEP=keep, EXPECT=TL[expect], M=M, N=N)
    size = 1 if axis is None else (N if axis == 0 else M)
    return out[:size]


# Result dtypes per Triton 3.6: sum keeps floats, widens <32-bit ints (bool counts unsigned);
# max/min widen <32-bit types to fp32/int32 and bf16 to fp32; arg* give int32.
SUM_DTYPE = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
             "int8": "int32", "int16": "int32", "uint8": "uint32", "int1": "uint32",
             "int32": "int32", "int64": "int64"}
MAX_DTYPE = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32",
             "uint8": "int32", "int32": "int32", "int64": "int64", "uint32": "uint32"}


@pytest.mark.parametrize("axis,keep", [(0, False), (1, False), (1, True), (0, True),
                                       (None, False), (None, True)])
@pytest.mark.parametrize("dtype", FLOATS + ["int8", "int32"])
def test_sum_max_min(dtype, axis, keep):
    x = rand((M, N), dtype, 1)
    for fn, table in (("sum", SUM_DTYPE), ("max", MAX_DTYPE), ("min", MAX_DTYPE)):
        expect = table[dtype]
        got = run_reduce(fn, x, axis, keep, expect)
        ref = np.asarray(reference(fn, x, axis)).reshape(-1)
        if fn == "sum" and dtype in FLOATS:  # accumulated in the input's 16-bit type
            np.testing.assert_allclose(f64(got), ref, atol=M * N * 4 * {"float16": 1e-3,
                                       "bfloat16": 8e-3, "float32": 1e-7}[dtype])
        else:
            assert_close(got, ref, expect if expect in FLOATS else "int64")


@pytest.mark.parametrize("dtype", ["int16", "uint8", "int1", "int64"])
def test_sum_widens_small_integers(dtype):
    x = rand((M, N), dtype, 2)
    got = run_reduce("sum", x, 1, False, SUM_DTYPE[dtype])
    np.testing.assert_array_equal(got, x.astype(np.int64).sum(1))


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("dtype", FLOATS + ["int32", "uint8"])
def test_argmax_argmin_break_ties_toward_the_smallest_index(dtype, axis):
    x = rand((M, N), dtype, 3, -2, 2)
    x = np.round(f64(x) / 2).astype(NP[dtype]) if dtype in FLOATS else x % 3  # many ties
    for fn in ("argmax", "argmin"):
        got = run_reduce(fn, x, axis, False, "int32")
        np.testing.assert_array_equal(got, np.asarray(reference(fn, x, axis)).reshape(-1))


def test_argmax_keep_dims():
    x = rand((M, N), "float32", 4)
    got = run_reduce("argmax", x, 1, True, "int32")
    np.testing.assert_array_equal(got, np.argmax(x, 1))


def test_xor_sum():
    x = rand((M, N), "int32", 5)
    np.testing.assert_array_equal(run_reduce("xor_sum", x, 0, False, "int32"),
                                  np.bitwise_xor.reduce(x, 0))


@tile.jit
def max_with_indices(x_ptr, v_ptr, i_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    v, i = tl.max(x, 0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)
    v2, i2 = tl.min(x, 0, return_indices=True, return_indices_tie_break_left=False)
    tl.store(v_ptr + 1, v2)
    tl.store(i_ptr + 1, i2)


def test_max_min_with_return_indices():
    x = np.array([1, 5, 5, 0, -2, 3, -2, 5], np.float16)
    v, i = np.zeros(2, np.float16), np.zeros(2, np.int32)
    max_with_indices[(1,)](x, v, i, N=8)
    assert v.tolist() == [5, -2] and i[0] == 1 and i[1] in (4, 6)


@tile.jit
def _pair_max(a, ai, b, bi):
    # A user combine on a tuple: keep the larger value, the later index on ties.
    take = (a > b) | ((a == b) & (ai > bi))
    return tl.where(take, a, b), tl.where(take, ai, bi)


@tile.jit
def _mul_add(a, b):
    return a * b + 1.0


@tile.jit
def custom_reduce_kernel(x_ptr, v_ptr, i_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    idx = tl.broadcast_to(cols[None, :], (M, N))
    v, i = tl.reduce((x, idx), 1, _pair_max)
    tl.store(v_ptr + rows, v)
    tl.store(i_ptr + rows, i)
    o = x.reduce(0, _mul_add, keep_dims=True)
    tl.store(o_ptr + cols[None, :], o)
    tl.store(o_ptr + N, tl.reduce(x, None, tl.maximum))


def test_reduce_with_user_combine_functions():
    x = np.round(rand((M, N), "float32", 6, -2, 2))
    v, i, o = np.zeros(M, np.float32), np.zeros(M, np.int32), np.zeros(N + 1, np.float32)
    custom_reduce_kernel[(1,)](x, v, i, o, M=M, N=N)
    np.testing.assert_array_equal(v, x.max(1))
    np.testing.assert_array_equal(i, [N - 1 - np.argmax(r[::-1]) for r in x])
    # The interpreter combines halves pairwise: ((r0 r2) (r1 r3)) for M = 4.
    a = x[0] * x[2] + 1
    b = x[1] * x[3] + 1
    np.testing.assert_allclose(o[:N], a * b + 1, rtol=1e-6)
    assert o[N] == x.max()


@tile.jit
def scan_kernel(x_ptr, out_ptr, FN: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr,
                EXPECT: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if FN == "cumsum":
        y = tl.cumsum(x, AXIS, reverse=REV)
    elif FN == "cumprod":
        y = tl.cumprod(x, axis=AXIS, reverse=REV)
    else:
        y = tl.associative_scan(x, AXIS, _scan_max, reverse=REV)
    tl.static_assert(y.dtype == EXPECT, "unexpected scan dtype")
    tl.store(out_ptr + offs, y)


@tile.jit
def _scan_max(a, b):
    return tl.maximum(a, b)


def np_scan(fn, x, axis, reverse):
    x = f64(x)
    if reverse:
        x = np.flip(x, axis)
    y = {"cumsum": np.cumsum, "cumprod": np.cumprod,
         "scan_max": np.maximum.accumulate}[fn](x, axis=axis)
    return np.flip(y, axis) if reverse else y


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS + ["int8", "int32"])
def test_scans(dtype, axis, reverse):
    x = rand((M, N), dtype, 7, 0.5, 1.5) if dtype in FLOATS else rand((M, N), dtype, 7, -0.2, 0.2)
    for fn in ("cumsum", "cumprod", "scan_max"):
        if fn == "cumsum":
            expect = {"int8": "int32", "bfloat16": "float32"}.get(dtype, dtype)
        elif fn == "cumprod":
            expect = "float32" if dtype == "bfloat16" else dtype
        else:
            expect = "float32" if dtype == "bfloat16" else dtype  # tl.maximum promotes bf16
            if dtype == "bfloat16":
                continue  # the combine would return fp32 for bf16 inputs: see the error test
        out = np.zeros((M, N), NP[expect])
        scan_kernel[(1,)](x, out, FN=fn, AXIS=axis, REV=reverse, EXPECT=TL[expect], M=M, N=N)
        ref = np_scan(fn, x, axis, reverse)
        if expect in FLOATS:
            np.testing.assert_allclose(f64(out), ref, rtol={"float16": 4e-3, "bfloat16": 3e-2,
                                                            "float32": 1e-5}[expect])
        else:
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(out, ref.astype(np.int64).astype(NP[expect]))


def test_combine_fn_returning_the_wrong_dtype_is_reported():
    x = rand((M, N), "bfloat16", 8)
    out = np.zeros((M, N), np.float32)
    with pytest.raises(tile.CompilationError) as e:
        scan_kernel[(1,)](x, out, FN="scan_max", AXIS=0, REV=False, EXPECT=tl.float32, M=M, N=N)
    assert e.value.message == ("tl.associative_scan: combine_fn must return a bf16 scalar for "
                               "input 0, got fp32")


@tile.jit
def reduce_errors(x_ptr, CASE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    if CASE == "axis":
        tl.sum(x, axis=1)
    elif CASE == "scalar":
        tl.sum(tl.load(x_ptr))
    else:
        tl.xor_sum(x)


@pytest.mark.parametrize("case,message", [
    ("axis", "tl.sum: invalid axis 1 for a tensor of rank 1, expected -1 <= axis < 1"),
    ("scalar", "tl.sum needs tensors, got fp32"),
    ("xor", "tl.xor_sum supports only integers, got fp32"),
])
def test_reduction_errors(case, message):
    with pytest.raises(tile.CompilationError) as e:
        reduce_errors[(1,)](np.zeros(8, np.float32), CASE=case)
    assert e.value.message == message


@tile.jit
def _first_pair(a, ai, b, bi):
    # Scan on a tuple: running maximum together with where it was found.
    take = b > a
    return tl.where(take, b, a), tl.where(take, bi, ai)


@tile.jit
def misc_kernel(x_ptr, soft_ptr, flat_ptr, or_ptr, run_ptr, idx_ptr, N: tl.constexpr):
    rows = tl.arange(0, 2)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    tl.store(soft_ptr + rows[:, None] * N + cols[None, :], tl.softmax(x, 1, keep_dims=True))
    tl.store(flat_ptr + tl.arange(0, 2 * N), tl.ravel(x) * 2)
    tl.store(or_ptr + rows, tl.reduce_or(x.to(tl.int32), 1))
    run, idx = tl.associative_scan((x, tl.broadcast_to(cols[None, :], (2, N))), 1, _first_pair)
    tl.store(run_ptr + rows[:, None] * N + cols[None, :], run)
    tl.store(idx_ptr + rows[:, None] * N + cols[None, :], idx)


def test_softmax_ravel_reduce_or_and_tuple_scan():
    n = 8
    x = np.round(rand((2, n), "float32", 9, -3, 3))
    soft, flat = np.zeros((2, n), np.float32), np.zeros(2 * n, np.float32)
    ors, run, idx = np.zeros(2, np.int32), np.zeros((2, n), np.float32), np.zeros((2, n), np.int32)
    misc_kernel[(1,)](x, soft, flat, ors, run, idx, N=n)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(flat, x.reshape(-1) * 2)
    np.testing.assert_array_equal(ors, np.bitwise_or.reduce(x.astype(np.int32), 1))
    np.testing.assert_array_equal(run, np.maximum.accumulate(x, 1))
    expected_idx = [[int(np.argmax(r[:j + 1])) for j in range(n)] for r in x]
    np.testing.assert_array_equal(idx, expected_idx)
