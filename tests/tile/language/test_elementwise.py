"""Elementwise operators and math builtins in the CPU interpreter against numpy, in fp16,
bf16 and fp32 (and integer dtypes where they apply)."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import FLOATS, INTS, NP, TL, assert_close, f64, rand

N = 16


@tile.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, OP: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "truediv":
        z = x / y
    elif OP == "floordiv":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "and":
        z = x & y
    elif OP == "or":
        z = x | y
    elif OP == "xor":
        z = x ^ y
    elif OP == "lshift":
        z = x << y
    elif OP == "rshift":
        z = x >> y
    elif OP == "lt":
        z = x < y
    elif OP == "le":
        z = x <= y
    elif OP == "gt":
        z = x > y
    elif OP == "ge":
        z = x >= y
    elif OP == "eq":
        z = x == y
    else:
        z = x != y
    tl.store(out_ptr + offs, z)


def run_binary(op, x, y, out_dtype):
    out = np.zeros(x.shape, dtype=out_dtype)
    binary_kernel[(1,)](x, y, out, OP=op, N=x.size)
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv"])
def test_float_arithmetic(op, dtype):
    x, y = rand(N, dtype, 1), rand(N, dtype, 2, 0.5, 4.0)
    # fp16/bf16 division computes in fp32 (Triton's rule), so the result is fp32.
    out_dtype = np.float32 if op == "truediv" else NP[dtype]
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide}[op]
    expected = ref(f64(x), f64(y)).astype(NP[dtype]) if op != "truediv" else f64(x) / f64(y)
    assert_close(run_binary(op, x, y, out_dtype), expected, dtype)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_integer_arithmetic_wraps(op, dtype):
    x, y = rand(N, dtype, 3), rand(N, dtype, 4)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
    with np.errstate(over="ignore"):
        expected = ref(x, y)
    assert_close(run_binary(op, x, y, NP[dtype]), expected, dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint32"])
def test_integer_true_division_is_fp32(dtype):
    x, y = rand(N, dtype, 5), rand(N, dtype, 6, 1, 4)
    y[y == 0] = 3
    assert_close(run_binary("truediv", x, y, np.float32), f64(x) / f64(y), "float32")


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_floordiv_and_mod_truncate_toward_zero(dtype):
    x = rand(N, dtype, 7, -8, 8)
    y = rand(N, dtype, 8, -1, 1)
    y[y == 0] = 7
    q = np.trunc(f64(x) / f64(y)).astype(NP[dtype])
    assert_close(run_binary("floordiv", x, y, NP[dtype]), q, dtype)
    assert_close(run_binary("mod", x, y, NP[dtype]), x - q * y, dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_float_mod_has_the_sign_of_the_dividend(dtype):
    x, y = rand(N, dtype, 9), rand(N, dtype, 10, 0.5, 2.0)
    out_dtype = np.float32  # % of fp16 computes in fp32
    assert_close(run_binary("mod", x, y, out_dtype), np.fmod(f64(x), f64(y)), "float32")


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint32", "int64"])
@pytest.mark.parametrize("op", ["and", "or", "xor", "lshift", "rshift"])
def test_bitwise_and_shifts(op, dtype):
    x = rand(N, dtype, 11)
    bits = np.dtype(NP[dtype]).itemsize * 8
    if op in ("lshift", "rshift"):
        y = np.random.default_rng(12).integers(0, bits, N).astype(NP[dtype])
    else:
        y = rand(N, dtype, 12)
    ref = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
           "lshift": np.left_shift, "rshift": np.right_shift}[op]
    # numpy's >> is arithmetic on signed and logical on unsigned types, as Triton's.
    assert_close(run_binary(op, x, y, NP[dtype]), ref(x, y), dtype)


@pytest.mark.parametrize("dtype", FLOATS + ["int8", "int32", "uint32"])
@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_comparisons_store_booleans(op, dtype):
    x, y = rand(N, dtype, 13, -2, 2), rand(N, dtype, 14, -2, 2)
    y[::3] = x[::3]  # some ties
    if dtype in FLOATS:
        x[1] = np.nan  # ordered predicates are false on NaN, != is true
    ref = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}[op]
    with np.errstate(invalid="ignore"):
        expected = ref(f64(x), f64(y))
    np.testing.assert_array_equal(run_binary(op, x, y, np.bool_), expected)


@tile.jit
def scalar_mix_kernel(x_ptr, out_ptr, N: tl.constexpr, EXPECT: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    z = 2.5 * x + 1
    tl.static_assert(z.dtype == EXPECT, "python scalars must not promote the tensor")
    tl.store(out_ptr + offs, z)


@pytest.mark.parametrize("dtype", FLOATS)
def test_python_scalars_keep_the_tensor_dtype(dtype):
    x = rand(N, dtype, 15)
    out = np.zeros(N, dtype=NP[dtype])
    scalar_mix_kernel[(1,)](x, out, N=N, EXPECT=TL[dtype])
    # Computed in the tensor's dtype: round after each op.
    expected = (f64(x) * 2.5).astype(NP[dtype]).astype(np.float64) + 1
    assert_close(out, expected, dtype)


@tile.jit
def promote_kernel(x_ptr, y_ptr, out_ptr, OP: tl.constexpr, EXPECT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    y = tl.load(y_ptr + tl.arange(0, 4))
    if OP == "add":
        z = x + y
    else:
        z = x / y
    tl.static_assert(z.dtype == EXPECT, "unexpected promotion")
    tl.store(out_ptr + tl.arange(0, 4), z)


@pytest.mark.parametrize("a,b,op,expect", [
    ("float16", "bfloat16", "add", "float16"), ("bfloat16", "int32", "add", "float32"),
    ("int8", "uint8", "add", "uint8"), ("int32", "uint32", "add", "uint32"),
    ("int64", "uint32", "add", "int64"), ("int8", "int16", "truediv", "float32"),
    ("float16", "float16", "truediv", "float32"), ("float16", "float32", "add", "float32"),
])
def test_tensor_tensor_promotion_in_a_kernel(a, b, op, expect):
    x, y = rand(4, a, 16, 1, 3), rand(4, b, 17, 1, 3)
    out = np.zeros(4, dtype=NP[expect])
    promote_kernel[(1,)](x, y, out, OP=op, EXPECT=TL[expect])
    ref = f64(x) + f64(y) if op == "add" else f64(x) / f64(y)
    assert_close(out, ref, expect if expect in FLOATS else "int64")


@tile.jit
def unary_kernel(x_ptr, neg_ptr, inv_ptr, not_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(neg_ptr + offs, -x)
    tl.store(inv_ptr + offs, ~x)
    first = tl.load(x_ptr)
    if not first:
        tl.store(not_ptr, 1)
    else:
        tl.store(not_ptr, +first)


@pytest.mark.parametrize("first", [0, 5])
def test_unary_operators(first):
    x = rand(N, "int32", 18)
    x[0] = first
    neg, inv, nt = np.zeros_like(x), np.zeros_like(x), np.zeros(1, np.int32)
    unary_kernel[(1,)](x, neg, inv, nt, N=N)
    np.testing.assert_array_equal(neg, -x)
    np.testing.assert_array_equal(inv, ~x)
    assert nt[0] == (1 if first == 0 else first)


@tile.jit
def where_kernel(c_ptr, x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    c = tl.load(c_ptr + offs)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.where(c, x, 0.5))


@pytest.mark.parametrize("dtype", FLOATS)
def test_where_with_a_scalar_branch(dtype):
    c, x = rand(N, "int1", 19), rand(N, dtype, 20)
    out = np.zeros(N, NP[dtype])
    where_kernel[(1,)](c, x, out, N=N)
    assert_close(out, np.where(c, f64(x), 0.5), dtype)


@tile.jit
def minmax_kernel(x_ptr, y_ptr, out_ptr, FN: tl.constexpr, NAN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if FN == "max":
        z = tl.maximum(x, y, propagate_nan=NAN)
    elif FN == "min":
        z = tl.minimum(x, y, propagate_nan=NAN)
    else:
        z = tl.clamp(x, -1.0, y, propagate_nan=NAN)
    tl.store(out_ptr + offs, z)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", ["max", "min", "clamp"])
@pytest.mark.parametrize("nan", [tl.PropagateNan.NONE, tl.PropagateNan.ALL])
def test_maximum_minimum_clamp_with_nans(fn, nan, dtype):
    x, y = rand(N, dtype, 21), rand(N, dtype, 22, 0, 3)
    x[2] = np.nan
    out = np.zeros(N, np.float32)  # bf16 computes in fp32; fp16 with a float literal too
    minmax_kernel[(1,)](x, y, out, FN=fn, NAN=nan, N=N)
    xs, ys = f64(x), f64(y)
    if nan == tl.PropagateNan.ALL:
        ref = {"max": np.maximum(xs, ys), "min": np.minimum(xs, ys),
               "clamp": np.minimum(np.maximum(xs, -1.0), ys)}[fn]
    else:
        ref = {"max": np.fmax(xs, ys), "min": np.fmin(xs, ys),
               "clamp": np.fmin(np.fmax(xs, -1.0), ys)}[fn]
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint32"])
def test_integer_maximum_minimum(dtype):
    x, y = rand(N, dtype, 23), rand(N, dtype, 24)
    out = np.zeros(N, NP[dtype])
    minmax_kernel[(1,)](x, y, out, FN="max", NAN=tl.PropagateNan.NONE, N=N)
    np.testing.assert_array_equal(out, np.maximum(x, y))
    minmax_kernel[(1,)](x, y, out, FN="min", NAN=tl.PropagateNan.NONE, N=N)
    np.testing.assert_array_equal(out, np.minimum(x, y))


@tile.jit
def math_kernel(x_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if FN == "exp":
        z = tl.exp(x)
    elif FN == "exp2":
        z = tl.exp2(x)
    elif FN == "log":
        z = tl.log(x)
    elif FN == "log2":
        z = tl.log2(x)
    elif FN == "sqrt":
        z = tl.sqrt(x)
    elif FN == "sqrt_rn":
        z = tl.sqrt_rn(x)
    elif FN == "rsqrt":
        z = tl.rsqrt(x)
    elif FN == "sin":
        z = tl.sin(x)
    elif FN == "cos":
        z = tl.cos(x)
    elif FN == "erf":
        z = tl.erf(x)
    elif FN == "floor":
        z = tl.floor(x)
    elif FN == "ceil":
        z = tl.ceil(x)
    elif FN == "sigmoid":
        z = tl.sigmoid(x)
    elif FN == "abs":
        z = tl.abs(x)
    else:
        z = tl.exp(x.to(tl.float32)).to(x.dtype)  # the way to exp a 16-bit tensor
    tl.store(out_ptr + offs, z)


MATH_REF = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "sqrt_rn": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos,
    "erf": np.vectorize(__import__("math").erf), "floor": np.floor, "ceil": np.ceil,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "abs": np.abs,
}
POSITIVE = {"log", "log2", "sqrt", "sqrt_rn", "rsqrt"}


@pytest.mark.parametrize("fn", sorted(MATH_REF))
def test_math_functions_fp32(fn):
    x = rand(N, "float32", 25, 0.1 if fn in POSITIVE else -3, 3)
    out = np.zeros(N, np.float32)
    math_kernel[(1,)](x, out, FN=fn, N=N)
    np.testing.assert_allclose(out, MATH_REF[fn](f64(x)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_math_on_16_bit_floats_needs_a_cast(dtype):
    x = rand(N, dtype, 26)
    out = np.zeros(N, NP[dtype])
    with pytest.raises(tile.CompilationError) as e:
        math_kernel[(1,)](x, out, FN="exp", N=N)
    short = "fp16" if dtype == "float16" else "bf16"
    assert e.value.message == (f"tl.exp expects fp32 or fp64 input, got {short}; cast first, "
                               "e.g. x.to(tl.float32)")
    math_kernel[(1,)](x, out, FN="exp_via_fp32", N=N)
    assert_close(out, np.exp(f64(x)), dtype)
    math_kernel[(1,)](x, out, FN="abs", N=N)  # abs needs no cast
    assert_close(out, np.abs(f64(x)), dtype)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint32"])
def test_abs_of_integers(dtype):
    x = rand(N, dtype, 27)
    out = np.zeros(N, NP[dtype])
    math_kernel[(1,)](x, out, FN="abs", N=N)
    np.testing.assert_array_equal(out, np.abs(x) if dtype != "uint32" else x)


@tile.jit
def fma_cdiv_kernel(x_ptr, y_ptr, z_ptr, out_ptr, q_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    z = tl.load(z_ptr + offs)
    tl.store(out_ptr + offs, tl.fma(x, y, z))
    tl.store(q_ptr + offs, tl.cdiv(offs, 3) + tl.cdiv(N, 4))


@pytest.mark.parametrize("dtype", FLOATS)
def test_fma_and_cdiv(dtype):
    x, y, z = rand(N, dtype, 28), rand(N, dtype, 29), rand(N, dtype, 30)
    out, q = np.zeros(N, NP[dtype]), np.zeros(N, np.int32)
    fma_cdiv_kernel[(1,)](x, y, z, out, q, N=N)
    assert_close(out, f64(x) * f64(y) + f64(z), dtype)
    np.testing.assert_array_equal(q, -(-np.arange(N) // 3) + N // 4)


@tile.jit
def cast_kernel(x_ptr, out_ptr, DST: tl.constexpr, BITCAST: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.cast(x, DST, bitcast=BITCAST))


@pytest.mark.parametrize("src,dst", [
    ("float32", "int32"), ("float32", "uint8"), ("float16", "int16"), ("bfloat16", "int32"),
    ("int32", "float32"), ("int8", "float16"), ("uint32", "float32"), ("float32", "float16"),
    ("float32", "bfloat16"), ("float16", "bfloat16"), ("bfloat16", "float16"),
    ("int32", "int8"), ("int8", "int64"), ("uint8", "int32"), ("int32", "int1"),
    ("float32", "int1"), ("int1", "float32"), ("int1", "int32"),
])
def test_casts(src, dst):
    x = rand(N, src, 31, 0 if dst.startswith("uint") else -4, 4)
    if src.startswith("float") or src == "bfloat16":
        x[0] = 0
    out = np.zeros(N, NP[dst])
    cast_kernel[(1,)](x, out, DST=TL[dst], BITCAST=False, N=N)
    if dst == "int1":
        expected = f64(x) != 0
    elif np.dtype(NP[dst]).kind in "iu" and src in FLOATS:
        expected = np.trunc(f64(x)).astype(NP[dst])
    else:
        with np.errstate(over="ignore"):
            expected = x.astype(NP[dst])
    assert_close(out, expected, dst if dst in FLOATS else "int64")


def test_bitcast_and_fp8_round_trip():
    x = rand(N, "float32", 32)
    out = np.zeros(N, np.int32)
    cast_kernel[(1,)](x, out, DST=tl.int32, BITCAST=True, N=N)
    np.testing.assert_array_equal(out, x.view(np.int32))
    import ml_dtypes

    f8 = np.zeros(N, ml_dtypes.float8_e5m2)
    cast_kernel[(1,)](x, f8, DST=tl.float8e5, BITCAST=False, N=N)
    np.testing.assert_array_equal(f64(f8), f64(x.astype(ml_dtypes.float8_e5m2)))


@tile.jit
def umulhi_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.umulhi(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


def test_umulhi():
    rng = np.random.default_rng(33)
    x = rng.integers(0, 2 ** 32, N, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2 ** 32, N, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(N, np.uint32)
    umulhi_kernel[(1,)](x, y, out, N=N)
    np.testing.assert_array_equal(out, ((x.astype(np.uint64) * y.astype(np.uint64)) >> 32))


@tile.jit
def div_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.fdiv(x, y) + tl.div_rn(x, y) + tl.math.exp(x * 0))


def test_fdiv_div_rn_and_the_math_module():
    x, y = rand(N, "float32", 34), rand(N, "float32", 35, 0.5, 2)
    out = np.zeros(N, np.float32)
    div_kernel[(1,)](x, y, out, N=N)
    np.testing.assert_allclose(out, 2 * f64(x) / f64(y) + 1, rtol=1e-6)
