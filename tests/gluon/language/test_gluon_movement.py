"""gl.join, gl.split, gl.gather and gl.histogram in the interpreter against numpy, with the
layouts Gluon 3.6 infers (join adds a register bit for the new dim, split drops it, gather
keeps the index's layout, histogram takes the one given), AutoLayout resolution through
them, their PTX, and their error messages."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gl_test_util import L1, L2, L2T, NP, compile_error, offsets_2d, rand

M, N = 16, 32
# L2 with a minor dim of 2 held in registers: what join gives and split takes.
L2_JOINED = gl.BlockedLayout([1, 2, 2], [4, 8, 1], [2, 2, 1], [2, 1, 0])
# The row-major [M, 2N] view of a joined tile (interleaved columns).
L2_WIDE = gl.BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0])


@gluon.jit
def join_split_kernel(a_ptr, b_ptr, il_ptr, lo_ptr, hi_ptr, M: gl.constexpr, N: gl.constexpr,
                      layout: gl.constexpr, joined: gl.constexpr, wide: gl.constexpr):
    offs = offsets_2d(M, N, layout)
    a = gl.load(a_ptr + offs)
    b = gl.load(b_ptr + offs)
    c = gl.join(a, b)
    gl.static_assert(c.type.layout == joined)
    il = gl.reshape(c, [M, 2 * N])
    gl.static_assert(il.type.layout == wide)
    gl.store(il_ptr + offsets_2d(M, 2 * N, wide), il)
    lo, hi = gl.split(gl.join(b, a * 2))
    gl.static_assert(lo.type.layout == layout)
    gl.store(lo_ptr + offs, lo)
    gl.store(hi_ptr + offs, hi)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_join_and_split_with_inferred_layouts(dtype):
    a, b = rand((M, N), dtype, seed=1), rand((M, N), dtype, seed=2)
    il = np.zeros((M, 2 * N), NP[dtype])
    lo, hi = np.zeros((M, N), NP[dtype]), np.zeros((M, N), NP[dtype])
    join_split_kernel[(1,)](a, b, il, lo, hi, M=M, N=N, layout=L2, joined=L2_JOINED,
                            wide=L2_WIDE)
    np.testing.assert_array_equal(il, np.stack([a, b], -1).reshape(M, 2 * N))
    np.testing.assert_array_equal(lo, b)
    np.testing.assert_array_equal(hi, (a * 2).astype(NP[dtype]))


def test_join_and_split_are_register_renames_in_ptx():
    sig = {name: "*fp32:16" for name in ("a_ptr", "b_ptr", "il_ptr", "lo_ptr", "hi_ptr")}
    ptx = gluon.compile(join_split_kernel, sig, {"M": M, "N": N, "layout": L2,
                                                 "joined": L2_JOINED, "wide": L2_WIDE},
                        target="sm_90a").asm["ptx"]
    assert "st.shared" not in ptx and "bar.sync" not in ptx
    assert "st.global.v4.b32" in ptx  # the interleaved row: 4 consecutive floats per thread


@gluon.jit
def auto_join_kernel(x_ptr, out_ptr, N: gl.constexpr, joined: gl.constexpr):
    x = gl.load(x_ptr + gl.arange(0, N))        # AutoLayout: resolved back through the join
    c = gl.set_auto_layout(gl.join(x, x + 1), joined)
    rows = gl.arange(0, N, layout=gl.SliceLayout(1, joined))
    cols = gl.arange(0, 2, layout=gl.SliceLayout(0, joined))
    gl.store(out_ptr + rows[:, None] * 2 + cols[None, :], c)


def test_auto_layouts_resolve_through_join():
    joined = gl.BlockedLayout([2, 2], [32, 1], [4, 1], [1, 0])
    x = rand((256,), "float32", seed=3)
    out = np.zeros((256, 2), np.float32)
    auto_join_kernel[(1,)](x, out, N=256, joined=joined)
    np.testing.assert_array_equal(out, np.stack([x, x + 1], -1))
    kernel = gluon.compile(auto_join_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                           {"N": 256, "joined": joined}, target="sm_90a")
    assert "BlockedLayout(size_per_thread=[2], threads_per_warp=[32], warps_per_cta=[4], " \
           "order=[0])" in kernel.asm["ttgir"]


@gluon.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                  IM: gl.constexpr, src_layout: gl.constexpr, idx_layout: gl.constexpr):
    src = gl.load(src_ptr + offsets_2d(M, N, src_layout))
    idx_offs = offsets_2d(IM, N, idx_layout)
    idx = gl.load(idx_ptr + idx_offs)
    out = gl.gather(src, idx, 0)
    gl.static_assert(out.type.layout == idx_layout)
    gl.store(out_ptr + idx_offs, out)


@pytest.mark.parametrize("src_layout,idx_layout", [(L2, L2), (L2, L2T), (L2T, L2)])
def test_gather_keeps_the_index_layout(src_layout, idx_layout):
    src = rand((M, N), "float32", seed=4)
    idx = np.random.default_rng(5).integers(0, M, (32, N)).astype(np.int32)
    out = np.zeros((32, N), np.float32)
    gather_kernel[(1,)](src, idx, out, M=M, N=N, IM=32, src_layout=src_layout,
                        idx_layout=idx_layout)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 0))


@gluon.jit
def histogram_kernel(x_ptr, out_ptr, N: gl.constexpr, BINS: gl.constexpr,
                     layout: gl.constexpr, bins_layout: gl.constexpr, MASKED: gl.constexpr):
    r = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + r)
    if MASKED:
        h = gl.histogram(x, BINS, mask=r % 2 == 0, layout=bins_layout)
    else:
        h = gl.histogram(x, BINS, layout=bins_layout)
    gl.static_assert(h.type.layout == bins_layout)
    gl.store(out_ptr + gl.arange(0, BINS, layout=bins_layout), h)


@pytest.mark.parametrize("n,bins,masked", [(128, 64, False), (512, 16, True), (64, 256, True)])
def test_histogram_in_the_given_layout(n, bins, masked):
    x = np.random.default_rng(6).integers(-1, bins + 1, n).astype(np.int32)
    out = np.zeros(bins, np.int32)
    histogram_kernel[(1,)](x, out, N=n, BINS=bins, layout=L1,
                           bins_layout=gl.BlockedLayout([2], [32], [4], [0]), MASKED=masked)
    keep = (x >= 0) & (x < bins) & ((np.arange(n) % 2 == 0) if masked else True)
    np.testing.assert_array_equal(out, np.bincount(x[keep], minlength=bins))
    ptx = gluon.compile(histogram_kernel, {"x_ptr": "*i32:16", "out_ptr": "*i32:16"},
                        {"N": n, "BINS": bins, "layout": L1,
                         "bins_layout": gl.BlockedLayout([2], [32], [4], [0]),
                         "MASKED": masked}, target="sm_90a").asm["ptx"]
    assert "atom.shared.add.u32" in ptx or "red.shared.add.u32" in ptx


@gluon.jit
def movement_errors(x_ptr, CASE: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 2], [4, 8], [2, 2], [1, 0])
    x = gl.load(x_ptr + offsets_2d(16, 32, layout))
    if CASE == "split_lanes":
        lanes: gl.constexpr = gl.BlockedLayout([1, 1], [16, 2], [4, 1], [1, 0])
        gl.split(gl.convert_layout(gl.reshape(x, [256, 2]), lanes))
    elif CASE == "join_layouts":
        other: gl.constexpr = gl.BlockedLayout([2, 1], [8, 4], [2, 2], [0, 1])
        gl.join(x, gl.convert_layout(x, other))
    elif CASE == "join_scalars":
        gl.join(1.0, 2.0)
    elif CASE == "histogram_layout":
        gl.histogram(gl.arange(0, 8, layout=gl.BlockedLayout([1], [32], [4], [0])), 8)
    else:
        gl.gather(x, gl.arange(0, 16)[:, None] + gl.zeros([16, 32], gl.int32), 0)


@pytest.mark.parametrize("case,message", [
    ("split_lanes", "gl.split needs both halves of each pair in one thread: the last dimension "
                    "(size 2) of its input must be held in registers"),
    ("join_layouts", "inputs of gl.join have different layouts"),
    ("join_scalars", "gl.join cannot join scalars in Gluon"),
    ("histogram_layout", "gl.histogram requires a destination layout (`layout=`) for its bins"),
    ("gather_auto", "gl.gather's index has no layout yet (AutoLayout); give it one with "
                    "gl.set_auto_layout"),
])
def test_movement_errors(case, message):
    assert message in compile_error(movement_errors, np.zeros(512, np.float32), CASE=case)


@gluon.jit
def _clipped_square(x, limit):
    if x > limit:
        y = limit * limit
    else:
        y = x * x
    return y


@gluon.jit
def map_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    offs = offsets_2d(M, N, layout)
    y = gl.map_elementwise(_clipped_square, gl.load(x_ptr + offs), 1.0)
    gl.static_assert(y.type.layout == layout)
    gl.store(out_ptr + offs, y)


def test_map_elementwise_keeps_the_layout():
    x = rand((M, N), "float32", seed=7)
    out = np.zeros((M, N), np.float32)
    map_kernel[(1,)](x, out, M=M, N=N, layout=L2)
    np.testing.assert_allclose(out, np.where(x > 1.0, 1.0, x * x), rtol=1e-6)
    ptx = gluon.compile(map_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                        {"M": M, "N": N, "layout": L2}, target="sm_90a").asm["ptx"]
    assert "st.global.v2.b32" in ptx and "st.shared" not in ptx  # branches become selects


# Each warp holds whole rows: a gather along the rows never leaves the warp.
ROWS = gl.BlockedLayout([1, 2], [1, 32], [4, 1], [1, 0])


@gluon.jit
def row_gather_kernel(src_ptr, idx_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                      K: gl.constexpr, layout: gl.constexpr):
    src = gl.load(src_ptr + offsets_2d(M, N, layout))
    offs = offsets_2d(M, K, layout)
    gl.store(out_ptr + offs, gl.gather(src, gl.load(idx_ptr + offs), 1))


@pytest.mark.parametrize("n,k", [(64, 64), (64, 128), (128, 64)])
def test_warp_local_gather_shuffles_in_ptx(n, k):
    src = rand((4, n), "float32", seed=8)
    idx = np.random.default_rng(9).integers(0, n, (4, k)).astype(np.int32)
    out = np.zeros((4, k), np.float32)
    row_gather_kernel[(1,)](src, idx, out, M=4, N=n, K=k, layout=ROWS)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, 1))
    ptx = gluon.compile(row_gather_kernel, {"src_ptr": "*fp32:16", "idx_ptr": "*i32:16",
                                            "out_ptr": "*fp32:16"},
                        {"M": 4, "N": n, "K": k, "layout": ROWS}, target="sm_90a").asm["ptx"]
    assert "shfl.sync.idx.b32" in ptx and "bar.sync" not in ptx and "st.shared" not in ptx
