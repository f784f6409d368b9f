"""Blackwell's packed fp32x2 math (`blackwell.float2`): interpreter numerics against numpy
(one rounding per operation), pack/unpack round trips, and the f32x2 PTX for sm_100a."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import float2
from gluon.language.nvidia.blackwell.float2 import Float2Tensor


@gluon.jit
def float2_kernel(x_ptr, y_ptr, z_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                  OP: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 2], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * N + cols[None, :]
    x = float2.pack(gl.load(x_ptr + offs), axis=1)
    y = float2.pack(gl.load(y_ptr + offs), axis=1)
    z = float2.pack(gl.load(z_ptr + offs), axis=1)
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "fma":
        r = float2.fma(x, y, z)
    elif OP == "full":
        r = float2.full_like(x, gl.full([], 3.0, gl.float32)) * y
    else:  # "roundtrip"
        r = x
    gl.store(out_ptr + offs, gl.convert_layout(float2.unpack(r, axis=1), layout))


def run(op, m=8, n=16, seed=0):
    rng = np.random.default_rng(seed)
    x, y, z = (rng.standard_normal((m, n)).astype(np.float32) for _ in range(3))
    out = np.zeros_like(x)
    float2_kernel[(1,)](x, y, z, out, M=m, N=n, OP=op)
    return x, y, z, out


@pytest.mark.parametrize("op,want", [
    ("add", lambda x, y, z: x + y),
    ("sub", lambda x, y, z: x - y),
    ("mul", lambda x, y, z: x * y),
    ("full", lambda x, y, z: np.float32(3.0) * y),
    ("roundtrip", lambda x, y, z: x),
    # fma rounds once: the float64 product plus z, rounded to float32.
    ("fma", lambda x, y, z: (x.astype(np.float64) * y + z).astype(np.float32)),
])
def test_float2_ops_match_numpy_bit_for_bit(op, want):
    x, y, z, out = run(op)
    np.testing.assert_array_equal(out, want(x, y, z))


def test_fma_is_not_two_roundings():
    # x*y rounded first would lose the low bits that z cancels.
    x = np.full((8, 16), 1 + 2.0 ** -12, np.float32)
    z = np.full((8, 16), -(1 + 2.0 ** -11), np.float32)
    out = np.zeros_like(x)
    float2_kernel[(1,)](x, x, z, out, M=8, N=16, OP="fma")
    np.testing.assert_array_equal(out, np.full_like(x, 2.0 ** -24))


def test_float2_tensor_is_an_aggregate_of_int64_pairs():
    assert Float2Tensor.__name__ == "Float2Tensor"
    assert {"pack2", "unpack2", "pack", "unpack", "fma", "full_like"} <= set(float2.__all__)


def test_sm100a_ptx_has_the_packed_instructions():
    sig = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "z_ptr": "*fp32:16",
           "out_ptr": "*fp32:16"}
    comp = gluon.compile(float2_kernel, sig, dict(M=8, N=16, OP="fma"), target="sm_100a",
                         num_warps=4)
    ptx = comp.asm["ptx"]
    assert "fma.rn.f32x2" in ptx and "mov.b64" in ptx
    assert comp.asm["cubin"]


@gluon.jit
def pair_sum_kernel(x_ptr, y_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * N + cols[None, :]
    sums = float2.pack2(gl.load(x_ptr + offs), gl.load(y_ptr + offs)).sum(axis=1)
    sx, sy = float2.unpack2(sums)
    gl.store(out_ptr + rows, sx)
    gl.store(out_ptr + M + rows, sy)


def test_sum_adds_both_halves_of_each_pair():
    rng = np.random.default_rng(4)
    x, y = (rng.standard_normal((32, 64)).astype(np.float32) for _ in range(2))
    out = np.zeros(64, np.float32)
    pair_sum_kernel[(1,)](x, y, out, M=32, N=64)
    np.testing.assert_allclose(out, np.concatenate([x.sum(1), y.sum(1)]), rtol=1e-5,
                               atol=1e-5)
    ptx = gluon.compile(pair_sum_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                          "out_ptr": "*fp32:16"}, {"M": 32, "N": 64},
                        target="sm_100a", num_warps=4).asm["ptx"]
    assert "add.rn.f32x2" in ptx and "shfl.sync.bfly" in ptx  # in-thread, then across lanes
