"""The converter on warp-specialized tile loops (tl.range(warp_specialize=True)): each
partition prints as a `@gluon.jit` function and the op as `gl.warp_specialize`, the default
partition taking what it reads from the kernel and returning the accumulator; the printed
kernel computes, in the interpreter, bit for bit what the tile kernel computes, and compiles
for sm_90a with the producer's registers released. A producer re-reading descriptors the
kernel builds has no Gluon spelling: refused with the reason."""

import os
import sys

import numpy as np
import pytest

import gluon
from tile.convert import ConversionError, to_gluon, to_gluon_for_signature

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "passes"))
from tile_ws_kernels import (descriptors, matmul_descriptor_persistent, matmul_tma,  # noqa: E402
                             operands, persistent_matmul)

M, N, K, BLOCK = 192, 136, 200, 64
CASES = {
    "matmul_tma": (matmul_tma, dict(BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK, GROUP_M=2,
                                    WARP_SPECIALIZE=True), (M // BLOCK * -(-N // BLOCK),)),
    "persistent_matmul": (persistent_matmul, dict(BM=BLOCK, BN=BLOCK, BK=BLOCK, GROUP_M=2,
                                                  NUM_SMS=3, WS=True), (3,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_partitions_convert_to_gluon_warp_specialize(load_source, monkeypatch, name):
    kernel, consts, grid = CASES[name]
    a, b, want = operands(M, N, K, seed=7)
    c = np.zeros((M, N), np.float16)
    text = to_gluon(kernel, *descriptors(a, b, c, BLOCK, BLOCK, BLOCK), M, N, K, **consts)
    for form in ("@gluon.jit\ndef _consumer_partition(", "@gluon.jit\ndef _producer_partition(",
                 "= gl.warp_specialize([(_consumer_partition, (",
                 "), (_producer_partition, (a_ring, b_ring, ready, empty, ", "[1], [24])",
                 "mbarrier.expect(", "mbarrier.arrive(", "pred=",
                 "tma.async_copy_global_to_shared(a_desc, [",
                 "warpgroup_mma_wait(num_outstanding=1", "mbarrier.invalidate("):
        assert form in text, form
    producer = text[text.index("def _producer_partition("):text.index("@gluon.jit\ndef "
                                                                     + name)]
    assert "warpgroup_mma" not in producer and "tma.async_copy_global_to_shared" in producer
    converted = load_source(f"converted_ws_{name}", text)

    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    kernel[grid](*descriptors(a, b, c, BLOCK, BLOCK, BLOCK), M, N, K, **consts)
    got = np.zeros((M, N), np.float16)
    getattr(converted, name)[grid](*descriptors(a, b, got, BLOCK, BLOCK, BLOCK), M, N, K)
    np.testing.assert_array_equal(got, c)
    # fp16 output: half an ulp of |C| (up to ~64 here, 2^-5) plus the fp32 accumulation.
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=4e-2)

    ad, bd, cd = descriptors(a, b, c, BLOCK, BLOCK, BLOCK)
    sig = {"a_desc": ad, "b_desc": bd, "c_desc": cd, "M": "i32", "N": "i32", "K": "i32"}
    compiled = gluon.compile(getattr(converted, name), sig, target="sm_90a")
    assert compiled.num_warps == 8
    assert "setmaxnreg.dec.sync.aligned.u32 \t24;" in compiled.asm["ptx"]


def test_a_producer_reading_kernel_built_descriptors_is_refused_with_the_reason():
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32",
           "N": "i32", "K": "i32"}
    consts = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_SMS=132,
                  WARP_SPECIALIZE=True)
    with pytest.raises(ConversionError, match=r"tutorial09_kernels.py:\d+: the producer "
                                              r"partition reads a descriptor the kernel builds"):
        to_gluon_for_signature(matmul_descriptor_persistent, sig, consts, num_warps=8)
    consts["WARP_SPECIALIZE"] = False
    assert "tma.make_tensor_descriptor(a_ptr" in to_gluon_for_signature(
        matmul_descriptor_persistent, sig, consts, num_warps=8)
