"""Never-written shared and tensor memory holds a poison pattern: NaN for floats, -1 for
ints, so a read that escapes the `written` checks cannot pass for zeros."""

import ml_dtypes
import numpy as np

from shared_codegen.ops.shared_memory.interpreter import SharedBuffer
from shared_codegen.ops.tensor_memory.interpreter import TmemState


def test_fresh_shared_memory_reads_as_nan_and_minus_one():
    data = SharedBuffer(16, "k.py:1").data
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16, np.float64):
        assert np.isnan(data.view(dtype).astype(np.float32)).all(), dtype
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        assert (data.view(dtype) == -1).all(), dtype


def test_fresh_tensor_memory_reads_as_nan_and_is_marked_unwritten():
    state = TmemState()
    assert np.isnan(state.data[:, :8].view(np.float32)).all()
    assert not state.written.any()
