"""Specialization keys: the per-argument (type, hint) pairs that pick a compiled variant."""

import time

import numpy as np
import pytest

from shared_codegen.runtime import specialize
from shared_codegen.runtime.specialize import Specializer


def specialization_key(args, constexpr_positions=(), do_not_specialize=()):
    return Specializer(constexpr_positions, do_not_specialize).key(args)


class CudaArray:
    """Stands in for any object exposing __cuda_array_interface__ (cupy, numba, ours)."""

    def __init__(self, address, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (address, False), "typestr": typestr,
                                         "shape": (4,), "version": 3}


@pytest.mark.parametrize("value, expected", [
    (1, ("i32", "1")), (32, ("i32", "D")), (7, ("i32", "")), (0, ("i32", "D")),
    (-(2 ** 31), ("i32", "D")), (2 ** 31, ("i64", "D")), (2 ** 31 + 1, ("i64", "")),
    (2 ** 63, ("u64", "D")), (2 ** 64 - 1, ("u64", "")),
])
def test_ints_get_the_narrowest_type_and_a_hint(value, expected):
    assert specialization_key((value,)) == (expected,)


def test_ints_beyond_64_bits_are_refused():
    with pytest.raises(specialize.SpecializationError, match="64 bits"):
        specialization_key((2 ** 64,))


def test_scalars_bools_and_none():
    assert specialization_key((True, 2.5, None)) == (("i1", ""), ("fp32", ""),
                                                     ("constexpr", None))


def test_numpy_scalars_behave_like_python_ones():
    assert specialization_key((np.int64(16), np.float32(1.0))) == (("i32", "D"), ("fp32", ""))


def test_arrays_give_pointer_type_and_alignment():
    assert specialization_key((CudaArray(0x1000), CudaArray(0x1004, "<f2"))) == (
        ("*fp32", "D"), ("*fp16", ""))


def test_constexprs_carry_their_value_and_do_not_specialize_drops_hints():
    key = specialization_key((CudaArray(0x1000), 64, 128, [1, 2]),
                             constexpr_positions=(2, 3), do_not_specialize=(0, 1))
    assert key == (("*fp32", ""), ("i32", ""), ("constexpr", 128), ("constexpr", (1, 2)))
    hash(key)


def test_keys_differ_exactly_when_the_compiled_code_may():
    assert specialization_key((16,)) == specialization_key((32,))
    assert specialization_key((16,)) != specialization_key((17,))
    assert specialization_key((1,)) != specialization_key((17,))


def test_parameter_kinds_drop_constexprs():
    key = specialization_key((CudaArray(0x1000), 1, 2.0, None, 8), constexpr_positions=(4,))
    assert specialize.parameter_kinds(key) == ("ptr", "i32", "fp32")


def test_unsupported_arguments_are_described():
    with pytest.raises(specialize.SpecializationError, match="cannot pass str 'hello'"):
        specialization_key(("hello",))
    assert "0x1000" in specialize.describe_arg(CudaArray(0x1000))
    assert specialize.describe_arg(7) == "int 7 (i32)"


def test_torch_tensors_when_torch_is_installed():
    torch = pytest.importorskip("torch")
    tensor = torch.zeros(8, dtype=torch.float16)
    assert specialization_key((tensor, tensor[1:])) == (("*fp16", "D"), ("*fp16", ""))


def test_a_key_costs_about_a_microsecond_per_argument():
    args = (CudaArray(0x1000), CudaArray(0x2000), CudaArray(0x3000), 1024)
    key = Specializer().key  # a kernel keeps one (JITFunction.specializer)
    key(args)
    rounds = 20000
    start = time.perf_counter()
    for _ in range(rounds):
        key(args)
    per_argument = (time.perf_counter() - start) / rounds / len(args)
    print(f"specialization: {per_argument * 1e6:.2f} us per argument")
    assert per_argument < 3e-6  # loose: shared CI machines are noisy
