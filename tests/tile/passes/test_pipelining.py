"""tile/passes/pipelining.py: loops feeding tl.dot run their loads num_stages - 1 iterations
ahead through cp.async into shared-memory rings; num_stages changes the buffers and the waits
in the IR and the PTX; the interpreter's results do not change; loops that do not qualify
are left alone."""

import re

import numpy as np
import pytest

import tile as triton
import tile.language as tl
from shared_codegen.frontend.compile import explicit_layout_module
from shared_codegen.frontend.launch import specialization_for_signature
from shared_codegen.ir.printer import print_module


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              LOOP_STAGES: tl.constexpr, OTHER: tl.constexpr, SCALE_IN_LOOP: tl.constexpr,
              UNROLL: tl.constexpr = 1):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), num_stages=LOOP_STAGES, loop_unroll_factor=UNROLL):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=OTHER)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        if SCALE_IN_LOOP:
            acc = acc * 0.5
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32:16",
       "N": "i32:16", "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16",
       "stride_cm": "i32:16"}


def _consts(bm=128, bn=128, bk=64, loop_stages=None, other=0.0, scale=False, unroll=1):
    return dict(stride_ak=1, stride_bn=1, stride_cn=1, BM=bm, BN=bn, BK=bk,
                LOOP_STAGES=loop_stages, OTHER=other, SCALE_IN_LOOP=scale, UNROLL=unroll)


def _ir(target="sm_90a", num_stages=3, **kw):
    spec = specialization_for_signature(mm_kernel, SIG, _consts(**kw), 4, target, num_stages)
    return print_module(explicit_layout_module(mm_kernel, spec))


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_num_stages_sets_the_ring_and_the_waits_on_sm_90a(num_stages):
    kern = triton.compile(mm_kernel, signature=SIG, constexprs=_consts(), target="sm_90a",
                          num_stages=num_stages)
    ir, ptx = kern.asm["ttgir"], kern.asm["ptx"]
    for operand in ("128x64", "64x128"):
        assert f"ttg.local_alloc : !ttg.memdesc<{num_stages}x{operand}xfp16, " \
               f"NVMMASharedLayout(swizzle_byte_width=128" in ir
    assert f"ttg.async_wait {{num = {num_stages - 2}}}" in ir
    assert "{is_async = True}" in ir and "{pendings = 1}" in ir
    assert ir.count("ttg.async_commit_group") == num_stages  # S-1 ahead, 1 in the loop
    assert f"cp.async.wait_group {num_stages - 2};" in ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert ptx.count("cp.async.commit_group;") == num_stages
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx)


def test_one_stage_is_not_pipelined():
    ptx = triton.compile(mm_kernel, signature=SIG, constexprs=_consts(), target="sm_90a",
                         num_stages=1).asm["ptx"]
    assert "cp.async" not in ptx and "wgmma.mma_async" in ptx


def test_sm_80_reads_the_ring_into_mma_operands():
    ir = _ir(target="sm_80", num_stages=3)
    assert "ttg.local_alloc : !ttg.memdesc<3x128x64xfp16, SwizzledSharedLayout(" in ir
    assert re.search(r"ttg\.local_load %\w+ : tensor<128x64xfp16, #dot_op", ir), ir
    assert "ttg.async_wait {num = 1}" in ir and "ttg.mma_v2" in ir
    ptx = triton.compile(mm_kernel, signature=SIG, constexprs=_consts(), target="sm_80",
                         num_stages=3).asm["ptx"]
    assert "cp.async.wait_group 1;" in ptx and "mma.sync.aligned.m16n8k16" in ptx


def test_tl_range_num_stages_overrides_the_launch():
    ir = _ir(num_stages=3, loop_stages=2)
    assert "!ttg.memdesc<2x128x64xfp16" in ir and "ttg.async_wait {num = 0}" in ir


