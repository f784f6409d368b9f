"""TMA in the interpreter: load -> wait -> local_load round trips, out-of-bounds zero fill,
clipped stores, a pipelined ring with hand-counted phases, transaction-byte deadlocks and the
race reports of reading a load's or overwriting a store's shared memory too early."""

import numpy as np
import pytest
from hopper_kernels import (arange2d, desc, line_of, tma_offset_load_kernel,
                            tma_ring_kernel, tma_round_trip_kernel, tma_store_kernel,
                            tma_two_waits_kernel)

from gluon import language as gl
from shared_codegen.interpreter.memory import InterpreterError


def test_load_wait_local_load_round_trip():
    x = arange2d(128, 128)
    out = np.zeros_like(x)
    tma_round_trip_kernel[(2, 2)](desc(x, [64, 64]), out, 128, 64 * 64 * 2, False)
    np.testing.assert_array_equal(out, x)


def test_a_block_wider_than_the_swizzle_moves_as_several_boxes():
    x = arange2d(64, 256)
    out = np.zeros_like(x)
    tma_round_trip_kernel[(2, 1)](desc(x, [32, 256]), out, 256, 32 * 256 * 2, False)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("m0, n0", [(64, 192), (-32, -40), (90, 0), (0, 0), (200, 0)])
def test_out_of_bounds_elements_of_a_box_read_as_zero(m0, n0):
    y = arange2d(100, 200)
    out = np.full((64, 64), -1, np.float16)
    tma_offset_load_kernel[(1,)](desc(y, [64, 64]), out, m0, n0)
    padded = np.zeros((100 + 512, 200 + 512), np.float16)
    padded[256:356, 256:456] = y
    np.testing.assert_array_equal(out, padded[256 + m0:320 + m0, 256 + n0:320 + n0])


def test_a_store_writes_only_the_in_bounds_part_of_its_box():
    z = np.zeros((100, 200), np.float16)
    tma_store_kernel[(1,)](desc(z, [64, 64]), 64, 192, False)
    block = (np.arange(64 * 64) + 1).reshape(64, 64).astype(np.float16)
    want = np.zeros_like(z)
    want[64:, 192:] = block[:36, :8]
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("m0, n0", [(-24, 0), (0, -8), (-64, 0)])
def test_a_store_before_row_or_column_zero_is_reported(m0, n0):
    # On the H100 a TMA store at a negative coordinate is an illegal instruction
    # (benchmarks/tma_negative_probe.py, 2026-12-07), unlike a load, which reads zeros.
    z = np.zeros((100, 200), np.float16)
    with pytest.raises(InterpreterError) as info:
        tma_store_kernel[(1,)](desc(z, [64, 64]), m0, n0, False)
    negative = 0 if m0 < 0 else 1
    assert (f"TMA store at coordinates [{m0}, {n0}]: coordinate {negative} is negative; the "
            f"GPU raises an illegal instruction") in str(info.value)
    assert "hopper_kernels.py:155" in str(info.value)
    assert not z.any()


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_ring_of_stages_with_hand_counted_phases(stages):
    x = arange2d(64 * 7, 64)
    out = np.zeros_like(x)
    tma_ring_kernel[(1,)](desc(x, [64, 64]), desc(out, [64, 64]), 7, stages)
    np.testing.assert_array_equal(out, x + 1)


def test_two_barriers_two_loads_and_a_store_of_their_sum():
    a, b = arange2d(64, 64), arange2d(64, 64)[::-1].copy()
    out = np.zeros_like(a)
    tma_two_waits_kernel[(1,)](desc(a, [64, 64]),
                               desc(b, [64, 64]), desc(out, [64, 64]))
    np.testing.assert_array_equal(out, a + b)


def test_reading_a_load_destination_before_its_wait_is_a_race_word_for_word():
    x = arange2d(64, 64)
    with pytest.raises(InterpreterError) as info:
        tma_round_trip_kernel[(1, 1)](desc(x, [64, 64]), np.zeros_like(x), 64, 8192, True)
    read = line_of("early = smem.load(BLOCKED)  # reads before the wait")
    load = line_of("tma.async_copy_global_to_shared(in_desc, [m, n], bar, smem)  # the load")
    alloc = line_of("# the barrier")
    assert str(info.value) == (
        f"{read}: race: local_load reads shared memory that the TMA load at {load} may still "
        f"be writing; wait on the mbarrier allocated at {alloc} until it observes the phase "
        f"the load completes (mbarrier.expect(bar, nbytes) before the load, "
        f"mbarrier.wait(bar, phase) before reading) (program id (0, 0, 0))\n"
        f"    early = smem.load(BLOCKED)  # reads before the wait")


def test_overwriting_a_store_source_before_store_wait_is_a_race_word_for_word():
    z = np.zeros((64, 64), np.float16)
    with pytest.raises(InterpreterError) as info:
        tma_store_kernel[(1,)](desc(z, [64, 64]), 0, 0, True)
    write = line_of("smem.store(x)  # overwrites before store_wait")
    store = line_of("tma.async_copy_shared_to_global(out_desc, [M0, N0], smem)  # the store")
    assert str(info.value) == (
        f"{write}: race: local_store writes shared memory that the TMA store at {store} may "
        f"still be reading; tma.store_wait(n) must retire its group first (n smaller than the "
        f"number of stores issued after it) (program id (0, 0, 0))\n"
        f"    smem.store(x)  # overwrites before store_wait")


def test_expecting_more_bytes_than_the_loads_bring_is_a_deadlock_word_for_word():
    x = arange2d(64, 64)
    with pytest.raises(InterpreterError) as info:
        tma_round_trip_kernel[(1, 1)](desc(x, [64, 64]), np.zeros_like(x), 64, 16384, False)
    wait = line_of("# the load's wait")
    alloc = line_of("# the barrier")
    assert str(info.value) == (
        f"{wait}: deadlock: mbarrier.wait for phase 0 of the mbarrier allocated at {alloc} can "
        f"never return: the phase still lacks 8192 transaction bytes; no async copy in flight "
        f"will arrive on it, and no other partition is running (program id (0, 0, 0))\n"
        f"    mbarrier.wait(bar, 0, deps=[smem])  # the load's wait")


def test_expecting_fewer_bytes_than_the_loads_bring_is_reported_too():
    x = arange2d(64, 64)
    with pytest.raises(InterpreterError, match="the phase received 4096 transaction bytes more "
                                               "than mbarrier.expect announced"):
        tma_round_trip_kernel[(1, 1)](desc(x, [64, 64]), np.zeros_like(x), 64, 4096, False)


def test_the_destination_must_match_the_descriptor_block():
    import gluon
    from gluon.language.nvidia.hopper import mbarrier, tma
    from shared_codegen.frontend.errors import CompilationError

    @gluon.jit
    def wrong_shape(d):
        smem = gl.allocate_shared_memory(gl.float16, [32, 64], d.layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        tma.async_copy_global_to_shared(d, [0, 0], bar, smem)

    with pytest.raises(CompilationError, match=r"result is \[32, 64\] x float16 but the "
                                               r"descriptor moves \[64, 64\] x float16 blocks"):
        wrong_shape[(1,)](desc(arange2d(64, 64), [64, 64]))
