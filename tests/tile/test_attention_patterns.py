"""Flash attention forward and backward written in the tile DSL with the features Triton's
tutorial 06 uses (host tensor descriptors, `tl.dot` with P kept in registers, `exp2`, a causal
loop split into off-band and on-band stages, the backward's transposed dot patterns), run in
the interpreter against numpy at small shapes and compiled for sm_90a / sm_80. The tutorial
itself is benchmarked by benchmarks/tutorial06_attention.py, which loads its source by path."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")


# ---- a called function's tl.constexpr parameter given a runtime tensor ----------------------

@tile.jit
def _add_offsets(x, offs: tl.constexpr):
    return x + offs


@tile.jit
def constexpr_param_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _add_offsets(offs * 2, offs))


def test_constexpr_annotated_helper_parameter_takes_a_runtime_tensor(interpret):
    # Tutorial 06 passes `offs_m` (a tensor) to `offs_m: tl.constexpr`; Triton treats the
    # annotation as no constraint on a called function, so the value stays a tensor.
    out = np.zeros(64, np.int32)
    constexpr_param_kernel[(2,)](out, BLOCK=32)
    np.testing.assert_array_equal(out, 3 * np.arange(64))
    ptx = tile.compile(constexpr_param_kernel, signature={"out_ptr": "*i32"},
                       constexprs={"BLOCK": 32}, target="sm_90a").asm["ptx"]
    assert "st.global" in ptx


# ---- forward --------------------------------------------------------------------------------

@tile.jit
def _online_softmax_step(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m, qk_scale,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ON_BAND: tl.constexpr):
    # ON_BAND: the blocks that cross the diagonal (masked); else the ones left of it.
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if ON_BAND:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    else:
        lo, hi = 0, start_m * BLOCK_M
    for start_n in range(lo, hi, BLOCK_N):
        k = k_desc.load([row0 + start_n, 0])
        s = tl.dot(q, k.T) * qk_scale
        if ON_BAND:
            keep = offs_m[:, None] >= start_n + tl.arange(0, BLOCK_N)[None, :]
            s = tl.where(keep, s, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v_desc.load([row0 + start_n, 0]), acc)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
    return acc, l_i, m_i


@tile.jit
def attention_forward(q_desc, k_desc, v_desc, o_desc, lse_ptr, sm_scale, N_CTX,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    row0 = head * N_CTX
    q = q_desc.load([row0 + start_m * BLOCK_M, 0])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m,
                                             qk_scale, BLOCK_M, BLOCK_N, False)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k_desc, v_desc, row0, start_m,
                                             qk_scale, BLOCK_M, BLOCK_N, True)
    else:
        for start_n in range(0, N_CTX, BLOCK_N):
            s = tl.dot(q, k_desc.load([row0 + start_n, 0]).T) * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            acc = tl.dot(p.to(tl.float16), v_desc.load([row0 + start_n, 0]), acc * alpha[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(lse_ptr + row0 + offs_m, m_i + tl.math.log2(l_i))
    o_desc.store([row0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))


def _inputs(heads, n, d, seed=0):
    rng = np.random.default_rng(seed)
    return [(0.5 * rng.standard_normal((heads, n, d))).astype(np.float16) for _ in range(4)]


def _reference(q, k, v, do, sm_scale, causal):
    """O, base-2 log-sum-exp, and dQ, dK, dV in float64."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    s = q @ k.transpose(0, 2, 1) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    peak = s.max(-1, keepdims=True)
    e = np.exp(s - peak)
    p = e / e.sum(-1, keepdims=True)
    o = p @ v
    lse2 = (peak[..., 0] + np.log(e.sum(-1))) * LOG2E
    dp = do @ v.transpose(0, 2, 1)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    return o, lse2, ds @ k * sm_scale, ds.transpose(0, 2, 1) @ q * sm_scale, \
        p.transpose(0, 2, 1) @ do


def _forward(q, k, v, sm_scale, causal, bm=64, bn=32):
    heads, n, d = q.shape
    rows = lambda x, block: TensorDescriptor(x.reshape(heads * n, d), [heads * n, d], [d, 1],
                                             [block, d])
    o = np.zeros_like(q)
    lse = np.zeros((heads, n), np.float32)
    attention_forward[(n // bm, heads)](rows(q, bm), rows(k, bn), rows(v, bn), rows(o, bm), lse,
                                        sm_scale, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                                        CAUSAL=causal)
    return o, lse


@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_matches_numpy(causal, interpret):
    q, k, v, _ = _inputs(2, 128, 64)
    o, lse = _forward(q, k, v, 0.5, causal)
    want_o, want_lse, *_ = _reference(q, k, v, q, 0.5, causal)
    # P is rounded to fp16 before the second dot and O is stored as fp16.
    np.testing.assert_allclose(o.astype(np.float64), want_o, atol=4e-3, rtol=0)
    np.testing.assert_allclose(lse, want_lse, atol=2e-5, rtol=1e-5)


def test_attention_forward_compiles_to_tma_and_wgmma_chains():
    desc = TensorDescriptor(np.zeros((256, 64), np.float16), [256, 64], [64, 1], [64, 64])
    kdesc = TensorDescriptor(np.zeros((256, 64), np.float16), [256, 64], [64, 1], [32, 64])
    sig = {"q_desc": desc, "k_desc": kdesc, "v_desc": kdesc, "o_desc": desc,
           "lse_ptr": "*fp32", "sm_scale": "fp32", "N_CTX": "i32"}
    kernel = tile.compile(attention_forward, signature=sig, target="sm_90a", num_warps=4,
                          constexprs=dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=32, CAUSAL=True))
    ptx = kernel.asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx" in ptx
    # Two stages, two dots each: Q K^T (K=64 in 4 k-steps of 16) and P V (K=32 in 2).
    assert ptx.count("wgmma.mma_async") == 2 * (4 + 2)
    assert "ex2.approx" in ptx
    assert kernel.asm["cubin"]