def test_loops_that_do_not_qualify_are_left_alone():
    # cp.async zero-fills masked-off elements: a load whose `other` is not zero stays a load
    # (staged in the loop, so the wgmma stays synchronous); B is still pipelined.
    ir = _ir(other=1.0)
    assert ir.count("tt.load") == 1 and ir.count("ttg.async_copy_global_to_local") == 3
    assert "{is_async = False}" in ir
    # The accumulator read inside the loop: pipelined loads, but the wgmma stays synchronous.
    ir = _ir(scale=True)
    assert "ttg.async_copy_global_to_local" in ir and "{is_async = False}" in ir


def _run(a, b, bm, bn, bk, num_stages, target, monkeypatch, loop_stages=None, scale=False,
         other=0.0):
    monkeypatch.setenv("SC_TARGET", target)
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), np.float16)
    grid = (-(-m // bm), -(-n // bn))
    mm_kernel[grid](a, b, c, m, n, k, k, 1, n, 1, n, 1, BM=bm, BN=bn, BK=bk,
                    LOOP_STAGES=loop_stages, OTHER=other, SCALE_IN_LOOP=scale,
                    num_stages=num_stages)
    return c


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_interpreter_results_do_not_depend_on_num_stages(target, monkeypatch):
    rng = np.random.default_rng(0)
    m, n, k = 80, 96, 208  # partial tiles in M and N, four K steps (the last one partial)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    want = (a.astype(np.float64) @ b.astype(np.float64))
    results = [_run(a, b, 64, 64, 64, s, target, monkeypatch) for s in (1, 2, 4)]
    for c in results:
        np.testing.assert_array_equal(c, results[0])
    np.testing.assert_allclose(results[0].astype(np.float64), want, rtol=2e-3, atol=2e-2)
    # A partly pipelined loop (A's nonzero `other` keeps it a load) computes the same.
    np.testing.assert_array_equal(_run(a, b, 64, 64, 64, 3, target, monkeypatch, other=1.0),
                                  results[0])
    # Fewer iterations (one) than stages ahead: the extra copies are masked off.
    short = _run(np.ascontiguousarray(a[:, :48]), b[:48], 64, 64, 64, 4, target, monkeypatch)
    np.testing.assert_allclose(short.astype(np.float64),
                               a[:, :48].astype(np.float64) @ b[:48].astype(np.float64),
                               rtol=2e-3, atol=2e-2)


def test_interpreter_with_a_synchronous_wgmma_in_the_loop(monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 128)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    c = _run(a, b, 64, 64, 32, 3, "sm_90a", monkeypatch, scale=True)
    want = np.zeros((64, 64))
    for k0 in range(0, 128, 32):
        want = (want + a[:, k0:k0 + 32].astype(np.float64) @ b[k0:k0 + 32].astype(np.float64)) \
            * 0.5
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-3, atol=2e-2)


@triton.jit
def linear_kernel(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    """y = x @ w.T with w stored [N, K]: the loaded w tile is transposed in registers."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        ks = k * BK + rk
        x = tl.load(x_ptr + rm[:, None] * K + ks[None, :], mask=ks[None, :] < K, other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + ks[None, :], mask=ks[None, :] < K, other=0.0)
        acc = tl.dot(x, tl.trans(w), acc)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("target,dtype", [("sm_90a", "fp16"), ("sm_90a", "fp8e4nv"),
                                          ("sm_80", "fp16")])
def test_a_transposed_operand_is_a_permuted_view_of_the_ring(target, dtype, monkeypatch):
    import ml_dtypes
    bk = 64 if dtype == "fp8e4nv" else 32
    sig = {"x_ptr": f"*{dtype}:16", "w_ptr": f"*{dtype}:16", "y_ptr": "*fp32:16",
           "M": "i32:16", "N": "i32:16", "K": "i32:16"}
    ir = triton.compile(linear_kernel, signature=sig, constexprs=dict(BM=64, BN=64, BK=bk),
                        target=target).asm["ttgir"]
    # w's ring holds [N, K] tiles as loaded (K contiguous); the operand is their permute.
    assert f"ttg.local_alloc : !ttg.memdesc<3x64x{bk}x{dtype}" in ir
    assert "ttg.memdesc_trans" in ir and "tt.trans" not in ir
    assert ir.count("ttg.async_copy_global_to_local") == 6
    monkeypatch.setenv("SC_TARGET", target)
    npdt = {"fp16": np.float16, "fp8e4nv": ml_dtypes.float8_e4m3fn}[dtype]
    rng = np.random.default_rng(2)
    m, n, k = 128, 64, 160
    x = rng.standard_normal((m, k)).astype(npdt)
    w = rng.standard_normal((n, k)).astype(npdt)
    y = np.zeros((m, n), np.float32)
    linear_kernel[(2, 1)](x, w, y, m, n, k, BM=64, BN=64, BK=bk)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, N_CTX, D: tl.constexpr, BM: tl.constexpr,
                     BN: tl.constexpr):
    """Flash-attention forward for one head (no scaling, no mask): two dots per iteration,
    the second with a computed A (P)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for start in range(0, N_CTX, BN):
        rn = start + tl.arange(0, BN)
        k = tl.load(k_ptr + rn[:, None] * D + rd[None, :])
        qk = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16))


