"""Issue 16, items 2 and 3 on the GPU: debug-mode launches of a deliberately out-of-bounds tile
kernel and of a Gluon kernel waiting on a barrier nobody arrives on raise within 10 s, word for
word, and the process launches correct kernels afterwards; a timeline of a ping-pong between
two partitions comes back from the device.

    PYTHONPATH=. python3 -m pytest -q tests/gpu/test_debug_mode_gpu.py
"""

import os
import sys
import time

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "shared_codegen",
                                                "debug_mode")))
from debug_kernels import (FILE, add_kernel, histogram_kernel, line_of,  # noqa: E402
                           lonely_wait_kernel, ping_pong_kernel, shifted_copy_kernel)

import gluon  # noqa: E402
import tile  # noqa: E402


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    return torch


def _add_works(torch, debug):
    """A correct kernel computes correctly (the context survived)."""
    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    y = torch.full((1000,), 0.5, device="cuda")
    out = torch.zeros(1000, device="cuda")
    add_kernel[(8,)](x, y, out, 1000, BLOCK=128, debug=debug)
    torch.cuda.synchronize()
    assert torch.equal(out, x + 0.5)


def test_an_out_of_bounds_store_raises_and_is_not_performed(torch):
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    out = torch.full((1024,), -1.0, device="cuda")
    start = time.monotonic()
    with pytest.raises(tile.DeviceOutOfBoundsError) as info:
        # Program 7's thread 127 stores element 1024 of 1024: the only access outside.
        shifted_copy_kernel[(8,)](x, out, 1024, SHIFT=1, BLOCK=128, debug=True)
    assert time.monotonic() - start < 10
    assert str(info.value) == (
        f"{FILE}:{line_of('# the shifted store')}: out-of-bounds store of `out_ptr` in "
        f"`shifted_copy_kernel`: element offset 1024 is outside [0, 1024) (1024 elements of "
        f"float32) (program id (7, 0, 0), thread 127, default partition); the store was not "
        f"performed\n"
        f"    tl.store(out_ptr + offs + SHIFT, x, mask=offs < n)  # the shifted store")
    # Every other store happened; the one outside did not (nothing after `out` was hit).
    assert torch.equal(out[1:], x[:-1]) and out[0].item() == -1.0
    _add_works(torch, debug=False)
    _add_works(torch, debug=True)  # a debug launch that passes raises nothing


def test_an_out_of_bounds_atomic_raises_and_is_not_performed(torch):
    x = torch.arange(128, device="cuda", dtype=torch.int32) % 64
    x[9] = 70  # thread 9's bin is past the 64 bins
    bins = torch.zeros(64, device="cuda", dtype=torch.int32)
    with pytest.raises(tile.DeviceOutOfBoundsError) as info:
        histogram_kernel[(1,)](x, bins, BLOCK=128, debug=True)
    assert str(info.value) == (
        f"{FILE}:{line_of('# the bin update')}: out-of-bounds atomic of `bins_ptr` in "
        f"`histogram_kernel`: element offset 70 is outside [0, 64) (64 elements of int32) "
        f"(program id (0, 0, 0), thread 9, default partition); the atomic was not performed\n"
        f"    tl.atomic_add(bins_ptr + x, 1)  # the bin update")
    expected = torch.full((64,), 2, device="cuda", dtype=torch.int32)
    expected[9] = 1
    assert torch.equal(bins, expected)
    _add_works(torch, debug=False)


def test_a_wait_nobody_arrives_on_raises_a_deadlock_within_seconds(torch):
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    start = time.monotonic()
    with pytest.raises(gluon.DeviceDeadlockError) as info:
        lonely_wait_kernel[(1,)](out, debug=True)
    elapsed = time.monotonic() - start
    assert elapsed < 10, elapsed
    record = info.value.record
    address, thread = record["barrier_address"], record["thread"]
    assert 0 <= address < 228 * 1024 and 0 <= thread < 128  # a shared offset; a waiting thread
    assert str(info.value) == (
        f"{FILE}:{line_of('# nobody arrives')}: deadlock: mbarrier.wait for phase 0 of the "
        f"mbarrier at shared address {address:#x} in `lonely_wait_kernel` did not complete "
        f"within 1000 ms; the waiting threads gave up (program id (0, 0, 0), thread {thread}, "
        f"default partition)\n"
        f"    mbarrier.wait(bar, 0)  # nobody arrives")
    assert out.item() == 0  # the threads gave up before the store
    _add_works(torch, debug=False)
    # And again: the record was reset, the process keeps working.
    with pytest.raises(gluon.DeviceDeadlockError):
        lonely_wait_kernel[(1,)](out, debug=True)
    _add_works(torch, debug=False)


def test_the_environment_variable_turns_debug_mode_on(torch, monkeypatch):
    monkeypatch.setenv("SC_DEVICE_DEBUG", "1")
    monkeypatch.setenv("SC_DEVICE_DEBUG_WAIT_MS", "200")
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    start = time.monotonic()
    with pytest.raises(gluon.DeviceDeadlockError, match="did not complete within 200 ms"):
        lonely_wait_kernel[(1,)](out)
    assert time.monotonic() - start < 10


def test_a_timeline_of_the_ping_pong_comes_back_from_the_device(torch):
    x = torch.arange(3 * 1024, device="cuda", dtype=torch.float32)
    out = torch.zeros_like(x)
    ping_pong_kernel[(2,)](x, out, 3, timeline=True)
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x)
    timeline = ping_pong_kernel.last_timeline
    assert timeline.clock == "ns" and (timeline.dropped, timeline.unmatched) == (0, 0)
    consumer, producer = "default (_consume)", "worker 0 (_produce)"
    for program in ((0, 0, 0), (1, 0, 0)):
        lanes = {}
        for r in sorted(timeline.regions, key=lambda r: r.start):
            if r.program == program:
                lanes.setdefault((r.partition, r.warp), []).append(r)
        # Every warp of each partition recorded its own regions, in program order.
        assert sorted(lanes) == [(consumer, w) for w in range(4)] + [(producer, 4)]
        for (partition, _), regions in lanes.items():
            names = ["wait ready", "consume"] if partition == consumer else \
                ["wait empty", "produce"]
            assert [r.name for r in regions] == names * 3
            assert all(r.end >= r.start for r in regions)
        produce = [r for r in lanes[(producer, 4)] if r.name == "produce"]
        waits = [r for r in lanes[(consumer, 0)] if r.name == "wait ready"]
        for i in range(3):  # a consumer's wait ends after the producer started filling
            assert waits[i].end >= produce[i].start
    # The same kernel without a timeline launches as usual.
    out.zero_()
    ping_pong_kernel[(2,)](x, out, 3)
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x)
