"""tl.clamp (scalar and tensor bounds, NaN in x with both PropagateNan modes, fp64, the
integer error) and tl.umulhi (int32/uint32/int64/uint64, signed operands read as unsigned)
against numpy in the interpreter, and their PTX."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import NP, f64, rand

N = 64


@tile.jit
def clamp_kernel(x_ptr, lo_ptr, hi_ptr, out_ptr, NAN: tl.constexpr, SCALAR: tl.constexpr,
                 N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if SCALAR:
        y = tl.clamp(x, -0.5, 0.75, propagate_nan=NAN)
    else:
        y = x.clamp(tl.load(lo_ptr + offs), tl.load(hi_ptr + offs), propagate_nan=NAN)
    tl.store(out_ptr + offs, y)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("nan", [tl.PropagateNan.NONE, tl.PropagateNan.ALL])
@pytest.mark.parametrize("scalar", [True, False])
def test_clamp(dtype, nan, scalar):
    x = rand(N, dtype, 1, -2, 2)
    lo, hi = rand(N, dtype, 2, -1.5, 0), rand(N, dtype, 3, 0, 1.5)
    x[[3, 17]] = np.nan
    out = np.zeros(N, np.float64 if dtype == "float64" else np.float32)
    clamp_kernel[(1,)](x, lo, hi, out, NAN=nan, SCALAR=scalar, N=N)
    low, high = (-0.5, 0.75) if scalar else (f64(lo), f64(hi))
    if nan == tl.PropagateNan.ALL:
        ref = np.clip(f64(x), low, high)      # NaN stays NaN
    else:
        ref = np.fmin(np.fmax(f64(x), low), high)  # NaN loses to the bounds: the lower one
    expected_nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(out), expected_nan)
    tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(dtype, 0)
    np.testing.assert_allclose(out[~expected_nan], ref[~expected_nan], rtol=tol, atol=0)


def test_clamp_propagate_nan_all_compiles_to_nan_propagating_min_max():
    sig = {"x_ptr": "*fp32:16", "lo_ptr": "*fp32:16", "hi_ptr": "*fp32:16",
           "out_ptr": "*fp32:16"}
    ptx = tile.compile(clamp_kernel, signature=sig, constexprs={
        "NAN": tl.PropagateNan.ALL, "SCALAR": False, "N": N}, target="sm_90a").asm["ptx"]
    assert "max.NaN.f32" in ptx and "min.NaN.f32" in ptx
    ptx = tile.compile(clamp_kernel, signature=sig, constexprs={
        "NAN": tl.PropagateNan.NONE, "SCALAR": False, "N": N}, target="sm_90a").asm["ptx"]
    assert "max.f32" in ptx and "min.f32" in ptx and ".NaN" not in ptx


def test_clamp_of_integers_is_refused():
    @tile.jit
    def int_clamp(x_ptr):
        tl.clamp(tl.load(x_ptr + tl.arange(0, 8)), 0, 3)

    with pytest.raises(tile.CompilationError) as e:
        int_clamp[(1,)](np.zeros(8, np.int32))
    assert e.value.message == "tl.clamp supports only floating-point tensors, got i32"


@tile.jit
def umulhi_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.umulhi(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


def _umulhi_reference(x, y, bits):
    mask = (1 << bits) - 1
    hi = [((int(a) & mask) * (int(b) & mask)) >> bits for a, b in zip(x, y)]
    if x.dtype.kind == "i":
        hi = [h - (1 << bits) if h >> (bits - 1) else h for h in hi]
    return np.array(hi, dtype=x.dtype)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_umulhi(dtype):
    rng = np.random.default_rng(4)
    info = np.iinfo(NP[dtype])
    x = rng.integers(info.min, info.max, N, dtype=NP[dtype], endpoint=True)
    y = rng.integers(info.min, info.max, N, dtype=NP[dtype], endpoint=True)
    x[:4] = [info.max, info.min, -1 if info.min else info.max, 0]
    y[:4] = [info.max, info.max, -1 if info.min else info.max, info.max]
    out = np.zeros(N, NP[dtype])
    umulhi_kernel[(1,)](x, y, out, N=N)
    np.testing.assert_array_equal(out, _umulhi_reference(x, y, np.dtype(NP[dtype]).itemsize * 8))


def test_umulhi_of_other_widths_is_refused():
    with pytest.raises(tile.CompilationError) as e:
        umulhi_kernel[(1,)](np.zeros(N, np.int16), np.zeros(N, np.int16), np.zeros(N, np.int16),
                            N=N)
    assert e.value.message == ("tl.umulhi supports int32, int64, uint32 and uint64 operands, "
                               "got i16")


@pytest.mark.parametrize("ty", ["i32", "u64"])
def test_umulhi_compiles(ty):
    sig = {name: f"*{ty}:16" for name in ("x_ptr", "y_ptr", "out_ptr")}
    ptx = tile.compile(umulhi_kernel, signature=sig, constexprs={"N": N},
                       target="sm_90a").asm["ptx"]
    assert ("mul.hi.u32" in ptx or "mul.wide.u32" in ptx) and "st.global" in ptx