ATTN_SIG = {"q_ptr": "*fp16:16", "k_ptr": "*fp16:16", "v_ptr": "*fp16:16", "o_ptr": "*fp16:16",
            "N_CTX": "i32:16"}


def test_attention_keeps_p_in_registers_and_pipelines_k_and_v():
    kern = triton.compile(attention_kernel, signature=ATTN_SIG,
                          constexprs=dict(D=64, BM=64, BN=64), target="sm_90a")
    ir, ptx = kern.asm["ttgir"], kern.asm["ptx"]
    # q is staged once, before the loop; k and v go through rings (k read transposed).
    assert ir.index("ttg.local_alloc %q") < ir.index("scf.for")
    assert ir.count("ttg.local_alloc : !ttg.memdesc<3x64x64xfp16") == 2
    assert "ttg.memdesc_trans" in ir
    # P feeds the second wgmma from registers. It stays in flight across the back edge: the
    # next Q K^T's wait(0) names the carried accumulator and retires it (Triton's schedule).
    body = ir[ir.index("scf.for"):ir.index("scf.yield")]
    assert body.count("{is_async = True}") == 2 and "{is_async = False}" not in body
    assert re.search(r"ttng\.warp_group_dot_wait %qk, %acc_\d+ \{pendings = 0\}", body)
    assert body.count("ttng.warp_group_dot_wait") == 1
    assert re.search(r"scf\.yield %\w+, %acc_\d+,", ir)  # the raw wgmma result, in flight
    # The loop and the wait(0) that retires it sit inside `if lb < ub`, so the path that
    # skips the loop joins after the wait (ptxas serializes every wgmma otherwise: C7515).
    assert re.search(r"scf\.if %\d+ .*\{\n    %l_i_\d+, %acc_\d+, .* = scf\.for", ir)
    assert re.search(r"\n    %(\d+) = ttng\.warp_group_dot_wait %acc_\d+ \{pendings = 0\} .*\n"
                     r"    scf\.yield %l_i_\d+, %\1,", ir)
    assert re.search(r"\n  \}\n  ttg\.async_wait \{num = 0\}", ir)
    assert re.search(r"tensor<64x64xfp16, #dot_op\d+>", ir)
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" in ptx
    assert "cp.async.wait_group 1;" in ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_attention_matches_numpy(target, monkeypatch):
    monkeypatch.setenv("SC_TARGET", target)
    rng = np.random.default_rng(4)
    n, d = 192, 64
    q, k, v = (rng.standard_normal((n, d)).astype(np.float16) for _ in range(3))
    out = np.zeros((n, d), np.float16)
    attention_kernel[(n // 64,)](q, k, v, out, n, D=d, BM=64, BN=64)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=1e-2)
