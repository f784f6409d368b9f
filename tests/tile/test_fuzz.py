"""Differential fuzzing in CI: Hypothesis-generated tile programs (benchmarks/tile_fuzz) run in
the CPU interpreter against the numpy reference, a few compiled for sm_90a; plus regression
tests for what the fuzzer found and checks that the reference itself can fail.

Derandomized with the example database off, so every run tries the same programs.
"""

import os
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tile
import tile.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from tile_fuzz import harness  # noqa: E402
from tile_fuzz.program import Node, Program  # noqa: E402
from tile_fuzz.strategies import programs  # noqa: E402
from tile_fuzz.typing_rules import binary_result, computation_type  # noqa: E402



def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz_kernels"))


@fuzz_settings(100)
@given(program=programs(max_ops=8), data=st.data())
def test_fuzzed_programs_match_numpy_in_the_interpreter(kernel_dir, program, data):
    kernel = harness.load_kernel(program.source(), kernel_dir)
    m = 1 if program.rank == 1 else data.draw(st.integers(1, program.block_m))
    n = data.draw(st.integers(1, program.block_n))
    seed = data.draw(st.integers(0, 2**31 - 1))
    verdict = harness.check_interpreter(program, kernel, m, n, seed)
    assert verdict.ok, f"{verdict.detail}\n(M, N) = ({m}, {n}), seed {seed}\n{program.source()}"


@fuzz_settings(3)
@given(program=programs(max_ops=5))
def test_fuzzed_programs_compile_for_sm_90a(kernel_dir, program):
    kernel = harness.load_kernel(program.source(), kernel_dir)
    asm = tile.compile(kernel, signature=program.signature(), constexprs=program.constexprs(),
                       target="sm_90a").asm
    assert ".visible .entry kernel(" in asm["ptx"]
    assert ".target sm_90a" in asm["ptx"]
    assert len(asm["cubin"]) > 0


# ---- the reference can fail --------------------------------------------------------------------

def _program(*nodes, rank=1, block_n=8):
    return Program(rank, 1, block_n, tuple(nodes), len(nodes) - 1)


def test_reference_types_follow_triton_promotion():
    assert computation_type("int8", "uint8") == "uint8"
    assert computation_type("int16", "uint8") == "int16"
    assert computation_type("float16", "bfloat16") == "float16"  # fp16 wins (rule 3)
    assert computation_type("int32", "bfloat16") == "float32"
    assert computation_type("float16", "int32", False, True) == "float16"
    assert computation_type("int8", "float32", False, True) == "float32"
    assert computation_type("int8", "uint8", div_or_mod=True) is None
    assert binary_result("/", "int8", "int8") == ("float32", "float32")
    assert binary_result("maximum", "bfloat16", "bfloat16") == ("float32", "float32")
    assert binary_result("//", "float32", "float32") is None
    assert binary_result("<", "int1", "int32", True) == ("int32", "int1")


def test_compare_catches_one_ulp_on_an_exact_op(kernel_dir):
    program = _program(Node("load", (), (0,), "float16", "row"),
                       Node("load", (), (0,), "float16", "row"),
                       Node("binary", (0, 1), ("+", None), "float16", "row"))
    kernel = harness.load_kernel(program.source(), kernel_dir)
    inputs = harness.make_inputs(program, 1, 8, seed=3)
    expected = harness.crop(harness.reference(program, inputs), program, 1, 8)
    actual = harness.run_interpreter(program, kernel, inputs, 1, 8)
    assert harness.compare(actual, *expected, "float16").ok
    actual[0, 2] = np.nextafter(actual[0, 2], np.float16(np.inf))
    verdict = harness.compare(actual, *expected, "float16")
    assert not verdict.ok and verdict.detail.startswith("1 of 8 elements differ")


def test_reference_leaves_float_to_int_out_of_range_unchecked():
    program = _program(Node("load", (), (0,), "float32", "row"),
                       Node("cast", (0,), (), "int8", "row"))
    inputs = [np.array([[1.5, -2.5, 300.0, np.nan, -129.0, 127.9, 0, 0]], np.float32)]
    value = harness.reference(program, inputs)  # one program: a leading axis of 1
    assert value.val[0, :2].tolist() == [1, -2] and value.val[0, 5] == 127
    assert value.unsure[0].tolist() == [False, False, True, True, True, False, False, False]


# ---- what the fuzzer found --------------------------------------------------------------------

