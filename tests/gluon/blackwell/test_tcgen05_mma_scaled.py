"""tcgen05_mma_scaled (block-scaled MX MMA): interpreter numerics against a numpy decode of
the formats, scale factors in tensor memory (stores and tcgen05_copy), races word for word,
the errors, and the sm_100a PTX / cubin."""

import inspect

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, TensorMemoryScalesLayout,
                                             allocate_tensor_memory, fence_async_shared,
                                             get_tmem_reg_layout, mbarrier, tcgen05_commit,
                                             tcgen05_copy, tcgen05_mma_scaled)
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


@gluon.jit
def _grid(ptr, R: gl.constexpr, C: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    return gl.load(ptr + rows[:, None] * C + cols[None, :])


@gluon.jit
def _scales_to_tmem(ptr, R: gl.constexpr, S: gl.constexpr, scale_layout: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    x = _grid(ptr, R, S, blocked)
    reg: gl.constexpr = get_tmem_reg_layout(x.dtype, [R, S], scale_layout, gl.num_warps())
    tmem = allocate_tensor_memory(x.dtype, [R, S], scale_layout)
    tmem.store(gl.convert_layout(x, reg))
    return tmem


@gluon.jit
def scaled_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, out_ptr, M: gl.constexpr,
                  N: gl.constexpr, KA: gl.constexpr, KB: gl.constexpr, S: gl.constexpr,
                  A_TYPE: gl.constexpr, B_TYPE: gl.constexpr, RACE: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, KA], a_ptr.dtype.element_ty)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([N, KB], b_ptr.dtype.element_ty)
    a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [M, KA], a_layout,
                                  _grid(a_ptr, M, KA, blocked))
    b = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [N, KB], b_layout,
                                  _grid(b_ptr, N, KB, blocked))  # [N, K]: K contiguous
    scale_layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scale = _scales_to_tmem(sa_ptr, M, S, scale_layout)
    b_scale = _scales_to_tmem(sb_ptr, N, S, scale_layout)
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    acc_reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], acc_layout, gl.num_warps())
    acc = allocate_tensor_memory(gl.float32, [M, N], acc_layout,
                                 gl.convert_layout(_grid(c_ptr, M, N, blocked), acc_reg))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, A_TYPE, B_TYPE,
                       use_acc=True, mbarriers=[bar])
    if RACE:
        b_scale.store(b_scale.load())  # the MMA may still be reading the scales
    mbarrier.wait(bar, 0)
    out = gl.convert_layout(acc.load(), blocked)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * N + cols[None, :], out)


def quantized(rng, rows, k, fmt, vec, ue4m3):
    """(operand array to pass, float64 values, scale bytes, float64 scales)."""
    if fmt == "e2m1":
        codes = rng.integers(0, 16, (rows, k)).astype(np.uint8)
        packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # first element in the low nibble
        values = E2M1[codes]
    else:
        dtype = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
        packed = rng.uniform(-4, 4, (rows, k)).astype(dtype)
        values = packed.astype(np.float64)
    if ue4m3:
        scales = rng.choice([0.25, 0.5, 1.0, 1.5, 2.0, 3.0], (rows, k // vec))
        scale_bytes = scales.astype(ml_dtypes.float8_e4m3fn)
    else:
        exps = rng.integers(120, 134, (rows, k // vec)).astype(np.uint8)
        scales, scale_bytes = np.ldexp(1.0, exps.astype(np.int64) - 127), exps
    return packed, values, scale_bytes, scales


def run_scaled(a_type, b_type, n, k, ue4m3=False, race=False, seed=0):
    m, vec = 128, 16 if ue4m3 else 32
    rng = np.random.default_rng(seed)
    a, av, sa, sav = quantized(rng, m, k, a_type, vec, ue4m3)
    b, bv, sb, sbv = quantized(rng, n, k, b_type, vec, ue4m3)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    scaled_kernel[(1,)](a, b, sa, sb, c, out, M=m, N=n, KA=a.shape[1], KB=b.shape[1],
                        S=k // vec, A_TYPE=a_type, B_TYPE=b_type, RACE=race)
    ref = (av * sav.repeat(vec, axis=1)) @ (bv * sbv.repeat(vec, axis=1)).T + c
    return out, ref


@pytest.mark.parametrize("a_type,b_type,n,k,ue4m3", [
    ("e4m3", "e4m3", 64, 128, False),   # mxfp8, 4 K steps: scale IDs 0-3
    ("e5m2", "e4m3", 32, 64, False),    # mixed 8-bit formats
    ("e2m1", "e2m1", 64, 128, False),   # mxfp4 (.kind::mxf4)
    ("e2m1", "e2m1", 32, 128, True),    # nvfp4 (.kind::mxf4nvf4, e4m3 scales per 16)
])
def test_scaled_mma_matches_numpy(monkeypatch, a_type, b_type, n, k, ue4m3):
    monkeypatch.setenv("SC_INTERPRET_SEED", "3")
    out, ref = run_scaled(a_type, b_type, n, k, ue4m3)
    # Products of the formats and power-of-two scales are exact; only the fp32 rounding
    # of the sum differs from the float64 reference.
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_storing_scales_an_in_flight_mma_reads_is_a_race():
    with pytest.raises(InterpreterError) as info:
        run_scaled("e4m3", "e4m3", 32, 64, race=True)
    mma = line_of(scaled_kernel, "tcgen05_mma_scaled(a, b.permute")
    store = line_of(scaled_kernel, "b_scale.store(b_scale.load())")
    path = __file__
    assert f"{path}:{store}: race: tensor_memory_descriptor.store writes tensor memory that " \
           f"the tcgen05_mma_scaled at {path}:{mma} may still be reading; wait on the " \
           f"mbarrier its completion is committed to (tcgen05_commit or mbarriers=[...]) " \
           f"first" in str(info.value), str(info.value)
