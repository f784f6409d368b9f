"""Shared-memory descriptors carried through runtime loops and branches keep their methods."""

import numpy as np

import gluon
from gluon import language as gl

BLOCKED = gl.constexpr(gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]))
SHARED = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))


@gluon.jit
def ping_pong(src, dst, n):
    offs_m = gl.arange(0, 32, layout=gl.SliceLayout(1, BLOCKED))
    offs_n = gl.arange(0, 32, layout=gl.SliceLayout(0, BLOCKED))
    offs = gl.expand_dims(offs_m, 1) * 32 + gl.expand_dims(offs_n, 0)
    a = gl.allocate_shared_memory(gl.float32, [32, 32], SHARED)
    b = gl.allocate_shared_memory(gl.float32, [32, 32], SHARED)
    a.store(gl.load(src + offs))
    cur = a
    nxt = b
    for i in range(n):
        nxt.store(cur.load(BLOCKED) + 1.0)
        cur, nxt = nxt, cur
    if n > 100:
        out = cur
    else:
        out = cur
    gl.store(dst + offs, out.load(BLOCKED))


def test_descriptors_survive_loops_and_ifs():
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    y = np.zeros_like(x)
    ping_pong[(1,)](x, y, 5)
    expected = x.copy()
    for _ in range(5):
        expected = expected + np.float32(1.0)  # the same fp32 additions, in the same order
    np.testing.assert_array_equal(y, expected)
