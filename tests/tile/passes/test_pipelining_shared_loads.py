"""tile/passes/pipelining.py: a loaded tile that feeds two dots (the attention backward reads
Q and dO once as loaded and once transposed) is copied once per iteration into one ring, and
every dot reads its slot (a permuted view for the transposed read); a tile loaded with its
first dim contiguous gets a ring stored that way (cp.async cannot transpose). The interpreter,
which runs the pipelined IR with its shared-memory sanitizer, gives the same results at every
num_stages and under several completion orders."""

import re

import numpy as np
import pytest

import tile as triton
import tile.language as tl
from shared_codegen.errors import PerformanceWarning


@triton.jit
def dkdv_kernel(Q, K, V, DO, M, D, DK, DV, num_steps, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr):
    """dK and dV of one key block, the attention backward's inner loop: Q^T is loaded with
    its first dim (HEAD_DIM) contiguous and read by two dots, once transposed; dO likewise.
    MASK keeps the causal part (key <= query); without it, `offs_n` is carried through the
    loop unchanged (the body assigns it only under the constexpr condition)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, HEAD_DIM)
    k = tl.load(K + offs_n[:, None] * HEAD_DIM + offs_k[None, :])
    v = tl.load(V + offs_n[:, None] * HEAD_DIM + offs_k[None, :])
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    offs_m = tl.arange(0, BLOCK_M)
    qT_ptrs = Q + offs_m[None, :] * HEAD_DIM + offs_k[:, None]
    do_ptrs = DO + offs_m[:, None] * HEAD_DIM + offs_k[None, :]
    curr_m = 0
    for _ in range(num_steps):
        qT = tl.load(qT_ptrs)
        offs_m = curr_m + tl.arange(0, BLOCK_M)
        m = tl.load(M + offs_m)
        qkT = tl.dot(k, qT)
        pT = tl.math.exp2(qkT - m[None, :])
        if MASK:
            offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        do = tl.load(do_ptrs)
        dv += tl.dot(pT.to(tl.float16), do)
        di = tl.load(D + offs_m)
        dpT = tl.dot(v, tl.trans(do))
        dsT = (pT * (dpT - di[None, :])).to(tl.float16)
        dk += tl.dot(dsT, tl.trans(qT))
        curr_m += BLOCK_M
        qT_ptrs += BLOCK_M * HEAD_DIM
        do_ptrs += BLOCK_M * HEAD_DIM
    tl.store(DV + offs_n[:, None] * HEAD_DIM + offs_k[None, :], dv)
    tl.store(DK + offs_n[:, None] * HEAD_DIM + offs_k[None, :], dk)


SIG = {"Q": "*fp16:16", "K": "*fp16:16", "V": "*fp16:16", "DO": "*fp16:16", "M": "*fp32:16",
       "D": "*fp32:16", "DK": "*fp32:16", "DV": "*fp32:16", "num_steps": "i32"}


def _compile(target, num_stages=3, mask=False):
    return triton.compile(dkdv_kernel, signature=SIG, target=target, num_stages=num_stages,
                          num_warps=4,
                          constexprs=dict(BLOCK_M=32, BLOCK_N=64, HEAD_DIM=64, MASK=mask))


def test_one_ring_per_loaded_tile_read_by_both_dots():
    ir = _compile("sm_90a").asm["ttgir"]
    body = ir[ir.index("scf.for"):]
    # Q^T [64, 32] is stored as loaded, dim 0 contiguous; dO [32, 64] row-major.
    assert ("ttg.local_alloc : !ttg.memdesc<3x64x32xfp16, NVMMASharedLayout(swizzle_byte_width"
            "=128, element_bitwidth=16, transposed=True)>") in ir
    assert ("ttg.local_alloc : !ttg.memdesc<3x32x64xfp16, NVMMASharedLayout(swizzle_byte_width"
            "=128, element_bitwidth=16)>") in ir
    # Two copies per iteration (and two per prologue stage), no register load of either tile;
    # the transposed reads are views of the same slots.
    assert ir.count("ttg.async_copy_global_to_local") == 6
    assert body.count("tt.load") == 2  # m and D, the row vectors
    assert body.count("ttg.memdesc_trans") == 2 and "tt.trans" not in body
    assert body.count("ttg.memdesc_index") == 4  # two reads, two refills
    # Per thread, 4 KB tiles over 128 threads: two 16-byte copies per tile, two tiles, in each
    # of two prologue stages and the loop.
    ptx = _compile("sm_90a").asm["ptx"]
    assert ptx.count("cp.async.cg.shared.global") == 12
    assert ptx.count("cp.async.commit_group") == 3


def test_num_stages_sets_the_ring_depth():
    for stages in (2, 4):
        ir = _compile("sm_90a", stages).asm["ttgir"]
        assert f"ttg.local_alloc : !ttg.memdesc<{stages}x64x32xfp16" in ir
        assert f"ttg.async_wait {{num = {stages - 2}}}" in ir


def _reference(q, k, v, do, m, d, mask):
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    p_t = np.exp2(k @ q.T - m[None, :])
    if mask:
        p_t = np.where(np.arange(len(q))[None, :] >= np.arange(len(k))[:, None], p_t, 0.0)
    dv = p_t.astype(np.float16).astype(np.float64) @ do
    ds_t = (p_t * (v @ do.T - d[None, :])).astype(np.float16).astype(np.float64)
    return ds_t @ q, dv


def _run(target, num_stages, monkeypatch, seed=None, mask=False):
    monkeypatch.setenv("SC_TARGET", target)
    if seed is not None:
        monkeypatch.setenv("SC_INTERPRET_SEED", str(seed))
    q, k, v, do, m, d = arrays = _inputs()
    n_q, n_k, hd = len(q), len(k), q.shape[1]
    dk, dv = np.zeros((n_k, hd), np.float32), np.zeros((n_k, hd), np.float32)
    dkdv_kernel[(n_k // 64,)](*arrays, dk, dv, n_q // 32, BLOCK_M=32, BLOCK_N=64,
                              HEAD_DIM=64, MASK=mask, num_warps=4, num_stages=num_stages)
    return dk, dv, _reference(*arrays, mask)


def _inputs(n_q=96, n_k=128, hd=64, seed=3):
    """Q, K, V, dO, the row maxima and Delta; three query steps of 32 and two key blocks of
    64 by default."""
    rng = np.random.default_rng(seed)
    q, k, v, do = (rng.standard_normal((n, hd)).astype(np.float16) * 0.5
                   for n in (n_q, n_k, n_k, n_q))
    m = rng.standard_normal(n_q).astype(np.float32) + 4.0
    d = rng.standard_normal(n_q).astype(np.float32)
    return q, k, v, do, m, d


@pytest.mark.parametrize("target,mask", [("sm_90a", False), ("sm_90a", True),
                                         ("sm_80", False)])
def test_interpreter_matches_numpy_at_every_num_stages(target, mask, monkeypatch):
    base = None
    for stages, seed in ((1, None), (2, 1), (3, 2), (3, 3)):
        dk, dv, (want_dk, want_dv) = _run(target, stages, monkeypatch, seed, mask)
        np.testing.assert_allclose(dv, want_dv, rtol=1e-2, atol=2e-2)
        np.testing.assert_allclose(dk, want_dk, rtol=1e-2, atol=2e-2)
        if base is None:
            base = (dk, dv)
        else:  # the same sums in the same order: bit-identical whatever the depth
            np.testing.assert_array_equal(dk, base[0])
            np.testing.assert_array_equal(dv, base[1])


def test_the_four_wgmmas_are_async_with_waits_where_results_are_read():
    ir = _compile("sm_90a").asm["ttgir"]
    body = ir[ir.index("scf.for"):ir.index("scf.yield")]
    issued = [line.split("=")[0].strip() for line in body.splitlines()
              if "ttng.warp_group_dot " in line]
    # dP^T reads only shared memory (V, a dO slot): it is issued right after S^T, ahead of
    # dV, whose A (P^T) the warps compute first.
    assert [name.rstrip("_0123456789") for name in issued] == ["%qkT", "%dpT", "%dv", "%dk"]
    assert body.count("{is_async = True}") == 4
    waits = [line for line in body.splitlines() if "ttng.warp_group_dot_wait" in line]
    # S^T's wait leaves dP^T running and retires the previous iteration's dV and dK (named, so
    # nothing reads them earlier); dP^T's wait leaves dV running; dV and dK stay in flight.
    assert len(waits) == 2
    assert "%qkT, %dv_2, %dk_1 {pendings = 1}" in waits[0]
    assert "%dpT {pendings = 1}" in waits[1]
    # The ring refill comes after the first wait (the slot it overwrites was read by the
    # previous iteration's dV and dK).
    assert body.index("ttng.warp_group_dot_wait") < body.index("ttg.async_copy_global_to_local")
    # dV and dK are retired after the loop, inside the `if lb < ub` around it.
    after = ir[ir.index("scf.yield"):]
    assert re.search(r"ttng\.warp_group_dot_wait %dv_\d+, %dk_?\d* \{pendings = 0\}", after)
    assert ir.index("scf.if") < ir.index("scf.for")


def test_ptxas_keeps_the_wgmmas_async(monkeypatch):
    # ptxas reports C7515 and waits after every HGMMA when a non-wgmma instruction defines an
    # accumulator a wgmma may still be writing: the loop's skip path must not join before
    # the wait. Needs ptxas (CUDA toolkit) to check.
    pytest.importorskip("tools.static_report")
    from tools.static_report import whole_program_cubin
    import shutil
    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not on PATH")
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    kernel = _compile("sm_90a")
    assert kernel.metadata["performance_losses"] == []  # nvJitLink's ptxas: no note
    _, log = whole_program_cubin(kernel.asm["ptx"], "sm_90a")
    assert "C7515" not in log and "C7512" not in log


def test_accumulators_past_the_register_budget_stay_synchronous(monkeypatch):
    # dK and dV of [128, 128] with 4 warps take 256 fp32 registers per thread: ptxas cannot
    # spill an in-flight accumulator, so the wgmmas stay synchronous (the rings stay). The
    # kernel spills, and ptxas says it serializes the wgmmas for it: the compile says so too.
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")  # the warning comes with a fresh compile
    with pytest.warns(PerformanceWarning, match=(
            r"dkdv_kernel \(defined at .*test_pipelining_shared_loads\.py:\d+\): ptxas "
            r"reports a performance loss \(C7512\): wgmma\.mma_async instructions are "
            r"serialized due to insufficient register resources")):
        kernel = triton.compile(dkdv_kernel, signature=SIG, target="sm_90a", num_warps=4,
                                constexprs=dict(BLOCK_M=32, BLOCK_N=128, HEAD_DIM=128,
                                                MASK=False))
    assert [n["code"] for n in kernel.metadata["performance_losses"]] == ["C7512"]
    ir = kernel.asm["ttgir"]
    body = ir[ir.index("scf.for"):ir.index("scf.yield")]
    assert body.count("{is_async = False}") == 4 and "ttng.warp_group_dot_wait" not in body
    assert ir.count("ttg.async_copy_global_to_local") == 6


def test_converts_to_gluon_that_computes_the_same(load_source, monkeypatch):
    # The converter prints the pipelined loop as it is: the rings, the transposed views, the
    # four async warpgroup_mma with their waits, and the `if` around the loop; the printed
    # kernel computes what the tile kernel computes and compiles for sm_90a.
    from tile.convert import to_gluon_for_signature
    import gluon

    meta = dict(BLOCK_M=32, BLOCK_N=64, HEAD_DIM=64, MASK=False)
    text = to_gluon_for_signature(dkdv_kernel, SIG, meta, num_warps=4)
    assert text.count("warpgroup_mma(") == 4 and text.count("is_async=True") == 4
    assert "warpgroup_mma_wait(num_outstanding=1, deps=[qkT, dv_1, dk])" in text
    assert "warpgroup_mma_wait(num_outstanding=0, deps=[dv_1, dk])" in text
    assert text.count(".permute([1, 0])") == 2
    converted = load_source("converted_dkdv", text)
    want_dk, want_dv, _ = _run("sm_90a", 3, monkeypatch, seed=1)
    dk, dv = (np.zeros((128, 64), np.float32) for _ in range(2))
    converted.dkdv_kernel[(2,)](*_inputs(), dk, dv, 3, num_warps=4)
    np.testing.assert_array_equal(dk, want_dk)
    np.testing.assert_array_equal(dv, want_dv)
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    compiled = gluon.compile(converted.dkdv_kernel, SIG, {}, target="sm_90a", num_warps=4)
    assert compiled.asm["ptx"].count("wgmma.commit_group") >= 4
    assert compiled.metadata["performance_losses"] == []  # ptxas keeps them async
