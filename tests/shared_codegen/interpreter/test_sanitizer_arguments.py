"""Arguments a kernel writes are checked before the interpreter runs it: read-only arrays,
stride-0 arrays and partial overlaps are refused naming the argument; exact aliasing (the
same array twice, `out=x`) and any aliasing of arguments only read stay allowed."""

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.errors import ArgumentError


@tile.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=m), mask=m)


@tile.jit
def loop_carried_kernel(src_ptr, dst_ptr, counter_ptr, n, BLOCK: tl.constexpr):
    # The written pointer reaches the store through a loop-carried value and a select.
    p = dst_ptr
    q = src_ptr
    for i in range(0, n, BLOCK):
        offs = tl.arange(0, BLOCK)
        tl.store(p + offs, tl.load(q + offs))
        p += BLOCK
        q += BLOCK
    tl.atomic_add(counter_ptr, 1)


def test_a_read_only_array_the_kernel_writes_is_refused():
    x, y = np.arange(32, dtype=np.float32), np.ones(32, np.float32)
    out = np.zeros(32, np.float32)
    out.flags.writeable = False
    with pytest.raises(ArgumentError) as info:
        add_kernel[(1,)](x, y, out, 32, BLOCK=32)
    assert str(info.value) == ("argument `out_ptr` of add_kernel is a read-only array "
                               "(writeable=False) but the kernel writes it; pass a writable "
                               "copy (`out_ptr.copy()`)")


def test_read_only_inputs_and_exact_aliasing_stay_allowed():
    x, y = np.arange(32, dtype=np.float32), np.ones(32, np.float32)
    y.flags.writeable = False
    add_kernel[(1,)](x, y, x, 32, BLOCK=32)         # out=x: in place, the same array
    np.testing.assert_array_equal(x, np.arange(32) + 1)
    out = np.zeros(32, np.float32)
    add_kernel[(1,)](y, y, out, 32, BLOCK=32)       # both inputs alias: only read
    np.testing.assert_array_equal(out, np.full(32, 2, np.float32))
    add_kernel[(1,)](x[:16], x[:16], x[16:], 16, BLOCK=16)  # disjoint views of one array
    np.testing.assert_array_equal(x[16:], 2 * (np.arange(16) + 1))


def test_a_written_argument_overlapping_another_in_part_is_refused():
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(ArgumentError) as info:
        add_kernel[(1,)](x[:32], x[40:], x[16:48], 32, BLOCK=32)
    assert str(info.value) == ("arguments `out_ptr` and `x_ptr` of add_kernel overlap in "
                               "memory and the kernel writes `out_ptr`; pass the same array "
                               "for both, or arrays that do not overlap")
    np.testing.assert_array_equal(x, np.arange(64))  # refused before anything ran


def test_a_written_argument_with_stride_zero_is_refused():
    x, y = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    cell = np.zeros(1, np.float32)
    out = np.lib.stride_tricks.as_strided(cell, shape=(8,), strides=(0,))
    with pytest.raises(ArgumentError) as info:
        add_kernel[(1,)](x, y, out, 8, BLOCK=8)
    assert str(info.value) == ("argument `out_ptr` of add_kernel has stride 0 in dim 0 (its "
                               "shape [8] repeats one element), but the kernel writes it; "
                               "programs would race on the shared elements; pass a contiguous "
                               "copy")


def test_written_arguments_follow_loop_carried_pointers_and_atomics():
    src, dst = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    counter = np.zeros(1, np.int32)
    loop_carried_kernel[(1,)](src, dst, counter, 16, BLOCK=8)
    np.testing.assert_array_equal(dst, src)
    src.flags.writeable = False  # only read: fine
    loop_carried_kernel[(1,)](src, dst, counter, 16, BLOCK=8)
    assert counter[0] == 2
    with pytest.raises(ArgumentError, match="argument `dst_ptr` of loop_carried_kernel is a "
                                            "read-only array"):
        loop_carried_kernel[(1,)](dst, src, counter, 16, BLOCK=8)

