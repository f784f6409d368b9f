"""Non-contiguous CPU torch tensors in the interpreter: a kernel receives `data_ptr()` and
indexes the tensor's storage itself, as on the GPU, so the interpreter maps the storage."""

import numpy as np
import pytest

import gluon
from gluon import language as gl

torch = pytest.importorskip("torch")


@gluon.jit
def strided_copy_kernel(x_ptr, out_ptr, stride, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, N, layout)
    gl.store(out_ptr + offs, gl.load(x_ptr + offs * stride))


def test_a_transposed_view_is_read_through_its_strides():
    base = torch.arange(4 * 128, dtype=torch.float32).reshape(4, 128)
    col = base[:, 2]  # stride 128, storage offset 2
    out = torch.zeros(128, dtype=torch.float32)
    strided_copy_kernel[(1,)](base.t(), out, 1, 128)  # storage order, as data_ptr() gives
    np.testing.assert_array_equal(out.numpy(), base.reshape(-1)[:128].numpy())
    strided_copy_kernel[(1,)](col, out, col.stride(0), 4)  # only 4 elements along it
    np.testing.assert_array_equal(out.numpy()[:4], col.numpy())


def test_a_write_through_a_view_lands_in_the_base_tensor():
    base = torch.zeros(256, dtype=torch.int32)
    view = base[1::2]
    strided_copy_kernel[(1,)](torch.arange(128, dtype=torch.int32), view, 1, 128)
    # The kernel ignores the view's stride (as on the GPU): it writes 128 consecutive words.
    np.testing.assert_array_equal(base[1:129].numpy(), np.arange(128))


def test_an_access_past_the_storage_is_still_caught():
    view = torch.arange(256, dtype=torch.float32)[::2]
    out = torch.zeros(128, dtype=torch.float32)
    strided_copy_kernel[(1,)](view, out, 2, 128)  # 2 * 127 past offset 0 is in bounds
    np.testing.assert_array_equal(out.numpy(), view.numpy())
    with pytest.raises(Exception, match="out-of-bounds"):
        strided_copy_kernel[(1,)](view[1:], out, 4, 128)  # 2 + 4 * 127 is not
