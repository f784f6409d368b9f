"""Shared memory allocated inside a `gl.warp_specialize` partition (Triton allows it, and
upstream's Blackwell tutorial 08 does it in its epilogue): the allocator gives such a buffer
its own bytes for the whole call, apart from every other partition's and from buffers live
across the call; the interpreter's numerics do not depend on it; over the limit is an error
with the numbers."""

import re

import numpy as np
import pytest

import gluon
import shared_codegen.frontend.compile as compile_mod
from shared_codegen.errors import OutOfResources
from gluon import language as gl

ROWS, COLS = 32, 32
SHARED = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
LAYOUT_4W = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
LAYOUT_1W = gl.BlockedLayout([1, 4], [4, 8], [1, 1], [1, 0])


@gluon.jit
def _tile_offsets(layout: gl.constexpr, ROWS: gl.constexpr, COLS: gl.constexpr):
    r = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    c = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    return gl.expand_dims(r, 1) * COLS + gl.expand_dims(c, 0)


@gluon.jit
def _default_copies(in_ptr, out_ptr, ROWS: gl.constexpr, COLS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    offs = _tile_offsets(layout, ROWS, COLS)
    own = gl.allocate_shared_memory(gl.float32, [ROWS, COLS],
                                    gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    own.store(gl.load(in_ptr + offs) * 2.0)
    gl.store(out_ptr + offs, own.load(layout) + 1.0)


@gluon.jit
def _worker_copies(in_ptr, out_ptr, staged, ROWS: gl.constexpr, COLS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [1, 1], [1, 0])
    offs = _tile_offsets(layout, ROWS, COLS)
    own = gl.allocate_shared_memory(gl.float32, [ROWS, COLS],
                                    gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    own.store(gl.load(in_ptr + ROWS * COLS + offs) * 3.0)
    # `staged` was filled before the call: its bytes must survive the worker's own stores.
    gl.store(out_ptr + ROWS * COLS + offs, own.load(layout) + staged.load(layout))


@gluon.jit
def partition_local_kernel(in_ptr, out_ptr, ROWS: gl.constexpr, COLS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    offs = _tile_offsets(layout, ROWS, COLS)
    staged = gl.allocate_shared_memory(gl.float32, [ROWS, COLS],
                                       gl.SwizzledSharedLayout(1, 1, 1, [1, 0]),
                                       gl.load(in_ptr + 2 * ROWS * COLS + offs))
    gl.warp_specialize([(_default_copies, (in_ptr, out_ptr, ROWS, COLS)),
                        (_worker_copies, (in_ptr, out_ptr, staged, ROWS, COLS))], [1], [80])


@gluon.jit
def _big_default(N: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    buf.store(gl.zeros([N], gl.float32, gl.BlockedLayout([4], [32], [4], [0])))


@gluon.jit
def _big_worker(N: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    buf.store(gl.zeros([N], gl.float32, gl.BlockedLayout([4], [32], [1], [0])))


@gluon.jit
def over_limit_kernel(N: gl.constexpr):
    gl.warp_specialize([(_big_default, (N,)), (_big_worker, (N,))], [1], [80])


SIGNATURE = {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16"}
CONSTEXPRS = {"ROWS": ROWS, "COLS": COLS}
TILE_BYTES = ROWS * COLS * 4


def _expected(a):
    tiles = a.reshape(3, ROWS, COLS)
    return np.concatenate([tiles[0] * 2 + 1, tiles[1] * 3 + tiles[2]]).reshape(-1)


def test_partition_local_buffers_run_in_the_interpreter():
    a = (np.arange(3 * ROWS * COLS) % 251).astype(np.float32) / 8
    out = np.zeros(2 * ROWS * COLS, np.float32)
    partition_local_kernel[(1,)](a, out, ROWS, COLS)
    np.testing.assert_array_equal(out, _expected(a))


def _allocation_spans(tmp_path, monkeypatch, target):
    monkeypatch.setenv("SC_DUMP_IR_DIR", str(tmp_path))
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    monkeypatch.setattr(compile_mod, "_DISK_CACHE", None)
    compiled = gluon.compile(partition_local_kernel, SIGNATURE, CONSTEXPRS, target=target)
    dump = next(p for p in tmp_path.iterdir() if p.name.endswith("shared_memory_allocation.mlir"))
    offsets = [int(m) for m in re.findall(r"ttg\.local_alloc.*?offset = (\d+)", dump.read_text())]
    return compiled, sorted((o, o + TILE_BYTES) for o in offsets)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_each_partition_buffer_gets_its_own_bytes(tmp_path, monkeypatch, target):
    compiled, spans = _allocation_spans(tmp_path, monkeypatch, target)
    # staged (live across the call), the default partition's and the worker's: three buffers
    # that are live at once, so none may share a byte with another.
    assert len(spans) == 3
    assert all(hi <= lo for (_, hi), (lo, _) in zip(spans, spans[1:]))
    assert compiled.shared >= 3 * TILE_BYTES
    assert len(compiled.asm["cubin"]) > 0
    ptx = compiled.asm["ptx"]
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+80;", ptx)
    # The PTX stores at each buffer's planned start (the one at 0 has no immediate).
    stored = {int(m) for m in re.findall(r"st\.shared\.v4\.b32\s+\[%rd\d+\+(\d+)\]", ptx)}
    assert {lo for lo, _ in spans if lo} <= stored, (spans, sorted(stored))


def test_partition_buffers_over_the_limit_name_the_bytes():
    with pytest.raises(OutOfResources) as info:
        gluon.compile(over_limit_kernel, {}, {"N": 32768}, target="sm_90a")
    text = str(info.value)
    assert "262144" in text and "232448" in text, text
    assert "131072 B at " in text, text
