"""Flash attention backward for Hopper (sm_90a) in Gluon, in FlashAttention-3's structure.

    S = q k^T * sm_scale, P = exp(S - lse), dV = P^T dO, dP = dO V^T,
    dS = P * (dP - delta) with delta = rowsum(dO * O), dQ = dS K * sm_scale,
    dK = dS^T Q * sm_scale

Three kernels:

  1. `_delta_kernel`: delta = rowsum(dO * O) in fp32, one program per 64 rows.
  2. `attention_bwd_kernel`: one CTA per (128-key block, batch * kv head). Three partitions
     (gl.warp_specialize):

     producer: 1 warp, 24 regs            consumer WG (x2, keys n0 + 64*WG .. +64, 240 regs)
       TMA K, V (both halves) once          wait K, V
       for each query head of the group     for each query head of the group
         for each query block m               for each query block m
           wait stage free                      wait Q_m, dO_m landed
           TMA Q_m, dO_m -> ring stage          S^T = K Q_m^T, dP^T = V dO_m^T  (wgmma, smem)
                                                P^T = exp2(S^T * scale*log2e - lse*log2e)
                                                dV += P^T dO_m                 (wgmma, P in regs)
                                                dS^T = P^T * (dP^T - delta)
                                                dK += dS^T Q_m                 (wgmma, dS in regs)
                                                dQ_m(partial) = dS K           (wgmma, dS^T
                                                                                transposed in regs)
                                                release the stage; atomically add dQ_m to fp32
                                              dK *= sm_scale; store dK, dV

     Computing the transposed scores (keys as the wgmma M dimension) puts P^T and dS^T in
     the accumulator layout, from which they become the A operands of the dV and dK wgmmas
     in registers (no shared-memory round trip). GQA: the CTA walks every query head that
     shares its K/V head, so dK and dV are summed in registers and stored once.
     Causal: query blocks entirely above the diagonal are never loaded, and only blocks that
     cross the diagonal (or the ragged ends of N_q / N_kv) pay for a mask.
     dQ: fp32 atomics (`atom.relaxed.gpu.global.add.f32`). TMA reduce-add
     (`cp.reduce.async.bulk.tensor`, FA3's way) has no Gluon builtin yet; it would cut the
     atomic traffic.
  3. `_dq_convert_kernel`: dQ = dQ_acc * sm_scale in the input dtype.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402
from gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma,  # noqa: E402
                                          warpgroup_mma_wait)
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from gluon.warp_spec import pipeline  # noqa: E402

BM = gl.constexpr(64)     # query rows per block (the N dimension of S^T)
BN_WG = gl.constexpr(64)  # keys per consumer warpgroup (one m64 wgmma tile)
BN = gl.constexpr(128)    # keys per CTA (two consumer warpgroups)
LOG2E = gl.constexpr(1.4426950408889634)
ROWS = gl.constexpr(64)   # rows per program of the pre- and post-pass


@gluon.jit
def _delta_kernel(o_ptr, do_ptr, delta_ptr, n_rows, D: gl.constexpr):
    """delta[r] = sum_d dO[r, d] * O[r, d] in fp32 (o and do contiguous (rows, D))."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (D // 8), D // 8], [4, 1], [1, 0])
    rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, layout))
    offs = gl.expand_dims(rows, 1) * D + gl.expand_dims(cols, 0)
    keep = gl.expand_dims(rows < n_rows, 1)
    o = gl.load(o_ptr + offs, mask=keep, other=0.0).to(gl.float32)
    do = gl.load(do_ptr + offs, mask=keep, other=0.0).to(gl.float32)
    gl.store(delta_ptr + rows, gl.sum(o * do, axis=1), mask=rows < n_rows)


@gluon.jit
def _dq_convert_kernel(acc_ptr, dq_ptr, n, sm_scale, BLOCK: gl.constexpr):
    """dq = acc * sm_scale in dq's dtype (flat, contiguous)."""
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    acc = gl.load(acc_ptr + offs, mask=offs < n, other=0.0)
    gl.store(dq_ptr + offs, (acc * sm_scale).to(dq_ptr.dtype.element_ty), mask=offs < n)


