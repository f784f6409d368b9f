"""Every example's main() at small size, in the CPU interpreter, against its reference."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def test_vector_add_main():
    import vector_add

    assert vector_add.main(n=5000, gpu=False) == 0.0


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_softmax_main(dtype):
    import softmax

    assert softmax.main(n_rows=8, n_cols=300, dtype=dtype, gpu=False) < 2e-3


def test_softmax_matches_reference_with_bfloat16_input():
    import ml_dtypes
    import softmax

    x = np.random.default_rng(1).standard_normal((4, 100)).astype(ml_dtypes.bfloat16)
    out = softmax.softmax(x).astype(np.float64)
    assert np.max(np.abs(out - softmax.reference(x.astype(np.float32)))) < 1e-2


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_layer_norm_main(dtype):
    import layer_norm

    assert layer_norm.main(n_rows=4, n_cols=300, dtype=dtype, block_size=128, gpu=False) < 2e-2
