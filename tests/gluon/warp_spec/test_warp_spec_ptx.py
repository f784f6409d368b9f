"""gl.warp_specialize lowering: warp placement and register budgets (WarpPlan), the PTX of
warpgroup-role branches (setmaxnreg, named barriers, .maxnreg / .maxntid), cubins for sm_90a
built on the CPU, and what lowering refuses."""

import re

import numpy as np
import pytest
from ws_kernels import (arange2d, desc, per_warp_pipeline_kernel, pipeline_sum_kernel,
                        producer_consumer_kernel, register_pipeline_kernel, results_kernel)

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier
from gluon.warp_spec import WarpPlan
from shared_codegen.lowering.context import LoweringError


def _compile(kernel, signature, constexprs=None, num_warps=4):
    compiled = gluon.compile(kernel, signature, constexprs or {}, target="sm_90a",
                             num_warps=num_warps)
    assert len(compiled.asm["cubin"]) > 0  # nvJitLink assembled it for sm_90a
    return compiled


# ---- WarpPlan (pure Python) ------------------------------------------------------------------

def test_a_gemm_shaped_plan_gives_the_consumers_the_producers_registers():
    plan = WarpPlan.make(8, [4], [40])
    assert plan.starts == (8,) and plan.total_warps == 12
    assert plan.entry_regs == 168                  # 65536 / 384 threads, a multiple of 8
    assert plan.warpgroup_regs == ((2, 40),)
    assert plan.default_regs == 232                # (65536 - 40 * 128) / 256, down to 8
    assert plan.default_regs * 256 + 40 * 128 <= 65536


def test_workers_are_placed_largest_first_and_padded_to_a_warpgroup():
    plan = WarpPlan.make(4, [1, 4, 2], [24, 24, 24])
    assert plan.starts == (10, 4, 8) and plan.total_warps == 12
    assert plan.warpgroup_regs == ((1, 24), (2, 24))
    assert [plan.barrier_id(i) for i in range(3)] == [2, 3, 4]


def test_a_padding_only_warpgroup_releases_down_to_the_minimum():
    plan = WarpPlan.make(4, [1], [32])
    assert plan.total_warps == 8 and plan.warpgroup_regs == ((1, 32),)
    assert plan.entry_regs == 256 and plan.default_regs == 256


def test_registers_the_workers_leave_must_reach_the_minimum():
    with pytest.raises(ValueError, match=r"\(\[256, 256\]\) take 65536 of the CTA's "
                                         r"65536 registers \(128 per thread at launch\), leaving "
                                         r"the 8 default warps 0 per "
                                         r"thread, under setmaxnreg's minimum of 24"):
        WarpPlan.make(8, [4, 4], [256, 256])
    assert WarpPlan.make(8, [4, 4], [232, 232]).default_regs == 24
    # Only the registers the CTA was launched with can move: 12 warps start at 168 each
    # (64512 registers, not 65536), so 240 + 232 + 40 would make setmaxnreg.inc wait forever.
    plan = WarpPlan.make(4, [4, 1], [232, 40])
    assert plan.entry_regs == 168 and plan.default_regs == 232
    assert WarpPlan.make(4, [4, 1], [240, 24]).default_regs == 240


# ---- PTX -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pipeline_ptx():
    d = desc(arange2d(64 * 4, 64), [64, 64])
    compiled = _compile(producer_consumer_kernel, {"in_desc": d, "out_ptr": "*fp16:16"},
                        {"NUM_TILES": 4, "STAGES": 2})
    assert compiled.num_warps == 8  # 4 default + 1 worker, padded to a warpgroup
    return compiled.asm["ptx"]


def test_the_kernel_starts_with_a_register_cap_for_all_its_warps(pipeline_ptx):
    assert ".maxntid 256" in pipeline_ptx and ".maxnreg 255" in pipeline_ptx


def test_the_producer_warpgroup_releases_registers(pipeline_ptx):
    assert re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+\d+", pipeline_ptx) == \
        ["setmaxnreg.dec.sync.aligned.u32 \t24"]


def test_partitions_synchronize_on_their_own_named_barriers(pipeline_ptx):
    barriers = set(re.findall(r"bar\.sync\s+([^;]+);", pipeline_ptx))
    # 0: the whole CTA, only at the hand-off and the join; 1: the 4 default warps. The TMA
    # producer needs none: its waits, expects and copies are mbarrier / async operations,
    # and no mbarrier.init runs inside the partition (shared_memory_rules.sync_shared).
    assert barriers == {"0", "1, 128"}
    assert len(re.findall(r"bar\.sync\s+0;", pipeline_ptx)) == 4
    assert "mbarrier.try_wait.parity.shared::cta.b64" in pipeline_ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" \
        in pipeline_ptx


def test_a_worker_that_stores_with_registers_syncs_on_its_own_named_barrier():
    compiled = _compile(register_pipeline_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                        {"NUM_TILES": 4, "STAGES": 2})
    barriers = set(re.findall(r"bar\.sync\s+([^;]+);", compiled.asm["ptx"]))
    # 2: the producer's one warp, before its one thread arrives for all 32.
    assert barriers == {"0", "1, 128", "2, 32"}


