"""examples/gluon/matmul_mma_v2.py: main() in the CPU interpreter against its reference, and
the pipelined kernel's PTX for sm_90a and sm_80."""

import os
import re
import sys

import pytest

import gluon

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples",
                                "gluon"))

SMALL = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NUM_STAGES=3, WARPS_M=2, WARPS_N=2)


@pytest.mark.parametrize("m,n,k,config", [
    (64, 64, 96, SMALL),                      # 3 K-steps: the pipeline wraps around once
    (48, 40, 32, SMALL),                      # partial tiles: masked rows / columns
    (32, 64, 128, dict(SMALL, NUM_STAGES=2, BLOCK_N=64, WARPS_M=1, WARPS_N=4)),
])
def test_matmul_mma_v2_main_in_the_interpreter(m, n, k, config):
    import matmul_mma_v2

    assert matmul_mma_v2.main(m=m, n=n, k=k, gpu=False, config=config) < 1e-2


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16",
       "N": "i32:16", "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16",
       "stride_cm": "i32:16"}
# The counts below are for this configuration (8 warps, BLOCK_K 32), pinned so that changing
# the example's default (tuned on the H100) does not change what these tests check.
PTX_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, NUM_STAGES=3, WARPS_M=4, WARPS_N=2)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_pipelined_kernel_ptx_has_cp_async_16_byte_copies_and_one_barrier_per_step(target):
    import matmul_mma_v2

    compiled = gluon.compile(matmul_mma_v2.matmul_kernel, SIG, PTX_CONFIG,
                             target=target, num_warps=8)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    # Per warp: a 32x64 block of the 128x128 tile = 2 x 8 tiles, 2 K-steps of 16 per BLOCK_K.
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 32
    copies = re.findall(r"cp\.async\.(\w+)\.shared\.global \[[^\]]*\], \[[^\]]*\], (\d+)", ptx)
    # (128x32 + 32x128) fp16 per stage over 256 threads: 2 x 16 bytes each, prologue (2
    # stages) + loop body (1).
    assert copies == [("cg", "16")] * 12
    assert ptx.count("cp.async.commit_group;") == 3
    assert re.findall(r"cp\.async\.wait_group \d+;", ptx) == ["cp.async.wait_group 1;",
                                                              "cp.async.wait_group 0;"]
    loop = ptx[ptx.index("cp.async.wait_group 1;"):ptx.index("cp.async.wait_group 0;")]
    assert loop.count("bar.sync") == 1 and loop.index("bar.sync") < loop.index("ldmatrix")
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_operands_come_from_shared_memory_through_ldmatrix(target):
    """Per K step (BLOCK_K 32) each warp loads its 32x32 of A as 4 `ldmatrix.x4` (K
    contiguous) and its 32x64 of B as 8 `ldmatrix.x4.trans` (N contiguous), where the plain
    path took 16 `ld.shared.b32` and 64 `ld.shared.b16`."""
    import matmul_mma_v2

    compiled = gluon.compile(matmul_mma_v2.matmul_kernel, SIG, PTX_CONFIG,
                             target=target, num_warps=8)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    loop = ptx[ptx.index("cp.async.wait_group 1;"):ptx.index("cp.async.wait_group 0;")]
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 8
    assert len(re.findall(r"ld\.shared\.b16", ptx)) < 8
    assert not re.search(r"ld\.shared", loop)