# ---- backward -------------------------------------------------------------------------------

@tile.jit
def attention_backward_dkdv(Q, K, V, DO, DK, DV, LSE, DELTA, sm_scale, N_CTX,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    # One block of keys; walk the queries as Q^T and dO tiles (the tutorial's dot shapes).
    head = tl.program_id(1)
    base = head * N_CTX * HEAD_DIM
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k = tl.load(K + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
    v = tl.load(V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    start = tl.program_id(0) * BLOCK_N if CAUSAL else 0
    for start_m in range(start, N_CTX, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        qT = tl.load(Q + base + offs_m[None, :] * HEAD_DIM + offs_d[:, None])
        do = tl.load(DO + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
        lse = tl.load(LSE + head * N_CTX + offs_m)
        pT = tl.math.exp2(tl.dot(k, qT) * (sm_scale * 1.4426950408889634) - lse[None, :])
        if CAUSAL:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        dv += tl.dot(pT.to(tl.float16), do)
        dpT = tl.dot(v, tl.trans(do))
        dsT = pT * (dpT - tl.load(DELTA + head * N_CTX + offs_m)[None, :])
        dk += tl.dot(dsT.to(tl.float16), tl.trans(qT))
    tl.store(DK + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], (dk * sm_scale).to(tl.float16))
    tl.store(DV + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], dv.to(tl.float16))


@tile.jit
def attention_backward_dq(Q, K, V, DO, DQ, LSE, DELTA, sm_scale, N_CTX,
                          HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    head = tl.program_id(1)
    base = head * N_CTX * HEAD_DIM
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    do = tl.load(DO + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    lse = tl.load(LSE + head * N_CTX + offs_m)[:, None]
    delta = tl.load(DELTA + head * N_CTX + offs_m)[:, None]
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    end = (tl.program_id(0) + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(0, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kT = tl.load(K + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None])
        vT = tl.load(V + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None])
        p = tl.math.exp2(tl.dot(q, kT) * (sm_scale * 1.4426950408889634) - lse)
        if CAUSAL:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        ds = p * (tl.dot(do, vT) - delta)
        dq += tl.dot(ds.to(tl.float16), tl.trans(kT))
    tl.store(DQ + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (dq * sm_scale).to(tl.float16))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_matches_numpy(causal, interpret):
    heads, n, d, sm_scale = 2, 128, 32, 0.5
    q, k, v, do = _inputs(heads, n, d, seed=1)
    o, lse = _forward(q, k, v, sm_scale, causal, bm=32, bn=32)
    delta = (o.astype(np.float32) * do.astype(np.float32)).sum(-1)
    dq, dk, dv = (np.zeros_like(q) for _ in range(3))
    attention_backward_dkdv[(n // 64, heads)](q, k, v, do, dk, dv, lse, delta, sm_scale, n,
                                              HEAD_DIM=d, BLOCK_M=32, BLOCK_N=64, CAUSAL=causal)
    attention_backward_dq[(n // 64, heads)](q, k, v, do, dq, lse, delta, sm_scale, n,
                                            HEAD_DIM=d, BLOCK_M=64, BLOCK_N=32, CAUSAL=causal)
    _, _, want_dq, want_dk, want_dv = _reference(q, k, v, do, sm_scale, causal)
    # fp16 operands (P, dS) and fp16 results: the tutorial's own tolerance is 1e-2.
    for got, want in ((dq, want_dq), (dk, want_dk), (dv, want_dv)):
        np.testing.assert_allclose(got.astype(np.float64), want, atol=1e-2, rtol=0)


def test_attention_backward_dots_compile_for_sm90_and_sm80():
    sig = {name: "*fp16" for name in ("Q", "K", "V", "DO", "DK", "DV")}
    sig.update(LSE="*fp32", DELTA="*fp32", sm_scale="fp32", N_CTX="i32")
    consts = dict(HEAD_DIM=32, BLOCK_M=32, BLOCK_N=64, CAUSAL=True)
    hopper = tile.compile(attention_backward_dkdv, signature=sig, constexprs=consts,
                          target="sm_90a", num_warps=4).asm["ptx"]
    # Four dots a step: K Q^T, P^T dO, V dO^T (K = HEAD_DIM = 32) and dS^T Q (K = BLOCK_M = 32).
    assert hopper.count("wgmma.mma_async") == 4 * 2
    ampere = tile.compile(attention_backward_dkdv, signature=sig, constexprs=consts,
                          target="sm_80", num_warps=4).asm["ptx"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ampere
    assert "wgmma" not in ampere
