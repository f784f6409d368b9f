"""gluon/stages.py and SC_DUMP_IR_DIR: every stage is dumped, and the planning stages' dumps
show what they decided (the warp plan, shared-memory offsets, alias sets, axis facts)."""

import pytest
from ws_kernels import arange2d, desc, producer_consumer_kernel

import gluon
import shared_codegen.frontend.compile as compile_mod
from gluon.passes import GLUON_PIPELINE
from gluon.stages import GLUON_STAGES
from shared_codegen.stages import BACKEND_STAGES


def test_the_stages_are_the_gluon_passes_then_the_shared_backend_stages():
    names = [name for name, _ in GLUON_STAGES]
    assert names[:len(GLUON_PIPELINE)] == [name for name, _ in GLUON_PIPELINE]
    assert GLUON_STAGES[len(GLUON_PIPELINE):] == BACKEND_STAGES


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stages")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SC_DUMP_IR_DIR", str(folder))
        mp.setenv("SC_CACHE_DISABLE", "1")
        mp.setattr(compile_mod, "_DISK_CACHE", None)
        d = desc(arange2d(64 * 4, 64), [64, 64])
        gluon.compile(producer_consumer_kernel, {"in_desc": d, "out_ptr": "*fp16:16"},
                      {"NUM_TILES": 4, "STAGES": 2}, target="sm_90a")
    return {p.name.split("-", 1)[1][:-len(".mlir")]: p.read_text()
            for p in sorted(folder.iterdir())}


def test_every_stage_is_dumped_in_order(dumps):
    assert list(dumps) == ["input"] + [name for name, _ in GLUON_STAGES]


def test_the_warp_plan_is_on_the_op_from_its_stage_on(dumps):
    assert "total_warps" not in dumps["axis_analysis"]
    plan = dumps["warp_specialization_planning"]
    assert "total_warps = 8" in plan and "starts = [4]" in plan
    assert "warpgroup_regs = [1:24]" in plan


def test_shared_memory_offsets_are_on_the_allocations(dumps):
    assert "offset = " not in dumps["warp_specialization_planning"]
    allocated = dumps["shared_memory_allocation"]
    allocs = [line for line in allocated.splitlines() if "ttg.local_alloc" in line]
    assert allocs and all("offset = " in line for line in allocs)
    assert "// static shared memory: " in allocated


def test_barrier_insertion_and_axis_analysis_record_their_facts(dumps):
    assert "// bar.sync goes before an access that conflicts" in dumps["barrier_insertion"]
    assert "-> offsets [" in dumps["barrier_insertion"]
    facts = dumps["axis_analysis"]
    assert "// out_ptr: !ptr<fp16> {contiguity = [1], divisibility = [16]" in facts


def test_lowering_lists_the_barriers_it_placed(dumps):
    lowered = dumps["lower_to_llvm"]
    assert "// bar.sync placed while lowering" in lowered
    # The consumer's barrier before its one-thread arrival on `empty` (its 4 warps are done
    # reading the stage): a named one, for the default partition's 4 warps, and the only one.
    # The mbarrier inits before the fork are one thread's, ordered for the others by the
    # hand-off barrier, which is not listed.
    assert "// bar.sync placed while lowering (shared-memory hazards, thread_barrier, " \
           "scratch reuse; not the warp-specialization hand-off and join): 1\n" \
           "//   bar.sync 1, 128 in ttng.arrive_barrier at ws_kernels.py:63" in lowered


def test_the_backend_stages_dump_llvm_ir_ptx_and_the_cubin_size(dumps):
    assert "// LLVM IR" in dumps["lower_to_llvm"] and "define " in dumps["lower_to_llvm"]
    assert "// PTX:" in dumps["llvm_to_ptx"] and ".maxnreg" in dumps["llvm_to_ptx"]
    assert "// cubin: " in dumps["ptx_to_cubin"]
