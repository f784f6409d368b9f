"""Barriers for shared-memory hazards through control flow (ops/shared_memory/lowering.py,
`LoopHazards` and `BranchHazards`): a `for` body is checked against what is pending before
the loop and at the end of the previous iteration, once it is lowered; branches carry what
is pending into and out of them. So a loop whose accesses cannot conflict across iterations
has no `bar.sync`, one whose accesses do keeps it, and an mbarrier wait at a block of unknown
history no longer hides the hazards of the accesses after it."""

import os
import re
import sys

import numpy as np

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from gl_test_util import offsets_2d  # noqa: E402

L = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
SHARED = gl.NVMMASharedLayout(128, 16)
SIG = {"x_ptr": "*fp16:16", "out_ptr": "*fp16:16", "n": "i32"}
X = (np.arange(64 * 64) % 7).astype(np.float16).reshape(64, 64)


@gluon.jit
def reads_in_a_loop(x_ptr, out_ptr, n):
    offs = offsets_2d(64, 64, L)
    smem = gl.allocate_shared_memory(gl.float16, [64, 64], SHARED)
    smem.store(gl.load(x_ptr + offs))
    acc = gl.zeros([64, 64], gl.float16, L)
    for i in range(n):
        acc += smem.load(L)
    gl.store(out_ptr + offs, acc)


@gluon.jit
def rewrites_in_a_loop(x_ptr, out_ptr, n):
    offs = offsets_2d(64, 64, L)
    smem = gl.allocate_shared_memory(gl.float16, [64, 64], SHARED)
    acc = gl.load(x_ptr + offs)
    for i in range(n):
        smem.store(acc)
        acc += smem.load(L)
    gl.store(out_ptr + offs, acc)


@gluon.jit
def reads_after_a_branch(x_ptr, out_ptr, n):
    offs = offsets_2d(64, 64, L)
    smem = gl.allocate_shared_memory(gl.float16, [64, 64], SHARED)
    smem.store(gl.load(x_ptr + offs))
    y = smem.load(L)
    if n > 0:
        y = y * 2
    gl.store(out_ptr + offs, y + smem.load(L))


def _ptx(kernel):
    return gluon.compile(kernel, SIG, {}, target="sm_90a", num_warps=4).asm["ptx"]


def _shared_trace(ptx):
    """Labels, branches, barriers and shared loads / stores, one word each."""
    words = []
    for line in ptx.splitlines():
        line = line.strip()
        for pattern, word in ((r"^\$L__BB\d+_\d+:", "label"), (r"\bbra(\.uni)?\s", "bra"),
                              (r"^bar\.sync", "bar"), (r"^ld\.shared", "ld"),
                              (r"^st\.shared", "st"), (r"mbarrier\.try_wait", "wait")):
            if re.search(pattern, line):
                words.append(word)
                break
    return " ".join(words)


def test_a_loop_that_only_reads_syncs_once_before_it():
    # The store before the loop is ordered once; the loads then have no barrier between
    # them, so LLVM even hoists them out of the loop (4 vector loads in all). Before the
    # body was checked against its own end, every iteration began with a bar.sync.
    trace = _shared_trace(_ptx(reads_in_a_loop))
    assert trace.count("bar") == 1
    assert trace.startswith("st st st st bar")
    assert trace.count("ld") == 4
    out = np.zeros_like(X)
    reads_in_a_loop[(1,)](X, out, 3)
    np.testing.assert_array_equal(out, 3 * X)


def test_a_loop_that_rewrites_what_it_read_keeps_both_barriers():
    # Iteration i + 1's store must wait for iteration i's loads in other threads.
    trace = _shared_trace(_ptx(rewrites_in_a_loop))
    assert re.search(r"label bar st st st st bar ld ld ld ld bra", trace), trace
    assert trace.count("bar") == 2
    out = np.zeros_like(X)
    rewrites_in_a_loop[(1,)](X, out, 3)
    np.testing.assert_array_equal(out, 8 * X)


def test_reads_after_a_branch_need_no_barrier():
    trace = _shared_trace(_ptx(reads_after_a_branch))
    assert trace.count("bar") == 1
    out = np.zeros_like(X)
    reads_after_a_branch[(1,)](X, out, 1)
    np.testing.assert_array_equal(out, 3 * X)


@gluon.jit
def rewrites_after_an_inner_loop(x_ptr, out_ptr, n):
    offs = offsets_2d(64, 64, L)
    smem = gl.allocate_shared_memory(gl.float16, [64, 64], SHARED)
    smem.store(gl.load(x_ptr + offs))
    acc = gl.zeros([64, 64], gl.float16, L)
    for i in range(n):
        for j in range(n):
            acc += smem.load(L)
        smem.store(acc)
    gl.store(out_ptr + offs, acc)


