"""`tl.extra.cuda.libdevice`: interpreter numerics against numpy for a representative set of
functions and overloads, dispatch errors, and PTX with libdevice's code inlined."""

import math

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.lowering.libdevice import LibdeviceNotFound, candidate_paths
from shared_codegen.ops.extern.numpy_rules import NUMPY_RULES
from tile.language.extra import libdevice
from tile.language.extra.cuda import libdevice as cuda_libdevice

N = 64


@tile.jit
def unary_kernel(x_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs)))


@tile.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


@tile.jit
def pow_int_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    # Python int exponent: Triton makes it an int32 tensor, which picks __nv_powif.
    tl.store(out_ptr + offs, libdevice.pow(tl.load(x_ptr + offs), 3))


@tile.jit
def predicate_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    # isnan returns int1, so it selects directly.
    tl.store(out_ptr + offs, tl.where(libdevice.isnan(x), 1, 0) + 2 * libdevice.isinf(x))


def run(kernel, *arrays, out_dtype, **kw):
    out = np.zeros(arrays[0].shape, dtype=out_dtype)
    kernel[(1,)](*arrays, out, N=arrays[0].size, **kw)
    return out


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")


def _uniform(lo, hi, dtype, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, N).astype(dtype)


UNARY_FLOAT = [  # (function, numpy reference, input range)
    ("exp", np.exp, (-5, 5)), ("log1p", np.log1p, (0, 5)), ("tanh", np.tanh, (-3, 3)),
    ("atan", np.arctan, (-5, 5)), ("asinh", np.arcsinh, (-5, 5)), ("cbrt", np.cbrt, (-8, 8)),
    ("expm1", np.expm1, (-1, 1)), ("exp10", lambda x: 10.0 ** x, (-3, 3)),
    ("erfc", np.vectorize(math.erfc), (-3, 3)), ("lgamma", np.vectorize(math.lgamma), (0.1, 9)),
    ("rint", np.rint, (-5, 5)), ("trunc", np.trunc, (-5, 5)),
    ("sinpi", lambda x: np.sin(np.pi * x), (-3, 3)),
    ("normcdf", lambda x: 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2)), (-3, 3)),
    ("erfinv", None, (-0.99, 0.99)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,ref,bounds", UNARY_FLOAT, ids=[u[0] for u in UNARY_FLOAT])
def test_unary_float_functions_match_numpy(name, ref, bounds, dtype):
    if name == "erfinv":
        pytest.importorskip("scipy")  # the interpreter's erfinv is scipy.special's
    x = _uniform(*bounds, dtype)
    got = run(unary_kernel, x, out_dtype=dtype, FN=getattr(libdevice, name))
    if name == "erfinv":  # checked through its inverse
        ref_values = np.vectorize(math.erf)(got.astype(np.float64))
        np.testing.assert_allclose(ref_values, x, rtol=2e-6 if dtype == np.float32 else 1e-13)
        return
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,ref", [
    ("atan2", np.arctan2), ("hypot", np.hypot), ("pow", np.power), ("fmod", np.fmod),
    ("copysign", np.copysign), ("fdim", lambda a, b: np.maximum(a - b, 0)),
    ("remainder", np.vectorize(math.remainder))])
def test_binary_float_functions_match_numpy(name, ref):
    x, y = _uniform(0.5, 4, np.float32, 1), _uniform(-3, 3, np.float32, 2)
    if name == "pow":
        y = np.abs(y)
    got = run(binary_kernel, x, y, out_dtype=np.float32, FN=getattr(libdevice, name))
    expected = ref(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-6)


def test_pow_with_an_int_exponent_dispatches_to_powi():
    x = _uniform(-2, 2, np.float32)
    np.testing.assert_allclose(run(pow_int_kernel, x, out_dtype=np.float32), x ** 3, rtol=1e-6)