@gluon.jit
def _q_blocks(n0, N_Q, N_KV, CAUSAL: gl.constexpr):
    """(first, end) query block that sees any key of [n0, n0 + BN). A key k is visible to
    query q when k <= q + N_kv - N_q (FlashAttention's bottom-right alignment)."""
    end = gl.cdiv(N_Q, BM)
    if CAUSAL:
        first = gl.minimum(gl.maximum(n0 - (N_KV - N_Q), 0) // BM, end)
    else:
        first = end * 0
    return first, end


@gluon.jit
def _producer(q_desc, do_desc, k_desc, v_desc, q_ring, do_ring, k_smem, v_smem, kv_ready,
              qpipe, N_Q, N_KV, H_KV, GROUP, CAUSAL: gl.constexpr):
    n0 = gl.program_id(0) * BN
    b = gl.program_id(1) // H_KV
    hk = gl.program_id(1) % H_KV
    mbarrier.expect(kv_ready, 2 * (k_desc.block_type.nbytes + v_desc.block_type.nbytes))
    for wg in gl.static_range(2):
        tma.async_copy_global_to_shared(k_desc, [b, hk, n0 + wg * BN_WG, 0], kv_ready,
                                        k_smem.index(wg))
        tma.async_copy_global_to_shared(v_desc, [b, hk, n0 + wg * BN_WG, 0], kv_ready,
                                        v_smem.index(wg))
    first, end = _q_blocks(n0, N_Q, N_KV, CAUSAL)
    item = 0
    for g in range(GROUP):
        h = hk * GROUP + g
        for mb in range(first, end):
            s, ready = pipeline.producer_acquire(qpipe, item)
            mbarrier.expect(ready, q_desc.block_type.nbytes + do_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [b, h, mb * BM, 0], ready, q_ring.index(s))
            tma.async_copy_global_to_shared(do_desc, [b, h, mb * BM, 0], ready,
                                            do_ring.index(s))
            item += 1


@gluon.jit
def _consumer(WG: gl.constexpr, q_ring, do_ring, k_smem, v_smem, kv_ready, qpipe, lse_ptr,
              delta_ptr, dq_ptr, dk_ptr, dv_ptr, N_Q, N_KV, H, H_KV, GROUP, qk_scale, sm_scale,
              CAUSAL: gl.constexpr):
    D: gl.constexpr = q_ring.shape[4]
    dtype: gl.constexpr = q_ring.dtype
    # S^T, dP^T: [keys, queries]; dK, dV, dQ: [rows, D].
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BM, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(
        operand_index=0, parent=acc_layout, k_width=32 // dtype.primitive_bitwidth)
    # dQ's column block: D = 128 in two halves (32 accumulator registers instead of 64 next
    # to dK and dV); D = 64 whole (a 32-column half of K would cut its 128-byte swizzle).
    DH: gl.constexpr = D // 2 if D > 64 else D
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, DH, 16])
    aq_layout: gl.constexpr = gl.DotOperandLayout(
        operand_index=0, parent=dq_layout, k_width=32 // dtype.primitive_bitwidth)
    col_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    n0 = gl.program_id(0) * BN
    b = gl.program_id(1) // H_KV
    hk = gl.program_id(1) % H_KV
    key0 = n0 + WG * BN_WG
    off = N_KV - N_Q
    k = k_smem.index(WG).reshape([BN_WG, D])
    v = v_smem.index(WG).reshape([BN_WG, D])
    keys = key0 + gl.arange(0, BN_WG, layout=row_s)
    s_zero = gl.zeros([BN_WG, BM], gl.float32, s_layout)
    dq_zero = gl.zeros([BM, DH], gl.float32, dq_layout)
    dk = gl.zeros([BN_WG, D], gl.float32, acc_layout)
    dv = gl.zeros([BN_WG, D], gl.float32, acc_layout)
    dq_rows = gl.arange(0, BM, layout=gl.SliceLayout(1, dq_layout))
    dh_cols = gl.arange(0, DH, layout=gl.SliceLayout(0, dq_layout))
    first, end = _q_blocks(n0, N_Q, N_KV, CAUSAL)
    mbarrier.wait(kv_ready, 0)
    item = 0
    for g in range(GROUP):
        h = hk * GROUP + g
        row_base = (b * H + h) * N_Q
        for mb in range(first, end):
            m0 = mb * BM
            stage = pipeline.consumer_wait(qpipe, item)
            q = q_ring.index(stage).reshape([BM, D])
            do = do_ring.index(stage).reshape([BM, D])
            st = warpgroup_mma(k, q.permute([1, 0]), s_zero, use_acc=False, is_async=True)
            dpt = warpgroup_mma(v, do.permute([1, 0]), s_zero, use_acc=False, is_async=True)
            queries = m0 + gl.arange(0, BM, layout=col_s)
            in_q = queries < N_Q
            lse2 = gl.load(lse_ptr + row_base + queries, mask=in_q, other=0.0) * LOG2E
            # A query that sees no key (lse = -inf) is masked below; keep exp2 finite.
            lse2 = gl.where(lse2 == -float("inf"), 0.0, lse2)
            st = warpgroup_mma_wait(1, deps=[st])
            pt = gl.exp2(gl.fma(st, qk_scale, -gl.expand_dims(lse2, 0)))
            keep = gl.expand_dims(in_q, 0) & gl.expand_dims(keys < N_KV, 1)
            if CAUSAL:  # only blocks crossing the diagonal or a ragged end pay for the mask
                if (m0 + off < key0 + BN_WG - 1) | (m0 + BM > N_Q) | (key0 + BN_WG > N_KV):
                    keep = keep & (gl.expand_dims(keys, 1) <= gl.expand_dims(queries + off, 0))
                    pt = gl.where(keep, pt, 0.0)
            else:  # a branch here spills more in ptxas than the few ALU ops of the mask cost
                pt = gl.where(keep, pt, 0.0)
            pt_op = gl.convert_layout(pt.to(dtype), a_layout)
            dv = warpgroup_mma(pt_op, do, dv, is_async=True)
            # Loaded here, not with lse: 16 registers fewer while S^T and dP^T are live.
            delta = gl.load(delta_ptr + row_base + queries, mask=in_q, other=0.0)
            dpt = warpgroup_mma_wait(1, deps=[dpt])  # dV's product runs on
            dst = (pt * (dpt - gl.expand_dims(delta, 0))).to(dtype)
            ds_op = gl.convert_layout(dst, a_layout)
            dk = warpgroup_mma(ds_op, q, dk, is_async=True)
            # dS^T turned into dS, the A operand of dQ = dS K, while dV and dK run.
            dsq_op = gl.convert_layout(gl.permute(dst, [1, 0]), aq_layout)
            dv, dk, pt_op, ds_op = warpgroup_mma_wait(0, deps=[dv, dk, pt_op, ds_op])
            pipeline.consumer_release(qpipe, item)
            rows = m0 + dq_rows
            row_offs = gl.expand_dims((row_base + rows) * D, 1)
            in_rows = gl.expand_dims(rows < N_Q, 1)
            for half in gl.static_range(D // DH):
                k_half = k.slice(half * DH, DH, dim=1)
                dq = warpgroup_mma(dsq_op, k_half, dq_zero, use_acc=False, is_async=True)
                dq, dsq_op = warpgroup_mma_wait(0, deps=[dq, dsq_op])
                offs = row_offs + gl.expand_dims(half * DH + dh_cols, 0)
                gl.atomic_add(dq_ptr + offs, dq, mask=in_rows, sem="relaxed")
            item += 1
    # Epilogue: dK (scaled) and dV in the input dtype, rows past N_kv clipped.
    rows = key0 + gl.arange(0, BN_WG, layout=gl.SliceLayout(1, acc_layout))
    d_cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    offs = gl.expand_dims(((b * H_KV + hk) * N_KV + rows) * D, 1) + gl.expand_dims(d_cols, 0)
    keep = gl.expand_dims(rows < N_KV, 1)
    gl.store(dk_ptr + offs, (dk * sm_scale).to(dtype), mask=keep)
    gl.store(dv_ptr + offs, dv.to(dtype), mask=keep)


@gluon.jit
def attention_bwd_kernel(q_desc, do_desc, k_desc, v_desc, lse_ptr, delta_ptr, dq_ptr, dk_ptr,
                         dv_ptr, N_Q, N_KV, H, H_KV, GROUP, qk_scale, sm_scale,
                         STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    q_ring = gl.allocate_shared_memory(q_desc.dtype, [STAGES] + q_desc.block_shape,
                                       q_desc.layout)
    do_ring = gl.allocate_shared_memory(do_desc.dtype, [STAGES] + do_desc.block_shape,
                                        do_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [2] + k_desc.block_shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [2] + v_desc.block_shape, v_desc.layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    qpipe = pipeline.create(STAGES, 2)  # both consumer warpgroups read every Q/dO stage
    common = (q_ring, do_ring, k_smem, v_smem, kv_ready, qpipe, lse_ptr, delta_ptr, dq_ptr,
              dk_ptr, dv_ptr, N_Q, N_KV, H, H_KV, GROUP, qk_scale, sm_scale, CAUSAL)
    gl.warp_specialize(
        [(_consumer, (0,) + common), (_consumer, (1,) + common),
         (_producer, (q_desc, do_desc, k_desc, v_desc, q_ring, do_ring, k_smem, v_smem,
                      kv_ready, qpipe, N_Q, N_KV, H_KV, GROUP, CAUSAL))],
        [4, 1], [240, 24])
    pipeline.invalidate(qpipe)
    mbarrier.invalidate(kv_ready)


# ---- host side ---------------------------------------------------------------------------------

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
STAGES = 2  # Q/dO ring depth: 2 x 32 KB at D = 128 next to K and V (64 KB)


def _dtype_name(x) -> str:
    name = str(x.dtype)
    return name[len("torch."):] if name.startswith("torch.") else name


def _is_numpy(x) -> bool:
    return isinstance(x, np.ndarray)


def _contiguous(x):
    return np.ascontiguousarray(x) if _is_numpy(x) else x.contiguous()


def _shape(x, name, rank):
    shape = tuple(int(s) for s in x.shape)
    if len(shape) != rank:
        dims = "(B, H, N, D)" if rank == 4 else "(B, H, N_q)"
        raise ValueError(f"attention_backward: {name} must have {rank} dims {dims}, got shape "
                         f"{shape}")
    return shape


def _check_inputs(q, k, v, o, lse, do):
    B, H, N_q, D = _shape(q, "q", 4)
    ks, vs = _shape(k, "k", 4), _shape(v, "v", 4)
    if ks != vs:
        raise ValueError(f"attention_backward: k and v must have the same shape, got k {ks} "
                         f"and v {vs}")
    Bk, H_kv, N_kv, Dk = ks
    if (Bk, Dk) != (B, D):
        raise ValueError(f"attention_backward: k has (batch, head dim) ({Bk}, {Dk}) but q has "
                         f"({B}, {D}); they must match")
    for name, x in (("o", o), ("do", do)):
        if _shape(x, name, 4) != (B, H, N_q, D):
            raise ValueError(f"attention_backward: {name} must have q's shape {(B, H, N_q, D)}, "
                             f"got {tuple(x.shape)}")
    if _shape(lse, "lse", 3) != (B, H, N_q):
        raise ValueError(f"attention_backward: lse must have shape (B, H, N_q) = "
                         f"{(B, H, N_q)}, got {tuple(lse.shape)}")
    if _dtype_name(lse) != "float32":
        raise ValueError(f"attention_backward: lse has dtype {_dtype_name(lse)}; it must be "
                         f"float32 (attention_forward(..., return_lse=True) gives it)")
    if D not in HEAD_DIMS:
        raise ValueError(f"attention_backward: head dim D = {D} is not supported; allowed: "
                         f"{', '.join(map(str, HEAD_DIMS))}")
    if H % H_kv:
        raise ValueError(f"attention_backward: q has H = {H} heads, not a multiple of k/v's "
                         f"H_kv = {H_kv}")
    names = {n: _dtype_name(x) for n, x in (("q", q), ("k", k), ("v", v), ("o", o),
                                            ("do", do))}
    for n, dt in names.items():
        if dt not in DTYPES:
            raise ValueError(f"attention_backward: {n} has dtype {dt}; allowed: "
                             f"{', '.join(DTYPES)}")
    if len(set(names.values())) != 1:
        raise ValueError(f"attention_backward: q, k, v, o and do must share one dtype, got "
                         f"{', '.join(f'{n} {d}' for n, d in names.items())}")
    return B, H, H_kv, N_q, N_kv, D


def _empty(like, shape, dtype_name, zero=False):
    if _is_numpy(like):
        import ml_dtypes
        np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                    "float32": np.float32}[dtype_name]
        return (np.zeros if zero else np.empty)(shape, np_dtype)
    import torch
    make = torch.zeros if zero else torch.empty
    return make(shape, device=like.device, dtype=getattr(torch, dtype_name))


def _nvmma(inner: int) -> gl.NVMMASharedLayout:
    return gl.NVMMASharedLayout(min(128, inner * 2), 16, rank=4)


def attention_backward(q, k, v, o, lse, do, *, causal=False, sm_scale=None):
    """Gradients (dq, dk, dv) of o = attention(q, k, v) given dO = `do`, the forward's
    output `o` and its row log-sum-exp `lse` (natural log, fp32, (B, H, N_q)). q, o, do:
    (B, H, N_q, D); k, v: (B, H_kv, N_kv, D); fp16 / bf16, D in {64, 128}, H a multiple of
    H_kv (dk and dv are summed over the query heads that share a k/v head). numpy arrays run
    in the CPU interpreter, CUDA tensors on the GPU."""
    B, H, H_kv, N_q, N_kv, D = _check_inputs(q, k, v, o, lse, do)
    dt = _dtype_name(q)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    q, k, v, o, lse, do = (_contiguous(x) for x in (q, k, v, o, lse, do))
    delta = _empty(q, (B, H, N_q), "float32")
    dq_acc = _empty(q, (B, H, N_q, D), "float32", zero=True)
    dq = _empty(q, (B, H, N_q, D), dt)
    dk = _empty(q, (B, H_kv, N_kv, D), dt)
    dv = _empty(q, (B, H_kv, N_kv, D), dt)
    n_rows = B * H * N_q
    if n_rows == 0:
        return dq, _zero(dk), _zero(dv)
    _delta_kernel[(-(-n_rows // ROWS.value),)](o, do, delta, n_rows, D, num_warps=4)
    q_desc = TensorDescriptor.from_tensor(q, [1, 1, BM.value, D], _nvmma(D))
    do_desc = TensorDescriptor.from_tensor(do, [1, 1, BM.value, D], _nvmma(D))
    k_desc = TensorDescriptor.from_tensor(k, [1, 1, BN_WG.value, D], _nvmma(D))
    v_desc = TensorDescriptor.from_tensor(v, [1, 1, BN_WG.value, D], _nvmma(D))
    grid = (-(-N_kv // BN.value), B * H_kv)
    attention_bwd_kernel[grid](q_desc, do_desc, k_desc, v_desc, lse, delta, dq_acc, dk, dv,
                               N_q, N_kv, H, H_kv, H // H_kv, float(sm_scale) * LOG2E.value,
                               float(sm_scale), STAGES, bool(causal), num_warps=4)
    block = 1024
    _dq_convert_kernel[(-(-n_rows * D // block),)](dq_acc, dq, n_rows * D, float(sm_scale),
                                                   block, num_warps=4)
    return dq, dk, dv


def _zero(x):
    x[...] = 0
    return x


def reference(q, k, v, do, causal=False, sm_scale=None):
    """(dq, dk, dv) in float64 on the CPU (rows that see no key get zero gradients)."""
    q64, k64, v64, do64 = (np.asarray(x).astype(np.float64) for x in (q, k, v, do))
    B, H, N_q, D = q64.shape
    H_kv, N_kv = k64.shape[1], k64.shape[2]
    group = H // H_kv
    kr, vr = np.repeat(k64, group, axis=1), np.repeat(v64, group, axis=1)
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    s = np.einsum("bhqd,bhkd->bhqk", q64, kr) * scale
    if causal:
        keep = np.arange(N_kv)[None, :] <= np.arange(N_q)[:, None] + (N_kv - N_q)
        s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    denom = p.sum(axis=-1, keepdims=True)
    p = p / np.where(denom > 0, denom, 1.0)
    o = np.einsum("bhqk,bhkd->bhqd", p, vr)
    dv = np.einsum("bhqk,bhqd->bhkd", p, do64)
    dp = np.einsum("bhqd,bhkd->bhqk", do64, vr)
    ds = p * (dp - (do64 * o).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bhkd->bhqd", ds, kr) * scale
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q64) * scale
    fold = lambda x: x.reshape(B, H_kv, group, N_kv, D).sum(axis=2)  # noqa: E731
    return dq, fold(dk), fold(dv)
