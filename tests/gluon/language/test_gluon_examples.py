"""The Gluon examples' main() at small size in the CPU interpreter, against their
references."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples",
                                "gluon"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_copy_example_main(dtype):
    import copy_kernel

    assert copy_kernel.main(n=3000, dtype=dtype, gpu=False)


@pytest.mark.parametrize("m,n,dtype", [(200, 136, np.float32), (64, 64, np.float16),
                                       (3, 130, np.float32)])
def test_transpose_example_main(m, n, dtype):
    import transpose_kernel

    assert transpose_kernel.main(m=m, n=n, dtype=dtype, gpu=False)


def test_transpose_matches_reference_with_bfloat16_and_other_tiles():
    import ml_dtypes
    import transpose_kernel

    x = np.random.default_rng(1).standard_normal((100, 70)).astype(ml_dtypes.bfloat16)
    out = transpose_kernel.transpose(x, block_m=32, block_n=64, num_warps=2)
    np.testing.assert_array_equal(out, transpose_kernel.reference(x))
