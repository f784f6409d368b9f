"""Differential fuzzing in CI: Hypothesis-generated tile programs (benchmarks/tile_fuzz) run in
the CPU interpreter against the numpy reference, a few compiled for sm_90a; plus regression
tests for what the fuzzer found and checks that the reference itself can fail.

Derandomized with the example database off, so every run tries the same programs.
"""

import os
import sys
from fractions import Fraction

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


@fuzz_settings(60)
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
