"""The interpreter's memory model: atomics combine like the hardware's."""

import numpy as np
import pytest

from shared_codegen.interpreter.memory import _combine


@pytest.mark.parametrize("kind,expected", [("umax", -1), ("umin", 5), ("max", 5), ("min", -1)])
def test_unsigned_atomics_on_signed_storage_compare_bits_as_unsigned(kind, expected):
    # -1 is 0xFFFFFFFF: the largest value as unsigned, the smallest as signed.
    assert _combine(kind, np.int32(-1), np.int32(5), np.dtype(np.int32)) == expected
