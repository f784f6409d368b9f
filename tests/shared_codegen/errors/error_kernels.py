"""Deliberately broken kernels for the error tests, and a helper to find their lines."""

from __future__ import annotations

import inspect

import tile
import tile.language as tl
import gluon
from gluon import language as gl
from gluon.language.nvidia.ampere import async_copy
from gluon.language.nvidia.hopper import mbarrier

BLOCKED = gl.BlockedLayout([1, 1], [32, 1], [4, 1], [1, 0])
SWIZZLED = gl.SwizzledSharedLayout(1, 1, 1, [0])
FILE = __file__


def line_of(text: str) -> int:
    """The line number of the first line of this file containing `text`."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@tile.jit
def add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@tile.jit
def undefined_name_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + not_defined_anywhere)  # noqa: F821


@gluon.jit
def wait_forever_kernel(out_ptr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # the barrier
    mbarrier.init(bar, count=1)
    mbarrier.wait(bar, 0)  # nobody arrives
    gl.store(out_ptr, 1)


@gluon.jit
def read_before_wait_kernel(x_ptr, out_ptr):
    offs = gl.arange(0, 128, layout=gl.SliceLayout(1, BLOCKED))
    smem = gl.allocate_shared_memory(gl.float32, [128], SWIZZLED)
    async_copy.async_copy_global_to_shared(smem, x_ptr + offs)  # the copy
    async_copy.commit_group()
    values = smem.load(gl.SliceLayout(1, BLOCKED))  # read before the wait
    async_copy.wait_group(0)
    gl.store(out_ptr + offs, values)


@gluon.jit
def big_shared_kernel(out_ptr, ROWS: gl.constexpr, EXTRA: gl.constexpr = 0):
    smem = gl.allocate_shared_memory(gl.float32, [ROWS, 256], SWIZZLED2D)  # the big buffer
    smem.store(gl.zeros([ROWS, 256], gl.float32, BLOCKED2D))
    if EXTRA > 0:  # live together with `smem`
        more = gl.allocate_shared_memory(gl.float32, [EXTRA, 256], SWIZZLED2D)  # one more
        more.store(gl.zeros([EXTRA, 256], gl.float32, BLOCKED2D))
        gl.store(out_ptr + gl.arange(0, 256, layout=gl.SliceLayout(0, BLOCKED2D)),
                 gl.sum(more.load(BLOCKED2D), axis=0))
    gl.store(out_ptr + gl.arange(0, 256, layout=gl.SliceLayout(0, BLOCKED2D)),
             gl.sum(smem.load(BLOCKED2D), axis=0))


SWIZZLED2D = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
BLOCKED2D = gl.BlockedLayout([1, 4], [1, 32], [4, 1], [1, 0])
