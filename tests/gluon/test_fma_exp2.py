"""gluon/fma_exp2.py: exp2 as a polynomial on the FMA pipe, its error bound and clamp."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.fma_exp2 import exp2_poly


@gluon.jit
def _exp2_poly_kernel(x_ptr, out_ptr, N: gl.constexpr, DEGREE: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, N, layout=layout)
    gl.store(out_ptr + offs, exp2_poly(gl.load(x_ptr + offs), DEGREE))


@pytest.mark.parametrize("degree, bound", [(3, 7.6e-5), (5, 3e-7)])
def test_exp2_polynomial_relative_error(degree, bound):
    x = np.concatenate([np.linspace(-30.0, 8.0, 4090, dtype=np.float32),
                        np.float32([-0.5, 0.5, -125.5, 0.0, 7.75, -1e-7])])
    out = np.zeros_like(x)
    _exp2_poly_kernel[(1,)](x, out, N=4096, DEGREE=degree)
    rel = np.abs(out.astype(np.float64) / np.exp2(x.astype(np.float64)) - 1)
    assert rel.max() < bound, rel.max()
    # Below -126 the result is clamped to 2^-126 (P's 16- and 8-bit types round it to 0).
    tiny = np.zeros(4096, np.float32)
    tiny[:2] = (-200.0, -np.inf)
    _exp2_poly_kernel[(1,)](tiny, out, N=4096, DEGREE=degree)
    assert 0 < out[0] == out[1] < 2.0 ** -125
