"""Kernels of the GPU debug-mode and timeline tests (tests/shared_codegen/debug_mode and
tests/gpu/test_debug_mode_gpu.py): a correct and an out-of-bounds tile kernel, a Gluon kernel
that waits on a barrier nobody arrives on, and a Gluon kernel with timeline regions."""

from __future__ import annotations

import inspect

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier

FILE = __file__


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


@gluon.jit
def lonely_wait_kernel(out_ptr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.wait(bar, 0)  # nobody arrives
    gl.store(out_ptr, 1)
