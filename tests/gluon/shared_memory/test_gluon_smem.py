"""`gl.allocate_shared_memory` and descriptor methods end to end: @gluon.jit kernels run in
the interpreter (no GPU here) and compiled to PTX for sm_90a."""

import os
import sys

import numpy as np
import pytest

import gluon
from gluon import language as gl
from shared_codegen.frontend.errors import CompilationError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from gl_test_util import offsets_2d  # noqa: E402

SRC = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
DST = gl.BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1])
NVMMA = gl.NVMMASharedLayout(128, 16)
SIG = {"x_ptr": "*fp16:16", "out_ptr": "*fp16:16"}
X = (np.arange(64 * 64) % 101).astype(np.float16).reshape(64, 64)


@gluon.jit
def round_trip(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr,
               dst: gl.constexpr, shared: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, src))
    smem = gl.allocate_shared_memory(gl.float16, [M, N], shared)
    smem.store(x)
    gl.store(out_ptr + offsets_2d(M, N, dst), smem.load(dst))


@pytest.mark.parametrize("shared", [NVMMA, gl.NVMMASharedLayout(32, 16),
                                    gl.SwizzledSharedLayout(8, 2, 4, [1, 0])], ids=repr)
def test_round_trip_kernel_runs_and_compiles(shared):
    out = np.zeros_like(X)
    round_trip[(1,)](X, out, M=64, N=64, src=SRC, dst=DST, shared=shared)
    np.testing.assert_array_equal(out, X)
    kernel = gluon.compile(round_trip, SIG, {"M": 64, "N": 64, "src": SRC, "dst": DST,
                                             "shared": shared})
    ptx = kernel.asm["ptx"]
    assert kernel.metadata["shared_bytes"] == 64 * 64 * 2
    assert "st.shared.v4.b32" in ptx
    assert "bar.sync" in ptx[ptx.index("st.shared"):ptx.index("ld.shared")]


@gluon.jit
def ping_pong(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr,
              shared: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, layout))
    bufs = gl.allocate_shared_memory(gl.float16, [2, M, N], shared)
    bufs.index(0).store(x)
    for i in range(3):
        v = bufs.index(i % 2).load(layout)
        bufs.index((i + 1) % 2).store(v + v)
    gl.store(out_ptr + offsets_2d(M, N, layout), bufs.index(1).load(layout))


def test_runtime_index_into_double_buffer():
    out = np.zeros_like(X)
    ping_pong[(1,)](X, out, M=64, N=64, layout=SRC, shared=NVMMA)
    np.testing.assert_array_equal(out, 8 * X)
    kernel = gluon.compile(ping_pong, SIG, {"M": 64, "N": 64, "layout": SRC, "shared": NVMMA})
    assert kernel.metadata["shared_bytes"] == 2 * 64 * 64 * 2


@gluon.jit
def views(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr,
          dst: gl.constexpr, shared: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, src))
    smem = gl.allocate_shared_memory(gl.float16, [M, N], shared, value=x)
    t = smem.slice(N // 2, N // 2, dim=1).permute([1, 0])
    gl.static_assert(t.shape[0] == N // 2)
    gl.store(out_ptr + offsets_2d(N // 2, M, dst), t.load(dst))


def test_slice_and_permute_views():
    out = np.zeros((32, 64), np.float16)
    views[(1,)](X, out, M=64, N=64, src=SRC, dst=DST, shared=NVMMA)
    np.testing.assert_array_equal(out, X[:, 32:].T)
    gluon.compile(views, SIG, {"M": 64, "N": 64, "src": SRC, "dst": DST, "shared": NVMMA})


@gluon.jit
def reinterpret(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr,
                flat: gl.constexpr, shared: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, src))
    smem = gl.allocate_shared_memory(gl.float16, [M, N], shared)
    smem.store(x)
    raw = smem._reinterpret(gl.float16, [M * N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    gl.store(out_ptr + gl.arange(0, M * N, flat), raw.load(flat))


def test_reinterpret_exposes_the_swizzled_bytes():
    out = np.zeros(64 * 64, np.float16)
    flat = gl.BlockedLayout([8], [32], [4], [0])
    reinterpret[(1,)](X, out, M=64, N=64, src=SRC, flat=flat, shared=NVMMA)
    rows = np.arange(64)[:, None]
    chunks = (np.arange(64)[None, :] // 8) ^ (rows % 8)
    want = np.empty(64 * 64, np.float16)
    want[(rows * 64 + chunks * 8 + np.arange(64)[None, :] % 8).reshape(-1)] = X.reshape(-1)
    np.testing.assert_array_equal(out, want)


@gluon.jit
def uninitialized(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, dst: gl.constexpr,
                  shared: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float16, [M, N], shared)
    y = smem.load(dst)
    gl.store(out_ptr + offsets_2d(M, N, dst), y)


def test_uninitialized_read_names_the_line():
    out = np.zeros_like(X)
    with pytest.raises(Exception, match=r"test_gluon_smem.py:\d+: local_load reads "
                                        r"uninitialized shared memory") as info:
        uninitialized[(1,)](X, out, M=64, N=64, dst=DST, shared=NVMMA)
    assert "y = smem.load(dst)" in str(info.value)


@gluon.jit
def wrong_shape(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr,
                shared: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(M, N, src))
    smem = gl.allocate_shared_memory(gl.float16, [M // 2, N], shared)
    smem.store(x)


def test_store_of_the_wrong_shape_is_a_compile_error():
    with pytest.raises(CompilationError, match=r"source shape \[64, 64\] and destination "
                                               r"shape \[32, 64\] must match"):
        wrong_shape[(1,)](X, X.copy(), M=64, N=64, src=SRC, shared=NVMMA)


@gluon.jit
def bad_layout(out_ptr, shared: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float16, [64, 32], shared)


def test_a_layout_that_does_not_fit_is_a_compile_error_at_the_line():
    with pytest.raises(CompilationError, match=r"less than one 128-byte swizzle row") as info:
        bad_layout[(1,)](X, shared=NVMMA)
    assert "smem = gl.allocate_shared_memory" in str(info.value)