@tile.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y, z = tl.load(x_ptr + offs), tl.load(y_ptr + offs), tl.load(z_ptr + offs)
    tl.store(out_ptr + offs, tl.fma(x, y, z))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_rounds_once(dtype):
    # Found by the fuzzer: fp64 fma was x*y rounded, then + z rounded (two roundings); fp32
    # rounded to float64 first and then to fp32 (double rounding). z = -(x*y rounded) makes
    # the result the product's rounding error, which only one rounding keeps.
    rng = np.random.default_rng(7)
    x, y = (rng.uniform(-4, 4, 64).astype(dtype) for _ in range(2))
    z = -(x.astype(np.float64) * y).astype(dtype)
    z[32:] = rng.uniform(-4, 4, 32).astype(dtype)
    out = np.zeros(64, dtype)
    fma_kernel[(1,)](x, y, z, out, N=64)
    exact = [Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
             for a, b, c in zip(x, y, z)]
    for got, q in zip(out, exact):
        below = Fraction(float(np.nextafter(got, dtype(-np.inf))))
        above = Fraction(float(np.nextafter(got, dtype(np.inf))))
        # correctly rounded: no neighbour of the result is nearer the exact value
        assert abs(Fraction(float(got)) - q) <= min(abs(below - q), abs(above - q))
    assert np.count_nonzero(out[:32]) > 16  # the rounding errors themselves, not zeros


@tile.jit
def fp8_round_trip_kernel(x_ptr, out_ptr, FP8: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(FP8).to(tl.float32))


def test_fp8e5_casts_compile_for_sm_80_in_software():
    # Found by the fuzzer: sm_80 kernels with fp8 casts emitted sm_89+ `cvt` forms and failed
    # in ptxas. e5m2 now converts with integer ops before sm_89, as Triton does.
    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32"}
    ptx = {target: tile.compile(fp8_round_trip_kernel, signature=signature,
                                constexprs={"FP8": tl.float8e5, "N": 128},
                                target=target).asm["ptx"] for target in ("sm_80", "sm_90a")}
    assert "e5m2" not in ptx["sm_80"] and "cvt.rn.f16.f32" in ptx["sm_80"]
    assert "cvt.rn.satfinite.e5m2x2.f32" in ptx["sm_90a"]


def test_fp8e4nv_before_sm_89_is_refused_in_the_users_terms():
    with pytest.raises(tile.CompilationError, match=r"fp8e4nv \(tl.float8e4nv\) data type is "
                                                    r"not supported on CUDA arch < 89 \(target "
                                                    r"sm_80\)"):
        tile.compile(fp8_round_trip_kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                     constexprs={"FP8": tl.float8e4nv, "N": 128}, target="sm_80")


def _e5m2_by_the_software_steps(x):
    """shared_codegen/ops/arith/fp8_software.f32_to_e5m2, step by step in numpy."""
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore"):
        half = x.astype(np.float16)
    back = half.astype(np.float32)
    inexact = back != x
    bits = half.view(np.uint16).astype(np.int64)
    bits = np.where(inexact & (np.abs(back) > np.abs(x)), bits - 1, bits)
    bits = np.where(inexact, bits | 1, bits)
    magnitude = bits & 0x7FFF
    rounded = (magnitude + 0x7F + ((magnitude >> 8) & 1)) >> 8
    byte = np.where(magnitude > 0x7C00, 0x7F, np.minimum(rounded, 0x7B)) | ((bits & 0x8000) >> 8)
    return byte.astype(np.uint8).view(ml_dtypes.float8_e5m2)


def test_the_software_e5m2_rounding_is_round_to_nearest_even_with_saturation():
    rng = np.random.default_rng(11)
    exponents = rng.integers(-20, 18, 20000).astype(np.float64)
    x = (rng.uniform(1, 2, 20000) * 2.0 ** exponents * rng.choice([-1, 1], 20000))
    # ties of e5m2 and values one fp32 ulp off them: where double rounding would go wrong
    ties = np.arange(1, 4000).astype(np.float32).view(np.uint32) << 13
    x = np.concatenate([x, ties.view(np.float32)[:1000], [60000.0, 70000.0, np.inf, -1e-9]])
    x = x.astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(0))])
    expected = np.clip(x, -57344, 57344).astype(ml_dtypes.float8_e5m2)  # one RN, saturating
    got = _e5m2_by_the_software_steps(x)
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))
