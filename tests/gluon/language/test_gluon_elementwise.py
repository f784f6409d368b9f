"""Gluon elementwise operators, math and casts in the CPU interpreter against numpy, on
tensors with explicit layouts (1-D with replication, 2-D with register repeats)."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gl_test_util import FLOATS, L1, L2, NP, assert_close, f64, offsets_2d, rand

N = 64


@gluon.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, OP: gl.constexpr, N: gl.constexpr,
                  layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    y = gl.load(y_ptr + offs)
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
    elif OP == "lt":
        z = x < y
    elif OP == "ge":
        z = x >= y
    elif OP == "eq":
        z = x == y
    elif OP == "maximum":
        z = gl.maximum(x, y)
    elif OP == "minimum":
        z = gl.minimum(x, y)
    elif OP == "where":
        z = gl.where(x > y, x, y * 2)
    elif OP == "scalar":
        z = x * 2 + 1
    elif OP == "fma":
        z = gl.fma(x, y, x)
    gl.store(out_ptr + offs, z)


NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "lt": np.less,
    "ge": np.greater_equal, "eq": np.equal, "maximum": np.maximum, "minimum": np.minimum,
    "where": lambda x, y: np.where(x > y, x, y * 2), "scalar": lambda x, y: x * 2 + 1,
    "fma": lambda x, y: x * y + x,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(NUMPY_BINARY) + ["truediv"])
def test_float_binary_ops_match_numpy(op, dtype):
    x, y = rand(N, dtype, 1), rand(N, dtype, 2, low=0.5, high=4.0)
    out_dtype = np.bool_ if op in ("lt", "ge", "eq") else NP[dtype]
    if op == "truediv" and dtype != "float32":
        out_dtype = np.float32  # fp16 / bf16 divide in fp32 (Triton's rule)
    out = np.zeros(N, dtype=out_dtype)
    binary_kernel[(1,)](x, y, out, OP=op, N=N, layout=L1)
    ref = (f64(x) / f64(y)) if op == "truediv" else NUMPY_BINARY[op](f64(x), f64(y))
    if out_dtype == np.bool_:
        np.testing.assert_array_equal(out, NUMPY_BINARY[op](x, y))
    else:
        assert_close(out, ref, dtype)


INT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
              "or": np.bitwise_or, "xor": np.bitwise_xor, "maximum": np.maximum,
              "floordiv": lambda x, y: np.trunc(x / y).astype(x.dtype),
              "mod": lambda x, y: np.fmod(x, y)}


@pytest.mark.parametrize("op", list(INT_BINARY))
def test_int32_binary_ops_match_numpy(op):
    x = rand(N, "int32", 3)
    y = np.where(rand(N, "int32", 4) == 0, 7, rand(N, "int32", 4)).astype(np.int32)
    out = np.zeros(N, dtype=np.int32)
    binary_kernel[(1,)](x, y, out, OP=op, N=N, layout=L1)
    np.testing.assert_array_equal(out, INT_BINARY[op](x, y))


@gluon.jit
def unary_kernel(x_ptr, out_ptr, OP: gl.constexpr, M: gl.constexpr, N: gl.constexpr,
                 layout: gl.constexpr):
    offs = offsets_2d(M, N, layout)
    x = gl.load(x_ptr + offs)
    if OP == "neg":
        y = -x
    elif OP == "abs":
        y = gl.abs(x)
    elif OP == "exp":
        y = gl.exp(x.to(gl.float32))
    elif OP == "exp2":
        y = gl.exp2(x.to(gl.float32))
    elif OP == "log":
        y = gl.log(gl.abs(x.to(gl.float32)) + 1)
    elif OP == "sqrt":
        y = gl.sqrt(gl.abs(x.to(gl.float32)))
    elif OP == "rsqrt":
        y = gl.rsqrt(gl.abs(x.to(gl.float32)) + 1)
    elif OP == "sin":
        y = gl.sin(x.to(gl.float32))
    elif OP == "cos":
        y = gl.cos(x.to(gl.float32))
    elif OP == "floor":
        y = gl.floor(x.to(gl.float32))
    elif OP == "ceil":
        y = gl.ceil(x.to(gl.float32))
    elif OP == "sigmoid":
        y = gl.sigmoid(x.to(gl.float32))
    gl.store(out_ptr + offs, y)


NUMPY_UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2,
    "log": lambda x: np.log(np.abs(x) + 1), "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 1), "sin": np.sin, "cos": np.cos,
    "floor": np.floor, "ceil": np.ceil, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(NUMPY_UNARY))
def test_unary_and_math_match_numpy(op, dtype):
    x = rand((16, 32), dtype, 5)
    out_dtype = NP[dtype] if op in ("neg", "abs") else np.float32
    out = np.zeros((16, 32), dtype=out_dtype)
    unary_kernel[(1,)](x, out, OP=op, M=16, N=32, layout=L2)
    assert_close(out, NUMPY_UNARY[op](f64(x)), dtype if op in ("neg", "abs") else "float32")


@gluon.jit
def cast_kernel(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty))


@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("float32", "bfloat16"),
                                     ("float16", "float32"), ("bfloat16", "float32"),
                                     ("float16", "bfloat16"), ("float32", "int32"),
                                     ("int32", "float32"), ("int8", "int64")])
def test_casts_match_numpy(src, dst):
    x = rand(N, src, 6)
    out = np.zeros(N, dtype=NP[dst])
    cast_kernel[(1,)](x, out, N=N, layout=L1)
    expected = f64(x).astype(NP[dst]) if "int" not in dst else np.trunc(f64(x)).astype(NP[dst])
    np.testing.assert_array_equal(out, expected)


@gluon.jit
def layout_preserving_kernel(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    y = gl.where(x > 0, x, 0.0) + gl.maximum(x, 1.0) * gl.minimum(x, -1.0)
    gl.static_assert(y.type.layout == layout)
    gl.static_assert((x < 0).type.layout == layout)
    gl.static_assert(x.to(gl.float16).type.layout == layout)
    gl.store(out_ptr + offs, y)


def test_elementwise_results_keep_the_operand_layout():
    x = rand(N, "float32", 7)
    out = np.zeros(N, dtype=np.float32)
    layout_preserving_kernel[(1,)](x, out, N=N, layout=L1)
    np.testing.assert_allclose(out, np.where(x > 0, x, 0) + np.maximum(x, 1) * np.minimum(x, -1),
                               rtol=1e-6)
