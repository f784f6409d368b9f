"""Kernels of the GPU debug-mode and timeline tests (tests/shared_codegen/debug_mode and
tests/gpu/test_debug_mode_gpu.py): a correct and an out-of-bounds tile kernel, a Gluon kernel
that waits on a barrier nobody arrives on, and a Gluon kernel with timeline regions."""

from __future__ import annotations

import inspect
import os

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier
import tile.profiler.language as pl

# The path kernel locations carry (normalized, however this module was found).
FILE = os.path.abspath(__file__)


def line_of(text: str) -> int:
    """The line of this file holding `text`."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@tile.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@tile.jit
def shifted_copy_kernel(x_ptr, out_ptr, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs + SHIFT, x, mask=offs < n)  # the shifted store


@tile.jit
def walking_pointer_kernel(x_ptr, out_ptr, STEPS: tl.constexpr):
    p = x_ptr + tl.arange(0, 32)
    acc = tl.zeros([32], tl.float32)
    for _ in range(STEPS):
        acc += tl.load(p)  # a pointer carried through the loop
        p += 32
    tl.store(out_ptr + tl.arange(0, 32), acc)


@gluon.jit
def lonely_wait_kernel(out_ptr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.wait(bar, 0)  # nobody arrives
    gl.store(out_ptr, 1)


# ---- a producer and a consumer partition handing a buffer over, with timeline regions ------

BLOCKED_1W = gl.BlockedLayout([1, 8], [4, 8], [1, 1], [1, 0])    # 1 warp
BLOCKED_4W = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])    # 4 warps
SMEM = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])


@gluon.jit
def _offsets(layout: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr):
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    return gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0)


@gluon.jit
def _produce(in_ptr, smem, ready, empty, ROUNDS: gl.constexpr):
    for i in range(ROUNDS):
        pl.enter_scope("wait empty")
        mbarrier.wait(empty, (i & 1) ^ 1)
        pl.exit_scope("wait empty")
        pl.enter_scope("produce")
        x = gl.load(in_ptr + i * 1024 + _offsets(BLOCKED_1W, 32, 32))
        smem.store(x)
        mbarrier.arrive(ready)
        pl.exit_scope("produce")


@gluon.jit
def _consume(out_ptr, smem, ready, empty, ROUNDS: gl.constexpr):
    for i in range(ROUNDS):
        pl.enter_scope("wait ready")
        mbarrier.wait(ready, i & 1)
        pl.exit_scope("wait ready")
        pl.enter_scope("consume")
        x = smem.load(BLOCKED_4W)
        mbarrier.arrive(empty)
        gl.store(out_ptr + i * 1024 + _offsets(BLOCKED_4W, 32, 32), x * 2.0)
        pl.exit_scope("consume")


@gluon.jit
def ping_pong_kernel(in_ptr, out_ptr, ROUNDS: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_consume, (out_ptr, smem, bars.index(0), bars.index(1), ROUNDS)),
                        (_produce, (in_ptr, smem, bars.index(0), bars.index(1), ROUNDS))],
                       [1], [64])


@tile.jit
def histogram_kernel(x_ptr, bins_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.atomic_add(bins_ptr + x, 1)  # the bin update