def test_per_warp_commits_sync_the_warp_not_the_partition():
    # Each of the default partition's warps: its stores, the proxy fence, a warp barrier
    # (orders the lanes' stores before lane 0's release), lane 0's arrival, with no barrier
    # of the partition's 4 warps (named barrier 1) in between. (The one at the top of each
    # iteration orders a stage's stores after other threads' stores of the last one: the
    # hazard analysis does not tell stages apart.)
    ptx = _compile(per_warp_pipeline_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                   {"NUM_TILES": 4, "STAGES": 2}).asm["ptx"]
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%rd\d+\], 4;", ptx)) == 2
    commits = re.findall(r"\tfence\.proxy\.async\.shared::cta;((?:.|\n)*?)"
                         r"mbarrier\.arrive\.shared::cta\.b64 _, \[%rd\d+\], 1;", ptx)
    assert commits and all("bar.warp.sync -1;" in c and not re.search(r"bar\.sync\s", c)
                           for c in commits), commits


def test_the_worker_issues_from_its_own_first_thread(pipeline_ptx):
    # thread 0 of the producer is CTA thread 128: the TMA issue is predicated on it.
    assert re.search(r"setp\.eq\.b32\s+%p\d+, %r\d+, 128;", pipeline_ptx)


def test_a_gemm_shaped_split_grows_the_consumers_and_shrinks_the_producer():
    @gluon.jit
    def _consume(bar):
        mbarrier.wait(bar, 0)

    @gluon.jit
    def _produce(bar):
        mbarrier.arrive(bar)

    @gluon.jit
    def kernel():
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        gl.warp_specialize([(_consume, (bar,)), (_produce, (bar,))], [4], [40])

    ptx = _compile(kernel, {}, num_warps=8).asm["ptx"]
    assert ".maxntid 384" in ptx and ".maxnreg 168" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 \t232;" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 \t40;" in ptx
    assert set(re.findall(r"bar\.sync\s+([^;]+);", ptx)) <= {"0", "1, 256", "2, 128"}
    assert "bar.sync \t2, 128;" in ptx  # the barrier before the producer's arrive


def test_runtime_captures_go_through_shared_memory_and_thread_barrier_is_named():
    ptx = _compile(results_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                                    "scale": "fp32"}).asm["ptx"]
    # out_ptr + 32 and scale * 2 are computed by the default warps: published, then read.
    assert len(re.findall(r"st\.shared\.b\d+\s+\[global_smem", ptx)) == 2
    assert len(re.findall(r"ld\.shared\.b\d+\s+%\w+, \[global_smem", ptx)) == 2
    assert "bar.sync \t2, 32;" in ptx  # the worker's gl.thread_barrier()
    assert "setmaxnreg.dec.sync.aligned.u32 \t32;" in ptx


def test_pipeline_kernels_assemble():
    d = desc(arange2d(64 * 4, 64), [64, 64])
    _compile(pipeline_sum_kernel, {"in_desc": d, "out_ptr": "*fp32:16"},
             {"NUM_TILES": 4, "STAGES": 2})
    ptx = _compile(register_pipeline_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                   {"NUM_TILES": 4, "STAGES": 2}).asm["ptx"]
    assert "fence.proxy.async.shared::cta" in ptx


def test_setmaxnreg_kernels_always_load_through_the_driver_jit(monkeypatch):
    # nvJitLink's ptxas drops setmaxnreg; whether its log says so (C7504) must not decide,
    # or a consumer warpgroup runs with the entry budget and spills (seen on the H100).
    from shared_codegen.lowering import backend

    assemble = backend.ptx_to_cubin
    monkeypatch.setattr(backend, "ptx_to_cubin", lambda ptx, target, extra_opts=(): (
        assemble(ptx, target, extra_opts)[0], ""))
    d = desc(arange2d(64 * 4, 64), [64, 64])
    ws = _compile(producer_consumer_kernel, {"in_desc": d, "out_ptr": "*fp16:16"},
                  {"NUM_TILES": 4, "STAGES": 3})
    assert "setmaxnreg" in ws.asm["ptx"] and ws.metadata["driver_jit"] is True
    plain = _compile(_stores_one, {"out_ptr": "*fp32:16"})
    assert "setmaxnreg" not in plain.asm["ptx"] and plain.metadata["driver_jit"] is False


@gluon.jit
def _stores_one(out_ptr):
    gl.store(out_ptr, 1.0)


# ---- what lowering refuses -------------------------------------------------------------------

@gluon.jit
def _nothing():
    pass


@gluon.jit
def ws_in_loop_kernel(n):
    for _ in range(n):
        gl.warp_specialize([(_nothing, ()), (_nothing, ())], [1], [24])


def test_warp_specialize_must_be_at_the_top_level_for_lowering():
    with pytest.raises(LoweringError, match="must be called at the top level of the kernel"):
        gluon.compile(ws_in_loop_kernel, {"n": "i32"}, target="sm_90a")
    ws_in_loop_kernel[(1,)](2)  # the interpreter runs it


def test_a_warp_specialized_wgmma_tile_has_every_hopper_instruction():
    from ws_kernels import ws_matmul_kernel
    a = np.zeros((64, 256), np.float16)
    b = np.zeros((256, 64), np.float16)
    compiled = _compile(ws_matmul_kernel, {"a_desc": desc(a, [64, 64]),
                                           "b_desc": desc(b, [64, 64]), "out_ptr": "*fp32:16"},
                        {"K_TILES": 4, "STAGES": 2})
    ptx = compiled.asm["ptx"]
    for text in ("wgmma.mma_async.sync.aligned", "cp.async.bulk.tensor.2d",
                 "mbarrier.try_wait.parity", "setmaxnreg.dec.sync.aligned.u32"):
        assert text in ptx, text
    # The TMA producer needs no named barrier (see the test above).
    assert set(re.findall(r"bar\.sync\s+([^;]+);", ptx)) == {"0", "1, 128"}
