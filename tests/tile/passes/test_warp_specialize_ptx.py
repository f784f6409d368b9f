"""The PTX and sm_90a cubins (nvJitLink, on the CPU) of warp-specialized tile loops: the
producer warpgroup releases registers down to 24 with setmaxnreg and issues the TMA loads
after its mbarrier waits, the default warps run the wgmmas and the releases; worker warps
come on top of num_warps, padded to a warpgroup, and the default warps take the registers
the producer leaves (WarpPlan); a num_warps=4 kernel with 128 rows has 8 default warps."""

import os
import re
import sys

import numpy as np
import pytest

import tile

sys.path.insert(0, os.path.dirname(__file__))
from tile_ws_kernels import (descriptors, matmul_descriptor_persistent,  # noqa: E402
                             matmul_tma, persistent_matmul)

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


def _compile(kernel, num_warps, block, constexprs):
    a = np.zeros((512, 512), np.float16)
    ad, bd, cd = descriptors(a, a, a, *block)
    sig = {"a_desc": ad, "b_desc": bd, "c_desc": cd, "M": "i32", "N": "i32", "K": "i32"}
    return tile.compile(kernel, sig, target="sm_90a", num_warps=num_warps,
                        constexprs=constexprs)


def _persistent(block):
    bm, bn, bk = block
    return dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_SMS=132, WS=True)


def _partitions(ptx: str):
    """(producer, consumer) PTX. The kernel's first branch sends the default warps to their
    path and lets the others fall through to the worker path, which LLVM lays out first:
    the producer runs from its setmaxnreg to the default path's label."""
    default = re.search(r"@%p\d+ bra \t(\$L__BB\d+_\d+);", ptx).group(1)
    start = ptx.index("setmaxnreg.dec.sync.aligned.u32 \t24;")
    end = ptx.index(f"\n{default}:")
    assert start < end
    return ptx[start:end], ptx[end:]


TMA = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, WARP_SPECIALIZE=True)


@pytest.mark.parametrize("kernel,constexprs", [(matmul_tma, TMA),
                                               (persistent_matmul, _persistent((64, 64, 64)))])
def test_the_producer_issues_the_loads_and_the_consumer_the_wgmmas(kernel, constexprs):
    compiled = _compile(kernel, 4, (64, 64, 64), constexprs)
    assert compiled.asm["cubin"]  # nvJitLink assembled it for sm_90a
    producer, consumer = _partitions(compiled.asm["ptx"])
    assert TMA_LOAD in producer and "mbarrier.try_wait.parity" in producer
    assert "mbarrier.arrive.expect_tx" in producer and "wgmma" not in producer
    assert TMA_LOAD not in consumer and "mbarrier.try_wait.parity" in consumer
    assert "wgmma.mma_async" in consumer and "wgmma.wait_group.sync.aligned 1;" in consumer
    assert re.search(r"mbarrier\.arrive\.shared::cta\.b64 _, \[%rd\d+\], 1;", consumer)
    # The default warps' releases sync only their own warps (bar 1), never the producer.
    assert "bar.sync \t1, 128;" in consumer


@pytest.mark.parametrize("num_warps,block_m,total,entry,default", [
    (4, 64, 8, 255, None),   # 64 rows: one consumer warpgroup, the launch's 4 warps
    (4, 128, 12, 168, 240),  # 128 rows: two, as Triton 3.6 (test_warp_specialize_warps.py)
    (8, 128, 12, 168, 240),
])
def test_worker_warps_come_on_top_of_num_warps(num_warps, block_m, total, entry, default):
    block = (block_m, 128, 64)
    compiled = _compile(persistent_matmul, num_warps, block, _persistent(block))
    ptx = compiled.asm["ptx"]
    assert compiled.num_warps == total
    assert f".maxntid {32 * total}" in ptx and f".maxnreg {entry}" in ptx
    # 4 default warps keep the launch share (256, no .inc needed); 8 take 240 of 168.
    incs = re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+(\d+)", ptx)
    assert incs == ([] if default is None else [str(default)])
    assert re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+(\d+)", ptx) == ["24"]


def test_kernel_built_descriptors_reach_the_producer_through_their_scratch_pointer():
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32",
           "N": "i32", "K": "i32"}
    compiled = tile.compile(matmul_descriptor_persistent, sig, target="sm_90a", num_warps=8,
                            constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                                            NUM_SMS=132, WARP_SPECIALIZE=True))
    ir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    worker = ir[ir.index("\n  } {\n"):]
    # The producer takes each map's global-scratch pointer and acquires the map for the
    # tensor-map proxy itself (the default warps wrote it before the hand-off).
    assert worker.count("ttng.tensormap_fenceproxy_acquire") == 2
    assert worker.count("ttng.reinterpret_tensor_descriptor") == 2
    assert worker.splitlines()[2].count(": !ptr<i8>") == 2  # the worker's block arguments
    producer, _ = _partitions(ptx)
    assert producer.count("fence.proxy.tensormap::generic.acquire.gpu") == 2
    assert TMA_LOAD in producer
    assert compiled.asm["cubin"]
