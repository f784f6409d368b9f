"""gl.warp_specialize in the interpreter: partitions run as cooperative threads that switch at
mbarrier waits; producer/consumer pipelines compute the right thing; a deadlock across
partitions and a race across partitions are reported word for word; bad partitions are
rejected at trace time with the user's numbers."""

import numpy as np
import pytest
from ws_kernels import (arange2d, bad_regs_kernel, deadlock_kernel, desc, line_of,
                        per_warp_pipeline_kernel, pingpong_order_kernel, pipeline_sum_kernel,
                        producer_consumer_kernel, racy_kernel, register_pipeline_kernel,
                        results_kernel, tensor_capture_kernel, two_workers_kernel)

import gluon
from gluon import language as gl
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_tma_producer_feeds_the_default_partition_through_a_ring(stages):
    a = arange2d(64 * 5, 64)
    out = np.zeros((5, 64, 64), np.float16)
    producer_consumer_kernel[(1,)](desc(a, [64, 64]), out, 5, stages)
    np.testing.assert_array_equal(out.reshape(-1, 64), a + 1)


def test_every_program_runs_its_own_partitions():
    a = arange2d(64 * 2, 64)
    out = np.zeros((2, 64, 64), np.float16)
    producer_consumer_kernel[(3,)](desc(a, [64, 64]), out, 2, 2)
    np.testing.assert_array_equal(out.reshape(-1, 64), a + 1)


def test_the_pipeline_helper_counts_stages_and_phases():
    a = arange2d(64 * 7, 64)
    out = np.zeros((64, 64), np.float32)
    pipeline_sum_kernel[(1,)](desc(a, [64, 64]), out, 7, 3)
    np.testing.assert_allclose(out, a.astype(np.float32).reshape(7, 64, 64).sum(0))


