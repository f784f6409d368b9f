"""mbarrier in the interpreter: exact phases, arrival counts and transaction bytes; the
deadlock report of a wait that can never return; verifier and builtin errors."""

import re

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier
from hopper_kernels import (arrivals_kernel, line_of, over_arrive_kernel,
                            two_phases_kernel, uninitialized_wait_kernel)

from shared_codegen.ops.mbarrier.definition import BarrierState, MBarrierLayout
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError


def test_mbarrier_layout_is_an_unswizzled_1d_shared_layout():
    layout = MBarrierLayout()
    assert (layout.vec, layout.per_phase, layout.max_phase, layout.order) == (1, 1, 1, (0,))
    assert layout == MBarrierLayout() and repr(layout) == "MBarrierLayout()"


def test_phase_completes_when_all_arrivals_and_bytes_are_in():
    state = BarrierState("k.py:1", None)
    state.valid, state.count, state.pending = True, 2, 2
    state.expect_tx(128)
    state.arrive(1, None, None)
    assert (state.phase, state.pending, state.tx) == (0, 1, 128)
    state.arrive(1, None, None)
    assert state.phase == 0  # arrivals are in, bytes are not
    assert state.complete_tx(128) == 0  # landed in phase 0 ...
    assert (state.phase, state.pending, state.tx) == (1, 2, 0)  # ... which completes it


def test_wait_returns_once_the_arrivals_complete_the_phase():
    out = np.zeros(1, np.int32)
    arrivals_kernel[(1,)](out, 2, 2, 0)
    assert out[0] == 1


def test_waiting_on_parity_1_of_a_fresh_barrier_returns_at_once():
    out = np.zeros(1, np.int32)
    arrivals_kernel[(1,)](out, 3, 0, 1)
    assert out[0] == 1


def test_phases_alternate_and_predicated_ops_are_skipped():
    out = np.zeros(2, np.int32)
    two_phases_kernel[(2,)](out)
    np.testing.assert_array_equal(out, [1, 1])


def test_a_wait_missing_an_arrival_is_reported_as_a_deadlock_word_for_word():
    with pytest.raises(InterpreterError) as info:
        arrivals_kernel[(1,)](np.zeros(1, np.int32), 2, 1, 0)
    wait = line_of("mbarrier.wait(bar, PHASE)  # the arrivals wait")
    alloc = line_of("# arrivals bar")
    assert str(info.value) == (
        f"{wait}: deadlock: mbarrier.wait for phase 0 of the mbarrier allocated at {alloc} can "
        f"never return: the phase still lacks 1 of 2 arrivals; no async copy in flight will "
        f"arrive on it, and no other partition is running (program id (0, 0, 0))\n"
        f"    mbarrier.wait(bar, PHASE)  # the arrivals wait")


def test_the_report_names_which_barrier_of_an_array_and_the_phase():
    with pytest.raises(InterpreterError) as info:
        two_phases_kernel[(1,)](np.zeros(1, np.int32), True)
    wait = line_of("# phase 2 has no arrivals")
    alloc = line_of("# two bars")
    assert str(info.value).startswith(
        f"{wait}: deadlock: mbarrier.wait for phase 0 of the mbarrier allocated at {alloc} "
        f"(barrier 1) can never return: the phase still lacks 2 of 2 arrivals;")


def test_arriving_more_than_pending_is_an_error():
    with pytest.raises(InterpreterError, match=r"mbarrier arrive of count 2 on the mbarrier "
                                               r"allocated at .*, whose phase 0 has only 1 of 1 "
                                               r"arrivals pending"):
        over_arrive_kernel[(1,)]()


def test_waiting_on_an_invalidated_barrier_is_an_error():
    with pytest.raises(InterpreterError, match=r"mbarrier.wait on the mbarrier allocated at "
                                               r".*, which is not initialized"):
        uninitialized_wait_kernel[(1,)]()


