"""tile/passes/tma_pipelining.py: tensor-descriptor loads feeding tl.dot run num_stages - 1
iterations ahead through rings of TMA buffers with one mbarrier per slot; num_stages sets the
rings, the barriers and the copies in the IR and PTX; the interpreter's results (it runs the
pipelined IR, its sanitizer watching the slots) do not change, under several seeds."""

import os
import re
import sys

import numpy as np
import pytest

import tile as triton
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from test_attention_patterns import _inputs, _reference, attention_forward  # noqa: E402


@triton.jit
def desc_mm_kernel(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, TRANS_B: tl.constexpr):
    pm = tl.program_id(0) * BM
    pn = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pm, k * BK])
        if TRANS_B:
            acc = tl.dot(a, b_desc.load([pn, k * BK]).T, acc)
        else:
            acc = tl.dot(a, b_desc.load([k * BK, pn]), acc)
    rm = pm + tl.arange(0, BM)
    rn = pn + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * (tl.num_programs(1) * BN) + rn[None, :], acc)


def _descs(a, b, bm, bn, bk, trans_b):
    ad = TensorDescriptor(a, list(a.shape), [a.shape[1], 1], [bm, bk])
    bd = TensorDescriptor(b, list(b.shape), [b.shape[1], 1], [bn, bk] if trans_b else [bk, bn])
    return ad, bd


def _compile(num_stages, trans_b=False):
    a = np.zeros((128, 256), np.float16)
    b = np.zeros((128, 256) if trans_b else (256, 128), np.float16)
    ad, bd = _descs(a, b, 64, 64, 64, trans_b)
    sig = {"a_desc": ad, "b_desc": bd, "c_ptr": "*fp32:16", "K": "i32"}
    return triton.compile(desc_mm_kernel, signature=sig, target="sm_90a", num_stages=num_stages,
                          constexprs=dict(BM=64, BN=64, BK=64, TRANS_B=trans_b))


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_num_stages_sets_the_rings_barriers_and_waits(num_stages):
    kern = _compile(num_stages)
    ir, ptx = kern.asm["ttgir"], kern.asm["ptx"]
    ring = f"ttg.local_alloc : !ttg.memdesc<{num_stages}x64x64xfp16, NVMMASharedLayout("
    assert ir.count(ring) == 2
    assert f"ttg.local_alloc : !ttg.memdesc<{num_stages}x1xi64, MBarrierLayout()>" in ir
    assert ir.count("ttng.init_barrier") == num_stages
    assert ir.count("ttng.inval_barrier") == num_stages
    # One expect per slot filled (S-1 ahead, 1 in the loop) covering both boxes.
    assert ir.count("ttng.barrier_expect") == num_stages
    assert ir.count("{size = 16384}") == num_stages
    assert ir.count("ttng.async_tma_copy_global_to_local") == 2 * num_stages
    assert "ttng.wait_barrier" in ir and ", %phase" in ir
    assert "{is_async = True}" in ir and "{pendings = 1}" in ir and "{pendings = 0}" in ir
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") \
        == 2 * num_stages
    assert ptx.count("mbarrier.try_wait.parity") == 1
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert kern.asm["cubin"]


def test_one_stage_keeps_one_buffer_per_load():
    ir = _compile(1).asm["ttgir"]
    assert "x1xi64, MBarrierLayout()" not in ir and "is_async = True" not in ir
    assert ir.count("ttg.local_alloc : !ttg.memdesc<64x64xfp16") == 2


def test_transposed_operand_reads_a_permuted_view_of_its_ring():
    ir = _compile(3, trans_b=True).asm["ttgir"]
    assert ir.count("ttg.local_alloc : !ttg.memdesc<3x64x64xfp16") == 2
    assert "ttg.memdesc_trans" in ir and "{is_async = True}" in ir


@pytest.mark.parametrize("num_stages,k,trans_b,seed", [
    (2, 320, False, "1"), (3, 320, True, "2"), (4, 64, False, "3"), (3, 128, False, "4")])
def test_interpreter_results_are_unchanged(monkeypatch, num_stages, k, trans_b, seed):
    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    rng = np.random.default_rng(int(seed))
    a = rng.standard_normal((128, k)).astype(np.float16)
    b = rng.standard_normal((64, k) if trans_b else (k, 64)).astype(np.float16)
    ad, bd = _descs(a, b, 64, 64, 64, trans_b)
    c = np.zeros((128, 64), np.float32)
    desc_mm_kernel[(2, 1)](ad, bd, c, k, BM=64, BN=64, BK=64, TRANS_B=trans_b,
                           num_stages=num_stages)
    want = a.astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-3 * np.sqrt(k))


