"""Tile kernels let a float multiply and an add fuse into one fma.rn, as Triton's
enable_fp_fusion (on by default) does, and Gluon kernels too (Triton's Gluon compiles with
the same default, and a tile kernel converted to Gluon must compute the same bits); the interpreter
rounds each op (so it may differ from the GPU by one rounding, as Triton's does)."""

import numpy as np

import gluon
import tile
import tile.language as tl
from gluon import language as gl


@tile.jit
def _axpy(x_ptr, y_ptr, out_ptr, a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@gluon.jit
def _axpy_gluon(x_ptr, y_ptr, out_ptr, a, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, BLOCK, layout=layout)
    gl.store(out_ptr + offs, a * gl.load(x_ptr + offs) + gl.load(y_ptr + offs))


SIGNATURE = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16", "a": "fp32"}


def test_tile_fuses_multiply_add_into_fma():
    kern = tile.compile(_axpy, signature=SIGNATURE, constexprs={"BLOCK": 128},
                        target="sm_90a")
    ptx = kern.asm["ptx"]
    assert "fma.rn.f32" in ptx
    assert "mul.rn.f32" not in ptx and "add.rn.f32" not in ptx
    assert "enable_fp_fusion = True" in kern.asm["ttgir"]


def test_gluon_fuses_as_tile_does():
    kern = gluon.compile(_axpy_gluon, signature=SIGNATURE, constexprs={"BLOCK": 128},
                         target="sm_90a")
    ptx = kern.asm["ptx"]
    assert "fma.rn.f32" in ptx
    assert "mul.rn.f32" not in ptx and "add.rn.f32" not in ptx


def test_interpreter_rounds_each_operation(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal(128).astype(np.float32) for _ in range(2))
    out = np.zeros(128, np.float32)
    _axpy[(1,)](x, y, out, np.float32(1.1), BLOCK=128)
    np.testing.assert_array_equal(out, np.float32(1.1) * x + y)