def test_directed_rounding_is_exact():
    # 1/3 is not representable: the _rd result is the float below, _ru the float above.
    x, y = np.full(N, 1.0, np.float32), np.full(N, 3.0, np.float32)
    down = run(binary_kernel, x, y, out_dtype=np.float32, FN=libdevice.div_rd)
    up = run(binary_kernel, x, y, out_dtype=np.float32, FN=libdevice.div_ru)
    assert np.all(down < up) and np.all(np.nextafter(down, np.float32(1)) == up)
    assert np.all(down.astype(np.float64) < 1 / 3) and np.all(up.astype(np.float64) > 1 / 3)
    # 2**24 + 1 is not an fp32: int2float rounds it by the mode.
    big = np.full(N, 2 ** 24 + 1, np.int32)
    assert run(unary_kernel, big, out_dtype=np.float32, FN=libdevice.int2float_rd)[0] == 2 ** 24
    assert run(unary_kernel, big, out_dtype=np.float32, FN=libdevice.int2float_ru)[0] == \
        2 ** 24 + 2
    vals = np.array([-2.5, -1.5, 1.5, 2.5] * (N // 4), np.float32)
    np.testing.assert_array_equal(
        run(unary_kernel, vals, out_dtype=np.int32, FN=libdevice.float2int_rn),
        np.array([-2, -2, 2, 2] * (N // 4)))
    np.testing.assert_array_equal(
        run(unary_kernel, vals, out_dtype=np.int32, FN=libdevice.float2int_rd),
        np.array([-3, -2, 1, 2] * (N // 4)))


@pytest.mark.parametrize("name,ref", [
    ("clz", lambda v: 32 - int(v & 0xFFFFFFFF).bit_length()),
    ("popc", lambda v: bin(v & 0xFFFFFFFF).count("1")),
    ("brev", lambda v: int(f"{v & 0xFFFFFFFF:032b}"[::-1], 2)),
    ("ffs", lambda v: (v & -v).bit_length())])
def test_bit_functions_match_python(name, ref):
    x = np.random.default_rng(3).integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    got = run(unary_kernel, x, out_dtype=np.int32, FN=getattr(libdevice, name))
    expected = np.array([ref(int(v)) for v in x], dtype=np.int64).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(got, expected)


def test_mulhi_signed_and_unsigned():
    rng = np.random.default_rng(4)
    a = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    got = run(binary_kernel, a, b, out_dtype=np.int32, FN=libdevice.mulhi)
    np.testing.assert_array_equal(got, (a.astype(np.int64) * b.astype(np.int64)) >> 32)
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    got = run(binary_kernel, ua, ub, out_dtype=np.uint32, FN=libdevice.mulhi)
    expected = [(int(p) * int(q)) >> 32 for p, q in zip(ua, ub)]
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.uint32))


def test_predicates_return_int1():
    x = np.array([np.nan, np.inf, -np.inf, 1.0] * (N // 4), np.float32)
    np.testing.assert_array_equal(run(predicate_kernel, x, out_dtype=np.int32),
                                  [1, 2, 2, 0] * (N // 4))


def test_the_three_module_paths_are_one_library():
    assert tl.extra.cuda.libdevice is cuda_libdevice
    assert tl.extra.libdevice.exp is cuda_libdevice.exp
    assert len(cuda_libdevice.FUNCTIONS) >= 190  # Triton 3.6 lists 197


def test_every_symbol_has_an_interpreter_rule():
    symbols = {s for overloads in cuda_libdevice.FUNCTIONS.values() for s, _ in overloads.values()}
    assert symbols - set(NUMPY_RULES) == set()


def test_a_dtype_outside_the_signatures_is_an_error_in_the_users_terms():
    x = np.zeros(N, np.float16)
    with pytest.raises(Exception, match=r"libdevice\.exp does not take \(fp16\); it takes "
                                        r"\(fp32\), \(fp64\)"):
        run(unary_kernel, x, out_dtype=np.float16, FN=libdevice.exp)


@tile.jit
def many_functions_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    r = libdevice.tanh(x) + libdevice.pow(x, y) + libdevice.atan2(x, y) + libdevice.erfinv(y)
    r += libdevice.log1p(x).to(tl.float64).to(tl.float32) + libdevice.popc(offs).to(tl.float32)
    r += libdevice.exp(x.to(tl.float64)).to(tl.float32)
    tl.store(out_ptr + offs, r)


def test_ptx_has_libdevice_inlined_and_assembles():
    if not any(map(_isfile, candidate_paths())):
        pytest.skip("no libdevice.10.bc installed (pip install nvidia-nvvm)")
    compiled = tile.compile(many_functions_kernel, signature={
        "x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"}, constexprs={"N": 128},
        target="sm_90a")
    ptx = compiled.asm["ptx"]
    assert "__nv_" not in ptx and "call" not in ptx  # everything inlined
    assert "popc.b32" in ptx and "ex2.approx" in ptx and "fma.rn.f64" in ptx
    assert compiled.asm["cubin"]


def test_a_missing_libdevice_names_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("SC_LIBDEVICE_PATH", str(tmp_path / "missing.bc"))
    with pytest.raises(Exception, match="SC_LIBDEVICE_PATH=.*missing.bc' is not a file"):
        tile.compile(many_functions_kernel, signature={
            "x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"}, constexprs={"N": 32},
            target="sm_80")


def _isfile(path):
    import os
    return os.path.isfile(path)


def test_round_is_half_away_from_zero_exactly(interpret):
    x = np.array([0.5, 1.5, -2.5, np.nextafter(np.float32(0.5), np.float32(0))] * (N // 4),
                 np.float32)
    np.testing.assert_array_equal(run(unary_kernel, x, out_dtype=np.float32,
                                      FN=libdevice.round), [1, 2, -3, 0] * (N // 4))


def test_tutorial_07_extern_libs_option(tmp_path):
    x = np.linspace(-0.9, 0.9, N).astype(np.float32)
    out = np.zeros_like(x)
    unary_kernel[(1,)](x, out, FN=libdevice.asin, N=N, interpret=True,
                       extern_libs={"libdevice": _found_or_any(tmp_path)})
    np.testing.assert_allclose(out, np.arcsin(x), rtol=2e-6)
    with pytest.raises(ValueError, match=r"extern_libs\['libdevice'\] = '.*nowhere.bc' is not "
                                         r"a file"):
        unary_kernel[(1,)](x, out, FN=libdevice.asin, N=N, interpret=True,
                           extern_libs={"libdevice": str(tmp_path / "nowhere.bc")})


def _found_or_any(tmp_path):
    found = [p for p in candidate_paths() if _isfile(p)]
    if found:
        return found[0]
    path = tmp_path / "libdevice.10.bc"
    path.write_bytes(b"")
    return str(path)
