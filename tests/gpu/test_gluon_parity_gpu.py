"""Gluon parity additions on the GPU: cp.async completion through an mbarrier, gl.extra
libdevice, fp4_to_fp, inline_asm_elementwise, several warp_specialize calls per kernel."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "ampere"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "language"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "warp_spec"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("noinc,count", [(False, 1), (True, 128)])
def test_cp_async_mbarrier_arrive_on_the_gpu(torch, noinc, count):
    # The upstream test's kernel (test_async_copy_mbarrier), and its .noinc variant.
    from test_cp_async_mbarrier import copy_through_mbarrier_kernel

    inp = torch.randn((20, 32), device="cuda")
    out = torch.full((32, 32), 7.0, device="cuda")
    copy_through_mbarrier_kernel[(1,)](inp, out, 20, XBLOCK=32, YBLOCK=32, NOINC=noinc,
                                       BAR_COUNT=count, WAIT=True, num_warps=4)
    torch.testing.assert_close(out[:20], inp, rtol=0, atol=0)
    torch.testing.assert_close(out[20:], torch.zeros((12, 32), device="cuda"), rtol=0, atol=0)


def test_gl_extra_libdevice_on_the_gpu(torch):
    from test_gluon_extra import _inputs, libdevice_kernel

    x, y = _inputs()
    expected = np.zeros_like(x)
    libdevice_kernel[(1,)](x, y, expected, N=256)  # the interpreter, checked against numpy
    out = torch.zeros(256, device="cuda")
    libdevice_kernel[(1,)](torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), out, N=256)
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [0, 1, 2, 3])
def test_fp4_to_fp_on_the_gpu(torch, case):
    from test_gluon_fp4 import CASES, fp4_kernel, unpack_reference

    axis, dtype, np_dtype, layout = CASES[case]
    packed = (np.arange(32 * 32, dtype=np.int64).reshape(32, 32) * 37 % 256).astype(np.uint8)
    torch_dtype = {np.float32: torch.float32, np.float16: torch.float16}.get(np_dtype,
                                                                              torch.bfloat16)
    out = torch.zeros((64, 32) if axis == 0 else (32, 64), dtype=torch_dtype, device="cuda")
    fp4_kernel[(1,)](torch.from_numpy(packed).cuda(), out, 32, 32, axis, dtype, layout)
    np.testing.assert_array_equal(out.float().cpu().numpy(), unpack_reference(packed, axis))


def test_inline_asm_elementwise_on_the_gpu(torch):
    from test_gluon_inline_asm import e5m2_input, e5m2_kernel, max_inputs, max_kernel

    a, b = max_inputs()
    c = torch.zeros(512, dtype=torch.int32, device="cuda")
    d = torch.zeros(512, device="cuda")
    max_kernel[(1,)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c, d, 512)
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(d.cpu().numpy(), np.maximum(a.astype(np.float32), b))
    x = e5m2_input()
    expected = np.zeros(512, np.float16)
    e5m2_kernel[(1,)](x, expected, 512)  # the interpreter's PTX subset
    y = torch.zeros(512, dtype=torch.float16, device="cuda")
    e5m2_kernel[(1,)](torch.from_numpy(x).cuda(), y, 512)
    np.testing.assert_array_equal(y.cpu().numpy(), expected)


@pytest.mark.parametrize("name, size", [("two_regions_kernel", 320),
                                        ("uneven_regions_kernel", 448)])
def test_several_warp_specialize_calls_on_the_gpu(torch, name, size):
    import test_warp_spec_forms

    kernel = getattr(test_warp_spec_forms, name)
    expected = np.zeros(size, np.int32)
    kernel[(1,)](expected)  # the interpreter (its test checks these values)
    out = torch.zeros(size, dtype=torch.int32, device="cuda")
    kernel[(1,)](out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("case", ["upstream_example", "identity"])
def test_padded_shared_layout_places_elements_as_the_interpreter(torch, case):
    # The raw buffer after storing through the padded layout (padding reads 0), and the
    # tensor read back through it: compiled lowering against the interpreter.
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "layouts"))
    from test_padded_shared_layout import placement_kernel

    from gluon import language as gl
    if case == "upstream_example":
        layout = gl.PaddedSharedLayout([[8, 1]], [[0, 1], [0, 2], [2, 0], [4, 0], [1, 0]], [],
                                       [8, 4])
        rows, cols, footprint = 8, 4, 64
    else:
        layout = gl.PaddedSharedLayout.with_identity_for([[32, 4], [128, 8]], [16, 32], [1, 0])
        rows, cols, footprint = 16, 32, 1024
    expected = np.full(footprint + rows * cols, -7, np.int32)
    placement_kernel[(1,)](expected, ROWS=rows, COLS=cols, layout=layout, FOOTPRINT=footprint)
    out = torch.full((footprint + rows * cols,), -7, dtype=torch.int32, device="cuda")
    placement_kernel[(1,)](out, ROWS=rows, COLS=cols, layout=layout, FOOTPRINT=footprint)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


def test_cp_async_into_a_padded_ring_on_the_gpu(torch):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "layouts"))
    from test_padded_shared_layout import cp_async_kernel

    from gluon import language as gl
    layout = gl.PaddedSharedLayout.with_identity_for([[16, 4], [64, 8]], [32, 16], [1, 0])
    x = torch.randn(32, 16, device="cuda")
    out = torch.zeros_like(x)
    cp_async_kernel[(1,)](x, out, layout)
    torch.testing.assert_close(out, x, rtol=0, atol=0)
