"""gluon/fma_exp2.py: exp2 as a polynomial on the FMA pipe (its error bound and clamp), and
the MUFU / FMA split of a wgmma accumulator by column quarters (values, and a split that
moves no data)."""

import re

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.fma_exp2 import exp2_mixed, exp2_poly


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


@gluon.jit
def _exp2_mixed_kernel(x_ptr, out_ptr, QUARTERS: gl.constexpr):
    acc: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                  instr_shape=[16, 128, 16])
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, acc))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, acc))
    offs = gl.expand_dims(rows, 1) * 128 + gl.expand_dims(cols, 0)
    gl.store(out_ptr + offs, exp2_mixed(gl.load(x_ptr + offs), QUARTERS, 3))


def _mixed_ptx(quarters):
    return gluon.compile(_exp2_mixed_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                         {"QUARTERS": quarters}, target="sm_90a", num_warps=4).asm["ptx"]


@pytest.mark.parametrize("quarters", [0, 1, 2, 3, 4])
def test_exp2_mixed_puts_whole_column_quarters_on_the_fma_pipe(quarters):
    x = np.random.default_rng(quarters).uniform(-20, 4, (64, 128)).astype(np.float32)
    out = np.zeros_like(x)
    _exp2_mixed_kernel[(1,)](x, out, QUARTERS=quarters)
    exact = np.exp2(x.astype(np.float64))
    # The polynomial's columns (the first `quarters` quarters) differ from ex2 (exact in the
    # interpreter) by up to 7.5e-5.
    rel = np.abs(out / exact - 1)
    for q in range(4):
        block = rel[:, 32 * q:32 * (q + 1)]
        if q < quarters:
            assert 1e-7 < block.max() < 7.6e-5
        else:
            assert block.max() < 1e-6
    # On the GPU the split only renames registers: no shuffles, no shared memory, and each
    # thread's 64 exponentials are 64 - 16 * quarters ex2.approx.
    ptx = _mixed_ptx(quarters)
    assert len(re.findall(r"ex2\.approx", ptx)) == 64 - 16 * quarters
    assert not re.search(r"shfl\.sync\.bfly|ld\.shared|st\.shared", ptx)
