"""The tile -> Gluon converter: converted examples run and match the originals."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

import gluon  # noqa: E402
from tile.convert import main as convert_main  # noqa: E402
from tile.convert import to_gluon  # noqa: E402


def test_vector_add_converts_to_matching_gluon(load_source):
    import vector_add

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(3000).astype(np.float32), rng.standard_normal(3000).astype(
        np.float32)
    text = to_gluon(vector_add.add_kernel, x, y, x, 3000, BLOCK_SIZE=1024)
    assert "BLOCKED0 = gl.constexpr(gl.BlockedLayout(size_per_thread=[4], " \
           "threads_per_warp=[32], warps_per_cta=[4], order=[0]))" in text
    assert "    offsets = v0 + v1\n    mask = offsets < n_elements\n" in text
    converted = load_source("converted_add", text)
    out = np.zeros_like(x)
    converted.add_kernel[(3,)](x, y, out, 3000)
    np.testing.assert_array_equal(out, x + y)
    compiled = gluon.compile(converted.add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                                    "out_ptr": "*fp32:16", "n_elements": "i32:16"})
    assert "ld.global.v4.b32" in compiled.asm["ptx"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_softmax_converts_to_matching_gluon(load_source, dtype):
    import softmax

    x = np.random.default_rng(1).standard_normal((6, 300)).astype(dtype)
    text = to_gluon(softmax.softmax_kernel, x, x, 300, 300, 300, BLOCK_SIZE=512, num_warps=4)
    assert "gl.reduce(" in text and "_reduce_combine_0" in text
    converted = load_source(f"converted_softmax_{np.dtype(dtype).name}", text)
    ours, original = np.zeros_like(x), np.zeros_like(x)
    softmax.softmax_kernel[(6,)](original, x, 300, 300, 300, BLOCK_SIZE=512)
    converted.softmax_kernel[(6,)](ours, x, 300, 300, 300)
    np.testing.assert_array_equal(ours, original)


def test_layer_norm_converts_to_matching_gluon(load_source):
    import layer_norm

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 300)).astype(np.float16)
    w, b = rng.standard_normal(300).astype(np.float16), rng.standard_normal(300).astype(
        np.float16)
    args = lambda y, m, r: (x, y, w, b, m, r, 300, 300, 1e-5)  # noqa: E731
    bufs = [(np.zeros_like(x), np.zeros(4, np.float32), np.zeros(4, np.float32))
            for _ in range(2)]
    text = to_gluon(layer_norm.layer_norm_fwd_kernel, *args(*bufs[0]), BLOCK_SIZE=128)
    assert text.count("for off") == 3
    converted = load_source("converted_layer_norm", text)
    layer_norm.layer_norm_fwd_kernel[(4,)](*args(*bufs[0]), BLOCK_SIZE=128)
    converted.layer_norm_fwd_kernel[(4,)](*args(*bufs[1]))
    for a, b_ in zip(*bufs):
        np.testing.assert_array_equal(a, b_)


def test_cli_prints_gluon_source(tmp_path, capsys):
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "vector_add.py")
    out_file = tmp_path / "out.py"
    assert convert_main([f"{path}:add_kernel", "--signature",
                         "x_ptr=*fp32:16,y_ptr=*fp32:16,out_ptr=*fp32:16,n_elements=i32",
                         "--constexpr", "BLOCK_SIZE=256", "--num-warps", "2",
                         "-o", str(out_file)]) == 0
    text = out_file.read_text()
    assert "Launch with num_warps=2" in text and "@gluon.jit\ndef add_kernel(" in text
    assert "gl.arange(0, 256, layout=BLOCKED0)" in text


def test_launch_overhead_benchmark_kernel_converts_to_matching_gluon(load_source):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import launch_overhead

    import tile
    import tile.language

    launch_overhead.tl = tile.language
    kernel = tile.jit(launch_overhead.k)
    x = np.arange(128, dtype=np.float32)
    y = np.ones(128, np.float32)
    a, b = np.zeros_like(x), np.zeros_like(x)
    kernel[(1,)](x, y, a, 100)
    converted = load_source("converted_k", to_gluon(kernel, x, y, a, 100))
    converted.k[(1,)](x, y, b, 100)
    np.testing.assert_array_equal(a, b)
    assert a[99] == 100.0 and a[100] == 0.0


def test_shape_and_data_movement_ops_convert_to_matching_gluon(load_source):
    text = '''
import tile
import tile.language as tl


@tile.jit
def _selu(x, alpha):
    if x > 0:
        y = x
    else:
        y = alpha * (tl.exp(x) - 1)
    return y


@tile.jit
def movement_kernel(x_ptr, idx_ptr, out_ptr, hist_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    lo, hi = tl.split(tl.reshape(x, (N // 2, 2)))
    pairs = tl.interleave(hi, lo)                       # swaps neighbours
    picked = tl.gather(tl.sort(pairs), tl.load(idx_ptr + r), 0)
    y = tl.map_elementwise(_selu, tl.flip(picked), 1.5)
    tl.store(out_ptr + r, y)
    tl.store(hist_ptr + tl.arange(0, 16), tl.histogram(tl.load(idx_ptr + r) % 16, 16))
'''
    original = load_source("movement_original", text)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(128).astype(np.float32)
    idx = rng.integers(0, 128, 128).astype(np.int32)
    source = to_gluon(original.movement_kernel, x, idx, x, idx[:16], N=128)
    for call in ("gl.split(", "gl.join(", "gl.gather(", "gl.map_elementwise(_map_combine_",
                 "gl.histogram("):
        assert call in source
    converted = load_source("movement_converted", source)
    outs = [(np.zeros(128, np.float32), np.zeros(16, np.int32)) for _ in range(2)]
    original.movement_kernel[(1,)](x, idx, *outs[0], N=128)
    converted.movement_kernel[(1,)](x, idx, *outs[1])
    for ours, theirs in zip(*outs):
        np.testing.assert_array_equal(ours, theirs)
    swapped = x.reshape(-1, 2)[:, ::-1].reshape(-1)
    expected = np.sort(swapped)[idx][::-1]
    np.testing.assert_allclose(outs[0][0], np.where(expected > 0, expected,
                                                    1.5 * (np.exp(expected) - 1)), rtol=1e-6)
    gluon.compile(converted.movement_kernel, {"x_ptr": "*fp32:16", "idx_ptr": "*i32:16",
                                              "out_ptr": "*fp32:16", "hist_ptr": "*i32:16"})


CONVERT_LIBDEVICE_SOURCE = '''
import tile
import tile.language as tl
from tile.language.extra import libdevice


@tile.jit
def libdevice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = libdevice.pow(libdevice.tanh(x), 2) + tl.where(libdevice.isnan(x), 1.0, 0.0)
    tl.store(out_ptr + offs, y, mask=offs < n)
'''


def test_libdevice_calls_and_assume_convert_to_gluon(load_source, monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")
    source = load_source("libdevice_source", CONVERT_LIBDEVICE_SOURCE)
    x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    x[7] = np.nan
    text = to_gluon(source.libdevice_kernel, x, x, 300, BLOCK=128)
    assert "from tile.language.extra import libdevice" in text
    assert " = libdevice.tanh(x)\n" in text and " = libdevice.pow(" in text
    assert "    gl.assume(" in text
    assert "libdevice.isnan(x).to(gl.int32)" in text
    converted = load_source("converted_libdevice", text)
    out = np.zeros_like(x)
    converted.libdevice_kernel[(3,)](x, out, 300)
    expected = np.where(np.isnan(x), 1.0, np.tanh(x) ** 2)
    np.testing.assert_allclose(out[~np.isnan(x)], expected[~np.isnan(x)], rtol=2e-6)
