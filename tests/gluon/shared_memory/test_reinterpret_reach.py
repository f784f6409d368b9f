"""`_reinterpret` of one buffer of a ring as a larger view that reaches into the next ones
(Triton 3.6 allows it; tutorial 07 stores its epilogue tile over two B buffers): allowed up
to the allocation's end, checked against it at run time in the interpreter, and the same
bytes in the compiled kernel."""

import numpy as np
import pytest

import gluon
from gluon import language as gl

SMEM = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
BLOCKED = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])


@gluon.jit
def steal_kernel(out_ptr, slot):
    """Fill a 3-slot [16, 64] ring with 100 * slot + element index, then read slots
    `slot` and `slot + 1` back as one [32, 64] view."""
    ring = gl.allocate_shared_memory(gl.float16, [3, 16, 64], SMEM)
    rows = gl.arange(0, 16, gl.SliceLayout(1, BLOCKED))[:, None]
    cols = gl.arange(0, 64, gl.SliceLayout(0, BLOCKED))[None, :]
    for i in gl.static_range(3):
        ring.index(i).store((rows * 64 + cols + 1000 * i).to(gl.float16))
    pair = ring.index(slot)._reinterpret(gl.float16, [32, 64], SMEM)
    rows2 = gl.arange(0, 32, gl.SliceLayout(1, BLOCKED))[:, None]
    gl.store(out_ptr + rows2 * 64 + cols, pair.load(BLOCKED))


def test_a_reinterpreted_slot_reaches_into_the_next():
    out = np.zeros((32, 64), np.float16)
    steal_kernel[(1,)](out, 1)
    one = (np.arange(16 * 64).reshape(16, 64)).astype(np.float32)
    np.testing.assert_array_equal(out[:16], (one + 1000).astype(np.float16))
    np.testing.assert_array_equal(out[16:], (one + 2000).astype(np.float16))


def test_reaching_past_the_allocation_is_an_interpreter_error():
    with pytest.raises(gluon.InterpreterError, match="memdesc_reinterpret: the new view "
                                                     "reaches past the allocation"):
        steal_kernel[(1,)](np.zeros((32, 64), np.float16), 2)


def test_more_than_the_allocation_is_a_compile_error():
    @gluon.jit
    def too_big():
        ring = gl.allocate_shared_memory(gl.float16, [3, 16, 64], SMEM)
        ring.index(0)._reinterpret(gl.float16, [64, 64], SMEM)

    with pytest.raises(gluon.CompilationError, match=r"reinterpreting a view of a 6144-byte "
                       r"allocation \(\[3, 16, 64\] x fp16\) as \[64, 64\] x fp16 needs 8192 "
                       r"bytes"):
        gluon.compile(too_big, {})

