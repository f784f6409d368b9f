"""`gl.extra.libdevice` in Gluon kernels: the tile language's libdevice, with the operands'
layout, in the interpreter against numpy and inlined into the PTX."""

import math
from os.path import isfile

import numpy as np
import pytest

import gluon
from gluon import language as gl
from shared_codegen.lowering.libdevice import candidate_paths


@gluon.jit
def libdevice_kernel(x_ptr, y_ptr, out_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([2], [32], [4], [0])
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    y = gl.load(y_ptr + offs)
    r = gl.extra.libdevice.fast_expf(x) + gl.extra.libdevice.tanh(y)
    r = r + gl.extra.libdevice.erfinv(y * 0.5) + gl.extra.libdevice.fast_dividef(x, y + 2.0)
    gl.static_assert(r.type.layout == layout)
    gl.store(out_ptr + offs, r)


def _inputs():
    rng = np.random.default_rng(3)
    return (rng.uniform(-2, 2, 256).astype(np.float32),
            rng.uniform(-0.9, 0.9, 256).astype(np.float32))


def test_gl_extra_libdevice_is_the_tile_library():
    from tile.language.extra import libdevice
    assert gl.extra.libdevice is libdevice


def test_gl_extra_libdevice_matches_numpy_in_the_interpreter():
    x, y = _inputs()
    out = np.zeros_like(x)
    libdevice_kernel[(1,)](x, y, out, N=256)
    erfinv = np.vectorize(_erfinv)(y.astype(np.float64) * 0.5)
    ref = np.exp(x) + np.tanh(y) + erfinv + x / (y + 2.0)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)


def _erfinv(v):
    # Newton on math.erf: exact enough for a float32 reference.
    r = 0.0
    for _ in range(60):
        r -= (math.erf(r) - v) / (2 / math.sqrt(math.pi) * math.exp(-r * r))
    return r


def test_gl_extra_libdevice_is_inlined_into_the_ptx():
    if not any(map(isfile, candidate_paths())):
        pytest.skip("no libdevice.10.bc installed (pip install nvidia-nvvm)")
    sig = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16"}
    compiled = gluon.compile(libdevice_kernel, sig, {"N": 256}, target="sm_90a")
    ptx = compiled.asm["ptx"]
    assert "__nv_" not in ptx and "call" not in ptx
    assert "ex2.approx.ftz.f32" in ptx      # fast_expf
    assert "div.approx.ftz.f32" in ptx      # fast_dividef
    assert compiled.asm["cubin"]
