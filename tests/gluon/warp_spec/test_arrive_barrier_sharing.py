"""An mbarrier arrival is one thread's, so lowering puts a barrier of the threads running the
code before it (they must all be done with what it releases). Arrivals in a row share that
barrier when nothing between them could still be in flight in another thread: barrier
operations, wgmma issues, views and scalar arithmetic, and wgmma waits in a single
warpgroup. A generic shared-memory read, or a wgmma wait in two warpgroups (thread 0 waits
only for its own), gets a barrier of its own again."""

import re

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait
from gluon.nvidia.hopper import TensorDescriptor

SMEM = gl.NVMMASharedLayout(128, 16)


@gluon.jit
def _release_two_stages(a_ptr, out_ptr, NUM_WARPS: gl.constexpr, READ_BETWEEN: gl.constexpr,
                        PRED_SECOND: gl.constexpr):
    BM: gl.constexpr = 16 * NUM_WARPS
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [NUM_WARPS, 1], [1, 0])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 64, 16])
    rows = gl.arange(0, BM, gl.SliceLayout(1, load_layout))
    cols = gl.arange(0, 64, gl.SliceLayout(0, load_layout))
    offs = gl.expand_dims(rows, 1) * 64 + gl.expand_dims(cols, 0)
    a = gl.allocate_shared_memory(gl.float16, [BM, 64], SMEM, gl.load(a_ptr + offs))
    b = gl.allocate_shared_memory(gl.float16, [BM, 64], SMEM, gl.load(a_ptr + offs))
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(2):
        mbarrier.init(empty.index(s), count=1)
    acc = warpgroup_mma(a, b.slice(0, 64).permute([1, 0]),
                        gl.zeros([BM, 64], gl.float32, acc_layout), is_async=True)
    mbarrier.arrive(empty.index(0))
    acc = warpgroup_mma_wait(0, deps=[acc])
    if READ_BETWEEN:
        gl.store(out_ptr + offs, a.load(load_layout).to(gl.float32))
    mbarrier.arrive(empty.index(1), pred=PRED_SECOND)
    out_rows = gl.arange(0, BM, gl.SliceLayout(1, acc_layout))
    out_cols = gl.arange(0, 64, gl.SliceLayout(0, acc_layout))
    gl.store(out_ptr + gl.expand_dims(out_rows, 1) * 64 + gl.expand_dims(out_cols, 0), acc)


def _between_the_arrivals(num_warps, read_between, pred_second=True):
    """The PTX lines between the two arrivals on `empty` (the last two arrive lines)."""
    compiled = gluon.compile(
        _release_two_stages, {"a_ptr": "*fp16:16", "out_ptr": "*fp32:16"},
        {"NUM_WARPS": num_warps, "READ_BETWEEN": read_between, "PRED_SECOND": pred_second},
        target="sm_90a", num_warps=num_warps)
    assert len(compiled.asm["cubin"]) > 0
    lines = compiled.asm["ptx"].splitlines()
    arrives = [i for i, line in enumerate(lines) if "mbarrier.arrive.shared::cta.b64" in line]
    assert len(arrives) == 2, arrives
    # The first arrival is ordered by a barrier: the one before the wgmma reads a and b
    # after their stores, with only the wgmma's issue between them.
    last_bar = max(i for i in range(arrives[0]) if "bar.sync" in lines[i])
    assert not any(re.search(r"\b(ld|st)\.shared|mbarrier\.", line)
                   for line in lines[last_bar + 1:arrives[0]])
    assert any("wgmma.mma_async" in line for line in lines[last_bar + 1:arrives[0]])
    return "\n".join(lines[arrives[0]:arrives[1]])


@pytest.mark.parametrize("pred_second", [True, False])
def test_one_warpgroup_shares_the_barrier_across_a_wgmma_wait(pred_second):
    between = _between_the_arrivals(4, False, pred_second)
    assert "wgmma.wait_group.sync.aligned 0" in between
    assert "bar.sync" not in between


def test_two_warpgroups_sync_again_after_the_wgmma_wait():
    between = _between_the_arrivals(8, False)
    assert re.search(r"wgmma\.wait_group\.sync\.aligned 0;[\s\S]*bar\.sync", between)


def test_a_generic_shared_read_between_gets_a_barrier():
    between = _between_the_arrivals(4, True)
    assert re.search(r"ld\.shared[\s\S]*bar\.sync", between)