def test_builtins_reject_a_non_barrier_and_bad_counts():
    import gluon
    from gluon import language as gl
    from gluon.language.nvidia.hopper import mbarrier

    @gluon.jit
    def not_a_barrier():
        buf = gl.allocate_shared_memory(gl.int32, [1], MBarrierLayout())
        mbarrier.init(buf, count=1)

    @gluon.jit
    def zero_count():
        bar = gl.allocate_shared_memory(gl.int64, [1], MBarrierLayout())
        mbarrier.init(bar, count=0)

    with pytest.raises(CompilationError, match="mbarrier must be a shared memory descriptor of "
                                               "one int64"):
        not_a_barrier[(1,)](interpret=True)
    with pytest.raises(CompilationError, match=r"count must be a compile-time int in "
                                               r"\[1, 1048575\], got 0"):
        zero_count[(1,)](interpret=True)


@gluon.jit
def loop_carried_barrier_kernel(out_ptr, N):
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    bar = bars.index(0)
    done = 0
    for i in range(N):  # `bar` is carried by the loop: its view is a phi
        mbarrier.arrive(bar)
        mbarrier.wait(bar, (i // 2) & 1)
        done += 1
        bar = bars.index((i + 1) % 2)
    gl.store(out_ptr, done)


def test_a_barrier_view_carried_by_a_loop_lowers():
    # Upstream's Blackwell attention carries barrier views through its loops (channels'
    # `acquire`); the view's (zero) swizzle part then is a phi, not a constant.
    out = np.zeros(1, np.int32)
    loop_carried_barrier_kernel[(1,)](out, 5)
    assert out[0] == 5
    ptx = gluon.compile(loop_carried_barrier_kernel, {"out_ptr": "*i32:16", "N": "i32"}, {},
                        target="sm_90a", num_warps=4).asm["ptx"]
    assert "mbarrier.arrive" in ptx and "mbarrier.try_wait.parity" in ptx


@gluon.jit
def _per_warp_consumer(bar, out_ptr, PER_WARP: gl.constexpr):
    mbarrier.arrive(bar, per_warp=PER_WARP)  # with PER_WARP each of the 4 warps, on its own


@gluon.jit
def _per_warp_waiter(bar, out_ptr, PER_WARP: gl.constexpr):
    mbarrier.wait(bar, 0)
    gl.store(out_ptr, 1)


@gluon.jit
def per_warp_kernel(out_ptr, COUNT: gl.constexpr, PER_WARP: gl.constexpr = True):
    """A 4-warp partition arrives (per warp with PER_WARP) on a barrier of COUNT; a 1-warp
    one waits."""
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=COUNT)
    gl.warp_specialize([(_per_warp_consumer, (bar, out_ptr, PER_WARP)),
                        (_per_warp_waiter, (bar, out_ptr, PER_WARP))], [1], [24])


def test_per_warp_arrivals_count_every_warp_and_need_no_barrier():
    # per_warp: lane 0 of each warp arrives, with no partition barrier first; the 4 warps'
    # arrivals complete a phase of count 4.
    out = np.zeros(1, np.int32)
    per_warp_kernel[(1,)](out, 4)
    assert out[0] == 1

    def before_arrival(per_warp):
        ptx = gluon.compile(per_warp_kernel, signature={"out_ptr": "*i32"},
                            constexprs={"COUNT": 4, "PER_WARP": per_warp},
                            num_warps=4).asm["ptx"]
        body = ptx[ptx.index("mbarrier.init"):]
        return body[:body.index("mbarrier.arrive.shared::cta.b64 _,")]
    # One thread for all: the partition's 4 warps meet first (its named barrier, 1 of 128
    # threads). Per warp: no barrier between the hand-off and the arrival.
    assert re.search(r"bar\.sync\s+1, 128;", before_arrival(False))
    assert not re.search(r"bar\.sync\s+1,", before_arrival(True))
    # Per warp, a warp barrier orders every lane's accesses before lane 0's arrival.
    assert not re.search(r"bar\.warp\.sync", before_arrival(False))
    assert "bar.warp.sync -1;" in before_arrival(True)
    # A barrier initialized for one arrival is over-arrived by 4 warps.
    with pytest.raises(InterpreterError, match=r"mbarrier arrive of count 4 on the mbarrier "
                                               r"allocated at .*, whose phase 0 has only 1 of 1 "
                                               r"arrivals pending"):
        per_warp_kernel[(1,)](out, 1)
    with pytest.raises(CompilationError, match=r"per_warp must be a compile-time bool, got 1"):
        gluon.jit(_bad_per_warp)[(1,)](out)


def _bad_per_warp(out_ptr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.arrive(bar, per_warp=1)
