"""`async_copy.mbarrier_arrive` (`cp.async.mbarrier.arrive`): cp.async copies completed through
an mbarrier instead of commit groups, in the interpreter and in PTX."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.ampere import async_copy, mbarrier
from gluon.language.nvidia.hopper import mbarrier as hopper_mbarrier
from shared_codegen.interpreter.memory import InterpreterError


@gluon.jit
def copy_through_mbarrier_kernel(inp, out, xnumel, XBLOCK: gl.constexpr, YBLOCK: gl.constexpr,
                                 NOINC: gl.constexpr, BAR_COUNT: gl.constexpr,
                                 WAIT: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float32, [XBLOCK, YBLOCK],
                                     gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0]))
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [4, 1], [1, 0])
    xs = gl.arange(0, XBLOCK, gl.SliceLayout(1, layout))[:, None]
    ys = gl.arange(0, YBLOCK, gl.SliceLayout(0, layout))[None, :]
    async_copy.async_copy_global_to_shared(smem, inp + xs * YBLOCK + ys, xs < xnumel)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=BAR_COUNT)
    if NOINC:
        async_copy.mbarrier_arrive(bar, increment_count=False)
    else:
        async_copy.mbarrier_arrive(bar)
        mbarrier.arrive(bar)
    if WAIT:
        mbarrier.wait(bar, 0)
    gl.store(out + xs * YBLOCK + ys, smem.load(layout))


def _run(noinc, count, wait=True):
    inp = np.random.default_rng(0).standard_normal((20, 32)).astype(np.float32)
    out = np.full((32, 32), 7.0, np.float32)
    copy_through_mbarrier_kernel[(1,)](inp, out, 20, XBLOCK=32, YBLOCK=32, NOINC=noinc,
                                       BAR_COUNT=count, WAIT=wait, num_warps=4)
    return inp, out


@pytest.mark.parametrize("noinc,count", [(False, 1), (True, 128)])
def test_copies_are_visible_after_the_mbarrier_wait(noinc, count):
    inp, out = _run(noinc, count)
    np.testing.assert_array_equal(out[:20], inp)
    np.testing.assert_array_equal(out[20:], 0.0)  # masked off: zero-filled


def test_reading_before_the_wait_is_a_race():
    with pytest.raises(InterpreterError) as info:
        _run(False, 1, wait=False)
    assert "race: local_load reads shared memory that the async copy at" in str(info.value)


def test_noinc_arrivals_beyond_the_barrier_count_are_reported():
    # 128 threads each arrive once with increment_count=False; a count of 1 cannot take them.
    with pytest.raises(InterpreterError) as info:
        _run(True, 1)
    text = str(info.value)
    assert "mbarrier arrive of count 128 on the mbarrier allocated at" in text
    assert "has only 1 of 1 arrivals pending" in text


# sm_80 uses the pre-Hopper mbarrier forms (ops/mbarrier/lowering.py).
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("noinc", [False, True])
def test_ptx_arrives_from_every_thread(target, noinc):
    sig = {"inp": "*fp32:16", "out": "*fp32:16", "xnumel": "i32"}
    consts = dict(XBLOCK=32, YBLOCK=32, NOINC=noinc, BAR_COUNT=128 if noinc else 1, WAIT=True)
    ptx = gluon.compile(copy_through_mbarrier_kernel, sig, consts, target=target).asm["ptx"]
    arrive = "cp.async.mbarrier.arrive.noinc.shared.b64" if noinc else \
        "cp.async.mbarrier.arrive.shared.b64"
    assert ptx.count(arrive) == 1
    line = next(l for l in ptx.splitlines() if "cp.async.mbarrier.arrive" in l)
    assert not line.strip().startswith("@")  # not predicated on thread 0
    assert ("cp.async.mbarrier.arrive.shared" in ptx) == (not noinc)
    assert "cp.async.commit_group" not in ptx
    if target == "sm_80":
        assert "mbarrier.test_wait.parity.shared.b64" in ptx and "::cta" not in ptx
        assert "fence.proxy.async" not in ptx
    else:
        assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx


@gluon.jit
def _cp_async_producer(src, smem, bar, N: gl.constexpr):
    # One warp: 32 threads, each arriving once without increment (.noinc).
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [1], [0])
    offs = gl.arange(0, N, layout=layout)
    async_copy.async_copy_global_to_shared(smem, src + offs)
    async_copy.mbarrier_arrive(bar, increment_count=False)


@gluon.jit
def _cp_async_consumer(src, smem, bar, out, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    mbarrier.wait(bar, 0)
    gl.store(out + gl.arange(0, N, layout=layout), smem.load(layout) * 2.0)


@gluon.jit
def ws_cp_async_kernel(src, out, N: gl.constexpr, BAR_COUNT: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=BAR_COUNT)
    gl.warp_specialize([(_cp_async_consumer, (src, smem, bar, out, N)),
                        (_cp_async_producer, (src, smem, bar, N))], [1], [24])


def test_noinc_arrivals_count_the_threads_of_the_partition():
    src = np.arange(128, dtype=np.float32)
    out = np.zeros_like(src)
    ws_cp_async_kernel[(1,)](src, out, 128, BAR_COUNT=32, num_warps=4)  # the worker's 32
    np.testing.assert_array_equal(out, src * 2)
    with pytest.raises(InterpreterError, match="mbarrier arrive of count 32 on"):
        ws_cp_async_kernel[(1,)](src, out, 128, BAR_COUNT=16, num_warps=4)


def test_ws_cp_async_kernel_compiles_with_the_arrive_in_the_worker():
    ptx = gluon.compile(ws_cp_async_kernel, {"src": "*fp32:16", "out": "*fp32:16"},
                        {"N": 128, "BAR_COUNT": 32}, target="sm_90a").asm["ptx"]
    assert ptx.count("cp.async.mbarrier.arrive.noinc.shared.b64") == 1
    assert "cp.async.ca.shared.global" in ptx or "cp.async.cg.shared.global" in ptx


@gluon.jit
def expect_kernel(out):
    bar = gl.allocate_shared_memory(gl.int64, [1], hopper_mbarrier.MBarrierLayout())
    hopper_mbarrier.init(bar, count=1)
    hopper_mbarrier.expect(bar, 0)
    hopper_mbarrier.wait(bar, 0)
    gl.store(out, 1)


def test_transaction_counts_need_sm90_in_the_users_terms():
    from shared_codegen.errors import KernelError
    with pytest.raises(KernelError, match=r"mbarrier.expect \(transaction bytes, for TMA\) "
                                          r"needs sm_90 or later; the target is sm_80"):
        gluon.compile(expect_kernel, {"out": "*i32"}, {}, target="sm_80")
    assert "mbarrier.arrive.expect_tx" in gluon.compile(expect_kernel, {"out": "*i32"}, {},
                                                        target="sm_90a").asm["ptx"]