def test_an_inner_loop_is_checked_against_the_outer_loops_previous_iteration():
    # The inner loop's loads come first in the outer body; they must wait for the previous
    # outer iteration's store in other threads, although the inner loop's own iterations
    # only read and nothing precedes them in the outer body's first block. Two barriers:
    # at the top of each outer iteration (which also orders the store before the loops),
    # and before the store, after the inner loop's reads.
    trace = _shared_trace(_ptx(rewrites_after_an_inner_loop))
    assert trace.count("bar") == 2, trace
    assert "bar ld ld ld ld" in trace and "bar st st st st" in trace
    out = np.zeros_like(X)
    rewrites_after_an_inner_loop[(1,)](X, out, 2)
    np.testing.assert_array_equal(out, 6 * X)


@gluon.jit
def _rewrite_while_waiting(smem, bar, out_ptr, n):
    offs = offsets_2d(64, 64, L)
    acc = gl.zeros([64, 64], gl.float16, L)
    i = 0
    while i < n:
        mbarrier.wait(bar, 0)
        smem.store(acc + 1)
        acc = smem.load(L)
        i += 1
    gl.store(out_ptr + offs, acc)


@gluon.jit
def _arrive_once(bar):
    mbarrier.arrive(bar)


@gluon.jit
def waits_in_a_while_loop(out_ptr, n):
    smem = gl.allocate_shared_memory(gl.float16, [64, 64], SHARED)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    gl.warp_specialize([(_rewrite_while_waiting, (smem, bar, out_ptr, n)),
                        (_arrive_once, (bar,))], [1], [24])


def test_an_mbarrier_wait_does_not_hide_the_hazards_after_it():
    # A while body starts with an unknown history. The wait needs no barrier (a partition's
    # barrier words are only touched atomically), but the store after it does: other
    # threads may still be loading the previous iteration's value. The partition's named
    # barrier (id 1, its 128 threads) goes between the wait and the store.
    ptx = gluon.compile(waits_in_a_while_loop, {"out_ptr": "*fp16:16", "n": "i32"}, {},
                        target="sm_90a", num_warps=4).asm["ptx"]
    body = ptx[ptx.index("mbarrier.try_wait"):]
    body = body[:body.index("ld.shared")]
    assert re.findall(r"bar\.sync\s+(\d+), (\d+);", body) == [("1", "128"), ("1", "128")]
    assert body.index("bar.sync") < body.index("st.shared")
    out = np.zeros((64, 64), np.float16)
    waits_in_a_while_loop[(1,)](out, 3)
    np.testing.assert_array_equal(out, np.full((64, 64), 3, np.float16))


@gluon.jit
def barrier_lifecycle(out_ptr):
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(3):
        mbarrier.init(bars.index(s), count=1)
    for s in gl.static_range(3):
        mbarrier.arrive(bars.index(s))
    for s in gl.static_range(3):
        mbarrier.wait(bars.index(s), 0)
    for s in gl.static_range(3):
        mbarrier.invalidate(bars.index(s))
    gl.store(out_ptr + gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0])), 1.0)


def _mbarrier_trace(ptx):
    words = []
    for line in ptx.splitlines():
        for pattern, word in ((r"^\s*bar\.sync", "bar"), (r"mbarrier\.init", "init"),
                              (r"mbarrier\.arrive", "arrive"), (r"mbarrier\.try_wait", "wait"),
                              (r"mbarrier\.inval", "inval")):
            if re.search(pattern, line):
                words.append(word)
                break
    return " ".join(words)


def test_one_threads_own_barrier_accesses_need_no_barrier_between_them():
    # Thread 0 inits the three barriers, and later invalidates them, one after the other:
    # program order covers those. The other threads' waits need the inits first, and the
    # invalidations need every thread's waits done: one bar.sync each (the arrivals, by
    # thread 0 for all, share one more).
    ptx = gluon.compile(barrier_lifecycle, {"out_ptr": "*fp32:16"}, {}, target="sm_90a",
                        num_warps=4).asm["ptx"]
    assert _mbarrier_trace(ptx) == ("init init init bar arrive arrive arrive wait wait wait "
                                    "bar inval inval inval")
    out = np.zeros(128, np.float32)
    barrier_lifecycle[(1,)](out)
    np.testing.assert_array_equal(out, 1.0)
