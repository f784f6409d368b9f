"""The happens-before race detector between partitions: shared-memory accesses that no
mbarrier edge orders are RaceErrors naming both lines and the missing edge, whatever order
the cooperative scheduler happened to run the partitions in."""

import inspect

import numpy as np
import pytest
from hb_kernels import (early_release_kernel, mma_early_release_kernel,
                        store_without_arrive_kernel, tma_read_without_wait_kernel)
from ws_kernels import arange2d, desc

import hb_kernels
from gluon import language as gl
from shared_codegen.errors import RaceError


def line_of(text: str) -> str:
    """`file:line` of the (unique) line of hb_kernels.py containing `text`."""
    lines, _ = inspect.findsource(hb_kernels)
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return f"{hb_kernels.__file__}:{hits[0]}"


def test_reading_a_tma_write_after_waiting_on_another_barrier_names_the_missing_wait():
    x = arange2d(64, 64)
    with pytest.raises(RaceError) as info:
        tma_read_without_wait_kernel[(1,)](desc(x, [64, 64]), np.zeros_like(x))
    read, tma = line_of("# the unordered read"), line_of("# the TMA write")
    bars = line_of("# hb bars")
    assert str(info.value) == (
        f"{read}: race: local_load reads shared memory that the TMA load of the worker "
        f"partition 0 `_loads_then_waits_itself` (1 warp) wrote at {tma} "
        f"(tma.async_copy_global_to_shared), and nothing orders the two: no wait on "
        f"`bars[1]` (allocated at {bars}) phase 0 between the TMA write at {tma} and the read "
        f"at {read} (the TMA load signals that phase; the default partition "
        f"`_reads_without_waiting_on_ready` (4 warps) must wait for it first) "
        f"(program id (0, 0, 0))\n"
        f"    x = smem.load(BLOCKED)  # the unordered read")


def test_a_write_no_arrive_publishes_is_a_race_with_the_other_partitions_read():
    with pytest.raises(RaceError) as info:
        store_without_arrive_kernel[(1,)](np.zeros((32, 32), np.float32), False)
    read, write = line_of("# reads what no arrive published"), line_of("# the unpublished")
    assert str(info.value) == (
        f"{read}: race: local_load reads shared memory that the default partition "
        f"`_writes_and_leaves` (4 warps) wrote at {write} (local_store), and nothing orders "
        f"the two: that partition arrives on no mbarrier after its write, so the worker "
        f"partition 0 `_reads_the_unpublished` (1 warp) cannot wait for it (mbarrier.arrive "
        f"after the write, mbarrier.wait before the read) (program id (0, 0, 0))\n"
        f"    x = smem.load(BLOCKED_1W)  # reads what no arrive published")


def test_a_read_that_skips_the_wait_names_the_barrier_the_writer_arrives_on():
    with pytest.raises(RaceError) as info:
        store_without_arrive_kernel[(1,)](np.zeros((32, 32), np.float32), True)
    read, write = line_of("# reads what no arrive published"), line_of("# the unpublished")
    arrive, bar = line_of("# publishes it"), line_of("# done bar")
    assert str(info.value) == (
        f"{read}: race: local_load reads shared memory that the default partition "
        f"`_writes_and_leaves` (4 warps) wrote at {write} (local_store), and nothing orders "
        f"the two: no wait on `done` (allocated at {bar}) phase 0 between the write at {write} "
        f"and the read at {read} (that partition arrives on it at {arrive}; the worker "
        f"partition 0 `_reads_the_unpublished` (1 warp) must wait for it first) "
        f"(program id (0, 0, 0))\n"
        f"    x = smem.load(BLOCKED_1W)  # reads what no arrive published")


def test_freeing_a_slot_before_reading_it_races_with_the_refill():
    with pytest.raises(RaceError) as info:
        early_release_kernel[(1,)](np.zeros((32, 32), np.float32), False)
    refill, read = line_of("# the refill"), line_of("# the read the refill races with")
    assert str(info.value) == (
        f"{refill}: race: local_store writes shared memory that the worker partition 0 "
        f"`_consumer_frees_too_early` (1 warp) read at {read} (local_load), and nothing "
        f"orders the two: that partition arrives on no mbarrier after its read, so the default "
        f"partition `_producer_refills` (4 warps) cannot wait for it (mbarrier.arrive after "
        f"the read, mbarrier.wait before the write) (program id (0, 0, 0))\n"
        f"    smem.store(gl.full([32, 32], 2.0, gl.float32, BLOCKED))  # the refill")


def test_freeing_the_slot_after_reading_it_is_ordered():
    out = np.zeros((32, 32), np.float32)
    early_release_kernel[(1,)](out, True)
    np.testing.assert_array_equal(out, np.ones((32, 32), np.float32))


def _mma_operands():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 16)).astype(np.float16)
    b = rng.standard_normal((16, 32)).astype(np.float16)
    return a, b, desc(a, [64, 16], gl.NVMMASharedLayout(32, 16))


def test_a_tma_refill_of_a_slot_a_wgmma_read_needs_the_consumer_release():
    a, b, a_desc = _mma_operands()
    out = np.zeros((64, 32), np.float32)
    mma_early_release_kernel[(1,)](a_desc, b, out, True)  # released after the wgmma: ordered
    want = (a[:64].astype(np.float32) + a[64:].astype(np.float32)) @ b.astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    with pytest.raises(RaceError) as info:
        mma_early_release_kernel[(1,)](a_desc, b, out, False)
    refill, mma = line_of("# the TMA refill"), line_of("# the wgmma read")
    assert str(info.value) == (
        f"{refill}: race: this TMA load writes shared memory that the wgmma of the default "
        f"partition `_mma_frees_too_early` (4 warps) read at {mma} (warpgroup_mma), and "
        f"nothing orders the two: that partition arrives on no mbarrier after its wgmma read, "
        f"so the worker partition 0 `_tma_refills` (1 warp) cannot wait for it "
        f"(mbarrier.arrive after the wgmma read, mbarrier.wait before the TMA write) "
        f"(program id (0, 0, 0))\n"
        f"    tma.async_copy_global_to_shared(in_desc, [i * 64, 0], ready, ring)  "
        f"# the TMA refill")