@pytest.mark.parametrize("num_stages", [2, 4])
def test_attention_forward_rings_follow_num_stages(num_stages):
    desc = TensorDescriptor(np.zeros((256, 64), np.float16), [256, 64], [64, 1], [64, 64])
    kdesc = TensorDescriptor(np.zeros((256, 64), np.float16), [256, 64], [64, 1], [32, 64])
    sig = {"q_desc": desc, "k_desc": kdesc, "v_desc": kdesc, "o_desc": desc,
           "lse_ptr": "*fp32", "sm_scale": "fp32", "N_CTX": "i32"}
    kern = triton.compile(attention_forward, signature=sig, target="sm_90a", num_warps=4,
                          num_stages=num_stages,
                          constexprs=dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=32, CAUSAL=True))
    ir, ptx = kern.asm["ttgir"], kern.asm["ptx"]
    # Two loops (before and on the diagonal), K and V ringed in each.
    assert ir.count(f"ttg.local_alloc : !ttg.memdesc<{num_stages}x32x64xfp16") == 4
    assert ir.count(f"ttg.local_alloc : !ttg.memdesc<{num_stages}x1xi64") == 2
    # Q once, then K and V: S-1 slots ahead and one in each loop.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") \
        == 1 + 2 * 2 * num_stages
    assert ptx.count("mbarrier.try_wait.parity") == 1 + 2


@pytest.mark.parametrize("num_stages,seed", [(2, "5"), (4, "6")])
def test_attention_forward_numerics_under_seeds(monkeypatch, num_stages, seed):
    monkeypatch.setenv("SC_INTERPRET", "1")
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    heads, n, d, bm, bn = 1, 128, 64, 64, 32
    q, k, v, _ = _inputs(heads, n, d, seed=int(seed))
    rows = lambda x, block: TensorDescriptor(x.reshape(heads * n, d), [heads * n, d], [d, 1],
                                             [block, d])
    o = np.zeros_like(q)
    lse = np.zeros((heads, n), np.float32)
    attention_forward[(n // bm, heads)](rows(q, bm), rows(k, bn), rows(v, bn), rows(o, bm), lse,
                                        0.5, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=True,
                                        num_stages=num_stages)
    want_o, want_lse, *_ = _reference(q, k, v, q, 0.5, True)
    np.testing.assert_allclose(o.astype(np.float64), want_o, atol=4e-3, rtol=0)
    np.testing.assert_allclose(lse, want_lse, atol=2e-5, rtol=1e-5)


def _loop_body(ir: str) -> str:
    body = ir[ir.index("scf.for"):]
    return body[:body.index("scf.yield")]


@pytest.mark.parametrize("causal,num_stages", [(False, 3), (True, 3), (False, 2)])
def test_attention_p_v_stays_in_flight_until_the_next_q_k_wait(causal, num_stages):
    """Triton's attention schedule: P V (register A) is issued async and left in flight
    across the back edge; Q K^T is async and waited at once with pendings=0, the wait naming
    the carried accumulator, so P V_j and Q K^T_{j+1} run back to back on the tensor cores.
    The ring is refilled after P V, the slot P V_{j-1} read being free once that wait passed
    (with two slots right after that wait, so the copies have an iteration to land)."""
    desc = TensorDescriptor(np.zeros((256, 64), np.float16), [256, 64], [64, 1], [64, 64])
    kdesc = TensorDescriptor(np.zeros((256, 64), np.float16), [256, 64], [64, 1], [32, 64])
    sig = {"q_desc": desc, "k_desc": kdesc, "v_desc": kdesc, "o_desc": desc,
           "lse_ptr": "*fp32", "sm_scale": "fp32", "N_CTX": "i32"}
    kern = triton.compile(attention_forward, signature=sig, target="sm_90a", num_warps=4,
                          num_stages=num_stages,
                          constexprs=dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=32, CAUSAL=causal))
    ir, ptx = kern.asm["ttgir"], kern.asm["ptx"]
    body = _loop_body(ir)
    dots = [line for line in body.splitlines() if "ttng.warp_group_dot " in line]
    assert len(dots) == 2 and all("{is_async = True}" in d for d in dots)
    waits = [line for line in body.splitlines() if "ttng.warp_group_dot_wait" in line]
    assert len(waits) == 1 and "{pendings = 0}" in waits[0]
    # The wait passes the carried accumulator (the loop's first block argument) through.
    carried = body[body.index("^bb(") + 4:].split(",")[1].split(":")[0].strip()
    assert waits[0].split("{")[0].rstrip().endswith(carried)
    refill = body.index("ttng.async_tma_copy_global_to_local")
    if num_stages == 2:
        assert body.index(waits[0]) < refill < body.index(dots[1])
    else:
        assert body.index(dots[1]) < refill
    # One bar.sync per iteration, after the wgmma wait and before the refill overwrites
    # the slot other warps' P V read; none at the top of the body, where only the mbarrier
    # wait and wgmma reads of landed slots come (as Triton's membar analysis finds).
    for loop in re.findall(r"\n(\$L__BB\d+_\d+):\n(.*?)\n\s*@%p\d+ bra\s+\1;", ptx, re.S):
        body_ptx = loop[1]
        assert body_ptx.count("bar.sync") == 1
        assert body_ptx.index("mbarrier.try_wait") < body_ptx.index("wgmma.wait_group") \
            < body_ptx.index("bar.sync") < body_ptx.index("cp.async.bulk.tensor")
    assert len(re.findall(r"\n(\$L__BB\d+_\d+):\n(.*?)\n\s*@%p\d+ bra\s+\1;", ptx,
                          re.S)) == (2 if causal else 1)
    # After each loop: the last P V retired before anything reads the accumulator.
    assert ir.count("ttng.warp_group_dot_wait") == (4 if causal else 2)
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == (4 if causal else 2)
    assert "wgmma.wait_group.sync.aligned 1;" not in ptx
