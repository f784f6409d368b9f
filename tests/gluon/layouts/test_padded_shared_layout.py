"""`gl.PaddedSharedLayout` (Triton 3.6): elements at a linear offset order with `padding`
unused elements after every `interval`. Checked: the class and its errors, the placement
(the bytes seen through a flat `_reinterpret`, against upstream's documented examples), load
/ store and cp.async round trips in the interpreter, and the PTX (padding arithmetic, no
ldmatrix, vectors inside an interval)."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.ampere import async_copy as cp

FLAT = gl.SwizzledSharedLayout(1, 1, 1, [0])


def test_with_identity_for_lists_the_order_bits_fastest_first():
    layout = gl.PaddedSharedLayout.with_identity_for([[32, 4]], [16, 64], [1, 0])
    assert layout.offset_bases == ((0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (0, 32),
                                   (1, 0), (2, 0), (4, 0), (8, 0))
    assert layout == gl.PaddedSharedLayout([[32, 4]], layout.offset_bases, [], [16, 64])
    assert hash(layout) == hash(gl.PaddedSharedLayout([(32, 4)], layout.offset_bases, [],
                                                      (16, 64)))


@pytest.mark.parametrize("pairs, bases, message", [
    ([], [[1]], "must have at least one interval-padding pair"),
    ([[32, 4], [32, 8]], [[1]], r"intervals must be distinct, got \[32, 32\]"),
    ([[24, 4]], [[1]], "interval values must all be power of two"),
    ([[32, 3]], [[1]], "padding values must all be power of two"),
    ([[2, 1]], [[1, 1]], r"each offset basis must be one coordinate bit .* got \[1, 1\]"),
])
def test_bad_layouts_say_what_is_wrong(pairs, bases, message):
    with pytest.raises(ValueError, match=message):
        gl.PaddedSharedLayout(pairs, bases, [], [2] * len(bases[0]))


@gluon.jit
def placement_kernel(out_ptr, ROWS: gl.constexpr, COLS: gl.constexpr, layout: gl.constexpr,
                     FOOTPRINT: gl.constexpr):
    """Store 1 + element index through `layout`, then read the raw buffer back (0 where
    nothing was stored: the padding)."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])
    rows = gl.arange(0, ROWS, gl.SliceLayout(1, blocked))[:, None]
    cols = gl.arange(0, COLS, gl.SliceLayout(0, blocked))[None, :]
    smem = gl.allocate_shared_memory(gl.int32, [FOOTPRINT], FLAT,
                                     gl.zeros([FOOTPRINT], gl.int32,
                                              gl.BlockedLayout([1], [32], [4], [0])))
    tile = smem._reinterpret(gl.int32, [ROWS, COLS], layout)
    tile.store(rows * COLS + cols + 1)
    flat = gl.arange(0, FOOTPRINT, gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(out_ptr + flat, smem.load(gl.BlockedLayout([1], [32], [4], [0])))
    back = tile.load(blocked)
    gl.store(out_ptr + FOOTPRINT + rows * COLS + cols, back)


def _placement(layout, rows, cols, footprint):
    out = np.full(footprint + rows * cols, -7, np.int32)
    placement_kernel[(1,)](out, ROWS=rows, COLS=cols, layout=layout, FOOTPRINT=footprint)
    return out[:footprint], out[footprint:].reshape(rows, cols)


def test_upstream_example_rows_interleaved_with_padding_every_8():
    # Triton's docstring: shape [8, 4], pairs [[8, 1]], bases stepping rows by 2 first.
    layout = gl.PaddedSharedLayout([[8, 1]], [[0, 1], [0, 2], [2, 0], [4, 0], [1, 0]], [],
                                   [8, 4])
    raw, back = _placement(layout, 8, 4, 64)
    x = lambda r: list(range(4 * r + 1, 4 * r + 5))  # noqa: E731 (row r's values)
    expected = x(0) + x(2) + [0] + x(4) + x(6) + [0] + x(1) + x(3) + [0] + x(5) + x(7)
    assert raw[:len(expected)].tolist() == expected
    np.testing.assert_array_equal(back, np.arange(1, 33).reshape(8, 4))


def test_identity_layout_pads_after_each_row():
    layout = gl.PaddedSharedLayout.with_identity_for([[32, 4]], [16, 32], [1, 0])
    raw, back = _placement(layout, 16, 32, 1024)
    assert raw[:36].tolist() == list(range(1, 33)) + [0, 0, 0, 0]
    assert raw[36:40].tolist() == [33, 34, 35, 36]
    np.testing.assert_array_equal(back, np.arange(1, 513).reshape(16, 32))


@gluon.jit
def cp_async_kernel(in_ptr, out_ptr, layout: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    rows = gl.arange(0, 32, gl.SliceLayout(1, blocked))[:, None]
    cols = gl.arange(0, 16, gl.SliceLayout(0, blocked))[None, :]
    ring = gl.allocate_shared_memory(gl.float32, [2, 32, 16], layout)
    cp.async_copy_global_to_shared(ring.index(1), in_ptr + rows * 16 + cols)
    cp.commit_group()
    cp.wait_group(0)
    gl.store(out_ptr + rows * 16 + cols, ring.index(1).load(blocked))


def test_cp_async_into_a_padded_ring_slot():
    layout = gl.PaddedSharedLayout.with_identity_for([[16, 4], [64, 8]], [32, 16], [1, 0])
    x = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    out = np.zeros_like(x)
    cp_async_kernel[(1,)](x, out, layout)
    np.testing.assert_array_equal(out, x)


def test_the_ptx_pads_the_linear_offset_and_keeps_vectors_inside_an_interval():
    layout = gl.PaddedSharedLayout.with_identity_for([[16, 4], [64, 8]], [32, 16], [1, 0])
    ptx = gluon.compile(cp_async_kernel, {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                        {"layout": layout}, target="sm_90a").asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx  # 4 x fp32 = 16 bytes, inside a 16 interval
    assert "ldmatrix" not in ptx and "shr.u32" in ptx and "shl.b32" in ptx
    # The allocation is the ring's padded footprint: per tile, the last element's stored
    # offset plus one (511 + 511 / 16 * 4 + 511 / 64 * 8 + 1 elements), x 2 slots x 4 bytes.
    per_tile = 511 + (511 >> 4 << 2) + (511 >> 6 << 3) + 1
    assert gluon.compile(cp_async_kernel, {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                         {"layout": layout}).metadata["shared_bytes"] == 2 * per_tile * 4