@pytest.mark.parametrize("num", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pingpong_turns_go_round_robin(num, seed, monkeypatch):
    monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
    log = np.zeros(1, np.int64)
    pingpong_order_kernel[(1,)](log, num, 3)
    digits = [int(d) for d in np.base_repr(int(log[0]), num).rjust(3 * num, "0")]
    assert digits == list(range(num)) * 3


def test_a_register_producer_commits_stages_with_arrivals():
    x = np.arange(32 * 9, dtype=np.float32)
    out = np.zeros_like(x)
    register_pipeline_kernel[(1,)](x, out, 9, 2)
    np.testing.assert_array_equal(out, 2 * x)


def test_a_producer_whose_warps_commit_each_on_its_own_fills_stages():
    # PRODUCER_ARRIVALS = 4: a stage is full once all four warps have committed their rows.
    x = np.arange(512 * 5, dtype=np.float32)
    out = np.zeros_like(x)
    per_warp_pipeline_kernel[(1,)](x, out, 5, 2)
    np.testing.assert_array_equal(out, 2 * x)


def test_partitions_see_their_own_warps_and_the_default_returns_values():
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(66, np.float32)
    results_kernel[(1,)](x, out, 3.0)
    np.testing.assert_array_equal(out[32:64], x[:32] * 6 + 1)  # worker: num_warps() == 1
    assert out[64] == x.sum() and out[65] == 4                 # default: num_warps() == 4


def test_a_deadlock_across_partitions_is_reported_word_for_word():
    with pytest.raises(InterpreterError) as info:
        deadlock_kernel[(1,)]()
    fork = line_of("# the fork")
    alloc = line_of("# 2 bars")
    mine = line_of("# the default partition's wait")
    theirs = line_of("# the worker's wait")
    assert str(info.value) == (
        f"{fork}: deadlock: every partition of gl.warp_specialize is blocked "
        f"(program id (0, 0, 0))\n"
        f"    gl.warp_specialize([(_waits_for_worker, (bars.index(0), bars.index(1))),  "
        f"# the fork\n"
        f"  default partition `_waits_for_worker` (4 warps) waits at {mine} for phase 0 of "
        f"the mbarrier allocated at {alloc} (barrier 0): the phase still lacks 1 of 1 "
        f"arrivals\n"
        f"      mbarrier.wait(mine, 0)  # the default partition's wait\n"
        f"  worker partition 0 `_waits_for_default` (1 warp) waits at {theirs} for phase 0 "
        f"of the mbarrier allocated at {alloc} (barrier 1): the phase still lacks 1 of 1 "
        f"arrivals\n"
        f"      mbarrier.wait(mine, 0)  # the worker's wait")


def test_reading_a_buffer_another_partition_is_loading_is_a_race_word_for_word():
    a = arange2d(64, 64)
    with pytest.raises(InterpreterError) as info:
        racy_kernel[(1,)](desc(a, [64, 64]), np.zeros((64, 64), np.float16))
    read = line_of("# reads before waiting on `full`")
    load = line_of("# the racing load")
    alloc = line_of("# race bars")
    assert str(info.value) == (
        f"{read}: race: local_load reads shared memory that the TMA load at {load} may still "
        f"be writing; wait on the mbarrier allocated at {alloc} (barrier 1) until it "
        f"observes the phase the load completes (mbarrier.expect(bar, nbytes) before the "
        f"load, mbarrier.wait(bar, phase) before reading) (program id (0, 0, 0))\n"
        f"    x = smem.load(BLOCKED)  # reads before waiting on `full`")


def test_a_register_tensor_cannot_be_passed_to_a_worker():
    with pytest.raises(CompilationError, match=r"the arguments of worker partition 0 "
                       r"\(`_takes_tensor`\)\[0\] is a register tensor .* store it to shared "
                       r"memory and pass the descriptor"):
        tensor_capture_kernel[(1,)](np.zeros(128, np.float32))


@pytest.mark.parametrize("regs, warps, message", [
    (20, 1, r"worker_num_regs\[0\] must be a multiple of 8 in \[24, 256\] \(setmaxnreg\), "
            r"got 20 \(worker partition 0 \(`_nothing`\)\)"),
    (260, 1, r"worker_num_regs\[0\] must be a multiple of 8 in \[24, 256\]"),
    (28, 1, r"got 28"),
    (24, 3, r"worker_num_warps\[0\] must be a power of two, got 3"),
    (24, 32, r"needs 36 warps \(4 default \+ 32 workers, padded to warpgroups\), more than "
             r"the 32 a CTA can have"),
])
def test_bad_warp_and_register_counts_name_the_value_and_the_limit(regs, warps, message):
    with pytest.raises(CompilationError, match=message):
        bad_regs_kernel[(1,)](regs, warps)


def test_workers_sharing_a_warpgroup_must_agree_on_registers():
    with pytest.raises(CompilationError, match=r"worker partitions sharing warpgroup 1 "
                       r"\(warps 4-7\) request different register counts \(0 \(`_nothing`\): "
                       r"24, 1 \(`_nothing`\): 40\); setmaxnreg sets one count per warpgroup"):
        two_workers_kernel[(1,)]()


def test_the_default_partition_must_be_whole_warpgroups():
    with pytest.raises(CompilationError, match=r"needs num_warps to be a multiple of 4 .* "
                       r"got num_warps=2"):
        bad_regs_kernel[(1,)](24, 1, num_warps=2)


def test_partitions_must_be_jitted_functions():
    def plain():
        pass

    @gluon.jit
    def kernel():
        gl.warp_specialize([(plain, ())], [], [])

    with pytest.raises(CompilationError, match=r"the default partition: partition functions "
                       r"must be @gluon.jit functions, got 'plain'"):
        kernel[(1,)]()


def test_triton_34_argument_order_is_accepted():
    @gluon.jit
    def _store_one(ptr):
        gl.store(ptr, 1)

    @gluon.jit
    def _store_two(ptr):
        gl.store(ptr + 1, 2)

    @gluon.jit
    def kernel(ptr):
        gl.warp_specialize((ptr,), _store_one, [(ptr,)], [_store_two], [1], [24])

    out = np.zeros(2, np.int32)
    kernel[(1,)](out)
    np.testing.assert_array_equal(out, [1, 2])


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_a_tma_producer_and_a_wgmma_consumer_compute_a_matmul_tile(stages):
    from ws_kernels import ws_matmul_kernel
    rng = np.random.default_rng(stages)
    a = rng.standard_normal((64, 320)).astype(np.float16)
    b = rng.standard_normal((320, 64)).astype(np.float16)
    out = np.zeros((64, 64), np.float32)
    ws_matmul_kernel[(1,)](desc(a, [64, 64]), desc(b, [64, 64]), out, 5, stages)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)
