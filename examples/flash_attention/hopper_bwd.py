"""Flash attention backward for Hopper (sm_90a) in Gluon, in FlashAttention-3's structure.

    S = q k^T * sm_scale, P = exp(S - lse), dV = P^T dO, dP = dO V^T,
    dS = P * (dP - delta) with delta = rowsum(dO * O), dQ = dS K * sm_scale,
    dK = dS^T Q * sm_scale

Three kernels:

  1. `_delta_kernel`: delta = rowsum(dO * O) and neg_lse2 = -lse * log2(e) in fp32, per
     (batch, head) padded to whole 64-query blocks (zeros past N_q), so that the main kernel
     can load them by TMA next to Q and dO; and zeroes dQ's fp32 accumulator.
  2. `attention_bwd_kernel`: each CTA walks (128-key block, batch * kv head) tiles, one
     per CTA by default (`persistent=True`: one CTA per SM walks them all); the grid's
     last 1.5 waves are dealt out as query blocks (`split_tail`, non-causal), and causal's
     last heads go longest key block first (`lpt_tail`). Two partitions
     (gl.warp_specialize):

     producer: 1 warp, 24 regs            consumers: 2 warpgroups as one 8-warp partition,
                                          240 regs (warpgroup w: keys n0 + 64w .. +64)
     for each tile:                       for each tile:
       wait K, V free; TMA K, V             wait K, V
       for each query head of the group     for each query head of the group
         for each query block m               for each query block m
           wait stage free                      wait Q_m, dO_m, neg_lse2_m, delta_m
           TMA Q_m, dO_m, neg_lse2_m,           S^T = K Q_m^T, dP^T = V dO_m^T  (wgmma, smem)
               delta_m -> ring stage            P^T = exp2(S^T * scale*log2e + neg_lse2)
                                                dS^T = P^T * (dP^T - delta)
                                                dV += P^T dO_m                 (wgmma, P^T in regs)
                                                dK += dS^T Q_m                 (wgmma, dS^T in regs)
                                                dS^T -> shared memory (stmatrix)
                                                dQ_m = dS K: [64, D], each warpgroup
                                                       D/2 columns over all 128 keys
                                                       (wgmma, dS^T read transposed)
                                                dQ_m -> shared memory (fp32), release the
                                                stage, TMA reduce-add dQ_m into dq_acc
                                                (`tma.async_atomic_add`)
                                              free K, V (the producer loads the next
                                              tile's under this epilogue)
                                              dK *= sm_scale; store dK, dV

     Computing the transposed scores (keys as the wgmma M dimension) puts P^T and dS^T in
     the accumulator layout, from which they become the A operands of the dV and dK wgmmas
     in registers. dS^T goes to shared memory once, for dQ, which sums over the keys of both
     warpgroups; one TMA reduce per query block adds it to the fp32 buffer (4 boxes of 32
     columns at D = 128, `dq_layout`, issued by one thread), instead of 64 scalar atomics
     per thread. GQA: the CTA walks every query head that shares its K/V head, so dK and dV
     are summed in registers and stored once. Causal: query blocks entirely above the
     diagonal are never loaded and only blocks that cross it pay for the causal mask; see
     `_consumer` for why ragged ends need no mask on the query side.
  3. `_dq_convert_kernel`: dQ = dQ_acc * sm_scale in the input dtype.

In `_consumer` the two warpgroups meet at two partition barriers a query block (dS^T's
stores before the dQ wgmma, and dQ's stores before the stage's release and the reduce); ncu
found their warps waiting there 6.4 of every 17 cycles. The default, `_consumer_paired`,
needs one: two dS^T and two dQ tiles, per-warp stage releases, each dQ reduced after the
next block's barrier (1.04-1.11x `_consumer` on the H100).
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
from gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,  # noqa: E402
                                          warpgroup_mma, warpgroup_mma_wait)
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from gluon import stream_k  # noqa: E402
from gluon.warp_spec import pipeline  # noqa: E402
# reference: the float64 gradients (tests and benchmarks call hopper_bwd.reference).
from attention_reference import backward_reference as reference  # noqa: E402,F401
from attention_host import (BACKWARD_HEAD_DIMS, OUT_DTYPES, _dtype_name,  # noqa: E402
                            _is_numpy, check_backward_inputs, num_sms as device_sm_count)
from hopper import persistent_grid  # noqa: E402

BM = gl.constexpr(64)     # query rows per block (the N dimension of S^T)
BN = gl.constexpr(128)    # keys per CTA (64 per consumer warpgroup)
LOG2E = gl.constexpr(1.4426950408889634)
ROWS = gl.constexpr(64)   # rows per program of the pre- and post-pass


@gluon.jit
def _delta_kernel(o_ptr, do_ptr, lse_ptr, delta_ptr, neg_lse2_ptr, dq_acc_ptr, N_Q, N_PAD,
                 D: gl.constexpr):
    """For the rows of one (batch, head), padded to N_PAD (a multiple of BM):
    delta[n] = sum_d dO[n, d] * O[n, d] and neg_lse2[n] = -lse[n] * log2(e), both fp32, with
    0 for rows past N_q and neg_lse2 = 0 where lse = -inf (a row that sees no key: the main
    kernel masks its scores). Negated here so that P's exp2 argument is one FFMA per score
    (the main kernel had negated 16 values a thread in every block). Also zeroes the rows'
    fp32 dQ accumulator, which the main kernel's TMA reduces add into (as FlashAttention-3's
    pre-pass does: one launch and no separate fill). o, do, dq_acc: (rows, D) contiguous;
    lse: (rows,)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (D // 8), D // 8], [4, 1], [1, 0])
    row_l: gl.constexpr = gl.SliceLayout(1, layout)
    bh = gl.program_id(1)
    n = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=row_l)
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, layout))
    valid = n < N_Q
    offs = gl.expand_dims((bh * N_Q + n) * D, 1) + gl.expand_dims(cols, 0)
    keep = gl.expand_dims(valid, 1)
    o = gl.load(o_ptr + offs, mask=keep, other=0.0).to(gl.float32)
    do = gl.load(do_ptr + offs, mask=keep, other=0.0).to(gl.float32)
    gl.store(delta_ptr + bh * N_PAD + n, gl.sum(o * do, axis=1))
    gl.store(dq_acc_ptr + offs, gl.zeros([ROWS, D], gl.float32, layout), mask=keep)
    lse = gl.load(lse_ptr + bh * N_Q + n, mask=valid, other=0.0)
    gl.store(neg_lse2_ptr + bh * N_PAD + n,
             gl.where(lse == -float("inf"), 0.0, lse * -LOG2E))


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
def _head_blocks(first, end, u0, u1, g, N_Q):
    """The query blocks [lo, hi) of the group's head g that units [u0, u1) of a tile hold
    (unit g * cdiv(N_q, BM) + mb is block mb of head g; `split_tail` deals a tile's units
    out to two CTAs), within the blocks that see the tile's keys, [first, end)."""
    nq = gl.cdiv(N_Q, BM)
    lo = gl.maximum(first, gl.minimum(gl.maximum(u0 - g * nq, 0), nq))
    hi = gl.minimum(end, gl.minimum(gl.maximum(u1 - g * nq, 0), nq))
    return lo, gl.maximum(hi, lo)


@gluon.jit
def _tile(tile, N_KV, H_KV, num_tiles, lpt_heads):
    """(n0, b, hk) of a tile: its key block and (batch, kv head). Consecutive tiles are
    consecutive key blocks of one head, so CTAs side by side read the same Q and dO blocks
    from L2 and add into the same rows of dQ's buffer (staggering them measured 0.85-0.90x
    at N = 16k). Persistent CTAs walk tiles pid, pid + grid, ...: without a mask the tiles
    are the same length and the CTAs stay in step, within 2% of one CTA per tile on the
    H200 (2026-11-28, D = 128, 4k and 16k keys); causal tiles differ in length, the CTAs
    drift apart over many heads' Q, dO and dQ, more than L2 holds (0.58-0.66x at 16k),
    where one CTA per tile lets the hardware keep the running ones a contiguous window.
    The last lpt_heads heads (`lpt_tail`) are the exception: their tiles go key block by
    key block across those heads, causal's longest (first) blocks first, so that the grid
    does not end on a late head's long tiles."""
    n_kb = gl.cdiv(N_KV, BN)
    bhk = tile // n_kb
    kb = tile % n_kb
    tail = tile - (num_tiles // n_kb - lpt_heads) * n_kb
    if tail >= 0:
        bhk = num_tiles // n_kb - lpt_heads + tail % lpt_heads
        kb = tail // lpt_heads
    return kb * BN, bhk // H_KV, bhk % H_KV


@gluon.constexpr_function
def _s_layout():
    """S^T and dP^T, [keys, queries]: warpgroup w has keys 64w .. 64w + 63."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1],
                                     instr_shape=[16, BM, 16])


@gluon.constexpr_function
def _acc_layout(D):
    """dK and dV, [keys, D]."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1],
                                     instr_shape=[16, D, 16])


@gluon.constexpr_function
def _dq_layout(D):
    """dQ, [queries, D]: warpgroup w has columns D/2 * w .. + D/2."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                     instr_shape=[16, D // 2, 16])


@gluon.jit
def _tile_start(tile, kv_ready, t, N_Q, N_KV, H_KV, num_tiles, lpt_heads, D: gl.constexpr,
                CAUSAL: gl.constexpr):
    """A tile's key block and head, its keys (and which are real), zeroed dK and dV, its
    query blocks; waits for its K and V."""
    n0, b, hk = _tile(tile, N_KV, H_KV, num_tiles, lpt_heads)
    keys = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, _s_layout()))
    key_ok = gl.expand_dims(keys < N_KV, 1)
    dk = gl.zeros([BN, D], gl.float32, _acc_layout(D))
    dv = gl.zeros([BN, D], gl.float32, _acc_layout(D))
    first, end = _q_blocks(n0, N_Q, N_KV, CAUSAL)
    mbarrier.wait(kv_ready, t & 1)
    return n0, b, hk, keys, key_ok, dk, dv, first, end


@gluon.jit
def _store_dk_dv(dk, dv, dk_ptr, dv_ptr, n0, b, hk, H_KV, N_KV, sm_scale):
    """The tile's epilogue: dK (scaled) and dV in the input dtype, rows past N_kv clipped."""
    acc_layout: gl.constexpr = dk.type.layout
    D: gl.constexpr = dk.shape[1]
    rows = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, acc_layout))
    d_cols = gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout))
    offs = (gl.expand_dims(((b * H_KV + hk) * N_KV + rows) * D, 1)
            + gl.expand_dims(d_cols, 0))
    keep = gl.expand_dims(rows < N_KV, 1)
    gl.store(dk_ptr + offs, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=keep)
    gl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=keep)


@gluon.jit
def _combine_dk_dv(dk, dv, part_ptr, count_ptr, slot, side):
    """(finish, dK, dV) of a tile whose query blocks two CTAs share (`split_tail`): each
    stores its fp32 partial dK and dV in its side of the pair's slot and counts itself in;
    the second to arrive adds the other's partials to its own and gets finish = True, so
    neither waits for the other (attention_tiles.combine does the same for the forward)."""
    acc_layout: gl.constexpr = dk.type.layout
    D: gl.constexpr = dk.shape[1]
    TILE: gl.constexpr = BN * D
    offs = (gl.expand_dims(gl.arange(0, BN, layout=gl.SliceLayout(1, acc_layout)), 1) * D
            + gl.expand_dims(gl.arange(0, D, layout=gl.SliceLayout(0, acc_layout)), 0))
    mine = part_ptr + (slot * 2 + side) * (2 * TILE)
    theirs = part_ptr + (slot * 2 + 1 - side) * (2 * TILE)
    gl.store(mine + offs, dk)
    gl.store(mine + TILE + offs, dv)
    # Every warp's stores before one thread's gpu-scope release (CUTLASS's fix-up order).
    gl.thread_barrier()
    count = count_ptr + slot
    finish = gl.atomic_add(count, 1, sem="acq_rel", scope="gpu") == 1
    if finish:
        gl.store(count, 0)  # the next launch finds it at 0
        dk = dk + gl.load(theirs + offs)
        dv = dv + gl.load(theirs + TILE + offs)
    return finish, dk, dv


@gluon.jit
def _producer(q_desc, do_desc, k_desc, v_desc, neg_lse2_desc, delta_desc, q_ring, do_ring,
              neg_lse2_ring, delta_ring, k_smem, v_smem, kv_ready, kv_empty, qpipe, N_Q,
              N_KV, N_PAD, H_KV, GROUP, num_tiles, num_sms, lpt_heads, CAUSAL: gl.constexpr,
              SPLIT: gl.constexpr):
    item = 0
    t = 0
    units = GROUP * gl.cdiv(N_Q, BM)
    for w in range(stream_k.tail_num_work(num_tiles, units, num_sms, SPLIT)):
        tile, u0, u1, _, _ = stream_k.tail_work(w, num_tiles, units, num_sms, SPLIT)
        n0, b, hk = _tile(tile, N_KV, H_KV, num_tiles, lpt_heads)
        # K and V have one buffer: the next tile's load waits until the consumers' last
        # wgmma of this one has read them, and then runs under their dK / dV epilogue
        # (this tile's Q / dO blocks are already in the ring ahead of it).
        mbarrier.wait(kv_empty, (t & 1) ^ 1, pred=t > 0)
        mbarrier.expect(kv_ready, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [b, hk, n0, 0], kv_ready, k_smem)
        tma.async_copy_global_to_shared(v_desc, [b, hk, n0, 0], kv_ready, v_smem)
        first, end = _q_blocks(n0, N_Q, N_KV, CAUSAL)
        for g in range(GROUP):
            h = hk * GROUP + g
            lo, hi = _head_blocks(first, end, u0, u1, g, N_Q)
            for mb in range(lo, hi):
                s, ready = pipeline.producer_acquire(qpipe, item)
                mbarrier.expect(ready, q_desc.block_type.nbytes + do_desc.block_type.nbytes
                                + neg_lse2_desc.block_type.nbytes
                                + delta_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(q_desc, [b, h, mb * BM, 0], ready,
                                                q_ring.index(s))
                tma.async_copy_global_to_shared(do_desc, [b, h, mb * BM, 0], ready,
                                                do_ring.index(s))
                bh = b * H_KV * GROUP + h
                tma.async_copy_global_to_shared(neg_lse2_desc, [bh, mb * BM], ready,
                                                neg_lse2_ring.index(s))
                tma.async_copy_global_to_shared(delta_desc, [bh, mb * BM], ready,
                                                delta_ring.index(s))
                item += 1
        t += 1


@gluon.jit
def _block_grads(q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, qpipe, item, dv, dk, keys,
                 key_ok, n0, m0, off, N_KV, qk_scale, CAUSAL: gl.constexpr,
                 EARLY_DV: gl.constexpr):
    """One query block up to the dK wgmma's issue: wait for its Q / dO stage, S^T and dP^T,
    P^T and dS^T in registers, dV += P^T dO and dK += dS^T Q issued. Returns (dS^T, dV,
    dK, P^T and dS^T as wgmma operands)."""
    D: gl.constexpr = q_ring.shape[4]
    dtype: gl.constexpr = q_ring.dtype
    a_layout: gl.constexpr = gl.DotOperandLayout(
        operand_index=0, parent=_acc_layout(D), k_width=32 // dtype.primitive_bitwidth)
    col_s: gl.constexpr = gl.SliceLayout(0, _s_layout())
    s_zero = gl.zeros([BN, BM], gl.float32, _s_layout())
    stage = pipeline.consumer_wait(qpipe, item)
    q = q_ring.index(stage).reshape([BM, D])
    do = do_ring.index(stage).reshape([BM, D])
    st = warpgroup_mma(k, q.permute([1, 0]), s_zero, use_acc=False, is_async=True)
    dpt = warpgroup_mma(v, do.permute([1, 0]), s_zero, use_acc=False, is_async=True)
    neg_lse2 = neg_lse2_ring.index(stage).reshape([BM]).load(col_s)
    st = warpgroup_mma_wait(1, deps=[st])
    pt = gl.exp2(gl.fma(st, qk_scale, gl.expand_dims(neg_lse2, 0)))
    delta = delta_ring.index(stage).reshape([BM]).load(col_s)
    if CAUSAL:  # only blocks crossing the diagonal pay for the causal mask
        if m0 + off < n0 + BN - 1:
            queries = m0 + off + gl.arange(0, BM, layout=col_s)
            pt = gl.where(gl.expand_dims(keys, 1) <= gl.expand_dims(queries, 0),
                          pt, 0.0)
    if n0 + BN > N_KV:  # keys past N_kv: only in the last key block
        pt = gl.where(key_ok, pt, 0.0)
    if EARLY_DV:
        # dV = P^T dO goes to the tensor cores straight after dP^T, and dS^T is computed
        # under it.
        pt_op = gl.convert_layout(pt.to(dtype), a_layout)
        dv = warpgroup_mma(pt_op, do, dv, is_async=True)
        dpt = warpgroup_mma_wait(1, deps=[dpt])
        dst = (pt * (dpt - gl.expand_dims(delta, 0))).to(dtype)
    else:
        dpt = warpgroup_mma_wait(0, deps=[dpt])
        dst = (pt * (dpt - gl.expand_dims(delta, 0))).to(dtype)
        pt_op = gl.convert_layout(pt.to(dtype), a_layout)
        dv = warpgroup_mma(pt_op, do, dv, is_async=True)
    ds_op = gl.convert_layout(dst, a_layout)
    dk = warpgroup_mma(ds_op, q, dk, is_async=True)
    return dst, dv, dk, pt_op, ds_op


@gluon.jit
def _consumer(q_ring, do_ring, neg_lse2_ring, delta_ring, k_smem, v_smem, ds_smem, dq_smem,
              kv_ready, kv_empty, qpipe, dqpipe, dq_desc, dk_ptr, dv_ptr, N_Q, N_KV,
              H_KV, GROUP, num_tiles, qk_scale, sm_scale, lpt_heads, CAUSAL: gl.constexpr,
              DQ_WRITER: gl.constexpr, EARLY_DV: gl.constexpr):
    """Both consumer warpgroups as one 8-warp partition: warpgroup w owns keys
    n0 + 64w .. +64 in S^T, dP^T, dV and dK (warps_per_cta [8, 1]) and columns
    D/2 * w .. + D/2 of dQ (warps_per_cta [4, 2]), which sums over all 128 keys through dS^T
    in shared memory.

    No mask is needed for query rows past N_q: TMA fills their Q and dO with zeros and the
    pre-pass their neg_lse2 and delta, so their P is 1 and dP, dS and every product they
    enter are 0 (and their dQ rows are clipped by the reduce). Keys past N_kv (the last key
    block) are masked: exp2(neg_lse2) of their zero scores could overflow where lse is very
    negative,
    and an inf in dS times K's zero row would be a NaN in dQ."""
    D: gl.constexpr = q_ring.shape[4]
    off = N_KV - N_Q
    k = k_smem.reshape([BN, D])
    v = v_smem.reshape([BN, D])
    dq_view = dq_smem.index(0).reshape([BM, D])
    dq_zero = gl.zeros([BM, D], gl.float32, _dq_layout(D))
    item = 0
    t = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        n0, b, hk, keys, key_ok, dk, dv, first, end = _tile_start(
            tile, kv_ready, t, N_Q, N_KV, H_KV, num_tiles, lpt_heads, D, CAUSAL)
        for g in range(GROUP):
            h = hk * GROUP + g
            for mb in range(first, end):
                m0 = mb * BM
                dst, dv, dk, pt_op, ds_op = _block_grads(
                    q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, qpipe, item, dv, dk,
                    keys, key_ok, n0, m0, off, N_KV, qk_scale, CAUSAL, EARLY_DV)
                if not DQ_WRITER:
                    # The previous block's dQ reduce is done reading dq_smem (long since):
                    # waited for here, the barrier that orders dS^T's stores before the dQ
                    # wgmma orders this wait before dq_smem's stores too.
                    tma.store_wait(0)
                # dS^T once into shared memory: dQ = dS K sums over both warpgroups' keys.
                ds_smem.store(dst)
                fence_async_shared()
                dq = warpgroup_mma(ds_smem.permute([1, 0]), k, dq_zero, use_acc=False,
                                   is_async=True)
                dv, dk, dq, pt_op, ds_op = warpgroup_mma_wait(0, deps=[dv, dk, dq, pt_op,
                                                                       ds_op])
                if DQ_WRITER:
                    # A dQ stage the writer warp's reduce has read. Each warp then hands its
                    # dQ rows and its Q / dO stage over on its own (per-warp arrivals): no
                    # barrier of the 8 warps, and no reduce to issue here.
                    dq_stage, _ = pipeline.producer_acquire(dqpipe, item)
                    dq_smem.index(dq_stage).reshape([BM, D]).store(dq)
                    pipeline.producer_commit(dqpipe, item, per_warp=True)
                    pipeline.consumer_release(qpipe, item, per_warp=True)
                else:
                    dq_view.store(dq)
                    fence_async_shared()
                    # Released after dQ's stores: the barrier before the release's arrival
                    # also orders every thread's dQ stores before the reduce reads them.
                    pipeline.consumer_release(qpipe, item)
                    # dQ: one TMA reduce-add of the 64 x D fp32 tile (rows past N_q
                    # clipped).
                    tma.async_atomic_add(dq_desc, [b, h, m0, 0], dq_smem.index(0))
                item += 1
        # Every wgmma that read K and V is done: the producer may load the next tile's.
        mbarrier.arrive(kv_empty)
        _store_dk_dv(dk, dv, dk_ptr, dv_ptr, n0, b, hk, H_KV, N_KV, sm_scale)
        t += 1
    if not DQ_WRITER:
        tma.store_wait(0)


@gluon.jit
def _paired_half(q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, ds_cur, dq_cur, dq_prev,
                 qpipe, dq_desc, item, dv, dk, keys, key_ok, n0, mb, off, b, h, prev_m0,
                 prev_ok, N_KV, qk_scale, CAUSAL: gl.constexpr):
    """One query block of `_consumer_paired`: dS^T into ds_cur and dQ into dq_cur, and,
    after the block's one partition barrier, the TMA reduce of the previous block's dQ
    (dq_prev, rows from prev_m0) when prev_ok. Each warp releases its Q / dO stage after
    the wait for all three wgmmas: releasing it between dV's and dK's wait and dQ's (they
    last read the stage) measured 0.95-0.98x (H100, 2026-12-06 19:50 UTC)."""
    D: gl.constexpr = q_ring.shape[4]
    dst, dv, dk, pt_op, ds_op = _block_grads(
        q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, qpipe, item, dv, dk, keys, key_ok,
        n0, mb * BM, off, N_KV, qk_scale, CAUSAL, False)
    # The reduce of two blocks back (issued one block ago) is done reading dq_cur: waited
    # for here, before the barrier that also orders dq_cur's stores below.
    tma.store_wait(0)
    ds_cur.store(dst)
    fence_async_shared()
    # The partition barrier (dS^T's stores before the dQ wgmma reads them) also orders every
    # warp's stores of the previous block's dQ (fenced) before its reduce.
    dq = warpgroup_mma(ds_cur.permute([1, 0]), k, gl.zeros([BM, D], gl.float32, _dq_layout(D)),
                       use_acc=False, is_async=True)
    if prev_ok:
        tma.async_atomic_add(dq_desc, [b, h, prev_m0, 0], dq_prev)
    dv, dk, dq, pt_op, ds_op = warpgroup_mma_wait(0, deps=[dv, dk, dq, pt_op, ds_op])
    pipeline.consumer_release(qpipe, item, per_warp=True)
    dq_cur.reshape([BM, D]).store(dq)
    fence_async_shared()
    return dv, dk


@gluon.jit
def _consumer_paired(q_ring, do_ring, neg_lse2_ring, delta_ring, k_smem, v_smem, ds_a, ds_b,
                     dq_a, dq_b, kv_ready, kv_empty, qpipe, dq_desc, dk_ptr, dv_ptr, N_Q, N_KV,
                     H_KV, GROUP, num_tiles, qk_scale, sm_scale, num_sms, split_part,
                     split_count, lpt_heads, CAUSAL: gl.constexpr, SPLIT: gl.constexpr):
    """`_consumer` with one partition barrier a query block instead of two (`paired`): the
    blocks go in pairs through two dS^T tiles (A, B) and two dQ tiles, so a block's dS^T
    store never meets the previous block's dQ wgmma, still reading the other tile; each
    block's dQ is reduced by TMA after the next block's barrier; each warp releases its
    Q / dO stage on its own. Separate allocations (not stages of one) and a loop body of two
    blocks let the shared-memory hazard analysis tell the tiles apart. An odd last block
    goes through A after the loop, and each head's last dQ is reduced after a barrier.
    With SPLIT the CTA walks pieces of tiles (`stream_k.tail_work`); a tile cut between two
    CTAs is finished by the second, from both partial dK and dV."""
    D: gl.constexpr = q_ring.shape[4]
    off = N_KV - N_Q
    k = k_smem.reshape([BN, D])
    v = v_smem.reshape([BN, D])
    item = 0
    t = 0
    units = GROUP * gl.cdiv(N_Q, BM)
    for w in range(stream_k.tail_num_work(num_tiles, units, num_sms, SPLIT)):
        tile, u0, u1, slot, side = stream_k.tail_work(w, num_tiles, units, num_sms, SPLIT)
        n0, b, hk, keys, key_ok, dk, dv, q_first, q_end = _tile_start(
            tile, kv_ready, t, N_Q, N_KV, H_KV, num_tiles, lpt_heads, D, CAUSAL)
        for g in range(GROUP):
            h = hk * GROUP + g
            first, end = _head_blocks(q_first, q_end, u0, u1, g, N_Q)
            pairs = (end - first) // 2
            for p in range(pairs):
                mb = first + 2 * p
                dv, dk = _paired_half(q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, ds_a,
                                      dq_a, dq_b, qpipe, dq_desc, item, dv, dk, keys, key_ok,
                                      n0, mb, off, b, h, (mb - 1) * BM, p > 0, N_KV, qk_scale,
                                      CAUSAL)
                dv, dk = _paired_half(q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, ds_b,
                                      dq_b, dq_a, qpipe, dq_desc, item + 1, dv, dk, keys,
                                      key_ok, n0, mb + 1, off, b, h, mb * BM, True, N_KV,
                                      qk_scale, CAUSAL)
                item += 2
            last = end - 1
            if (end - first) % 2 == 1:
                dv, dk = _paired_half(q_ring, do_ring, neg_lse2_ring, delta_ring, k, v, ds_a,
                                      dq_a, dq_b, qpipe, dq_desc, item, dv, dk, keys, key_ok,
                                      n0, last, off, b, h, (last - 1) * BM, pairs > 0, N_KV,
                                      qk_scale, CAUSAL)
                item += 1
                gl.thread_barrier()  # every warp's dQ rows of the last block are stored
                tma.async_atomic_add(dq_desc, [b, h, last * BM, 0], dq_a)
            elif pairs > 0:
                gl.thread_barrier()
                tma.async_atomic_add(dq_desc, [b, h, last * BM, 0], dq_b)
        # Every wgmma that read K and V is done: the producer may load the next tile's.
        mbarrier.arrive(kv_empty)
        if SPLIT:
            finish = slot < 0
            if slot >= 0:
                finish, dk, dv = _combine_dk_dv(dk, dv, split_part, split_count, slot, side)
            if finish:
                _store_dk_dv(dk, dv, dk_ptr, dv_ptr, n0, b, hk, H_KV, N_KV, sm_scale)
        else:
            _store_dk_dv(dk, dv, dk_ptr, dv_ptr, n0, b, hk, H_KV, N_KV, sm_scale)
        t += 1
    tma.store_wait(0)


@gluon.jit
def _dq_writer(dq_desc, dq_smem, dqpipe, N_Q, N_KV, H_KV, GROUP, num_tiles, lpt_heads,
               CAUSAL: gl.constexpr):
    """FlashAttention-3's dQ writer warp: for each query block the consumers finish, wait
    until all 8 consumer warps have stored their dQ rows, add the tile into dq_acc with
    one TMA reduce, and free dq_smem once the reduce has read it."""
    item = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        n0, b, hk = _tile(tile, N_KV, H_KV, num_tiles, lpt_heads)
        first, end = _q_blocks(n0, N_Q, N_KV, CAUSAL)
        for g in range(GROUP):
            h = hk * GROUP + g
            for mb in range(first, end):
                s = pipeline.consumer_wait(dqpipe, item)
                tma.async_atomic_add(dq_desc, [b, h, mb * BM, 0], dq_smem.index(s))
                tma.store_wait(0)
                pipeline.consumer_release(dqpipe, item)
                item += 1


@gluon.jit
def attention_bwd_kernel(q_desc, do_desc, k_desc, v_desc, dq_desc, neg_lse2_desc, delta_desc,
                         dk_ptr, dv_ptr, N_Q, N_KV, N_PAD, H_KV, GROUP, num_tiles, qk_scale,
                         sm_scale, num_sms, split_part, split_count, lpt_heads,
                         STAGES: gl.constexpr,
                         CAUSAL: gl.constexpr, DQ_WRITER: gl.constexpr = False,
                         EARLY_DV: gl.constexpr = False, DQ_STAGES: gl.constexpr = 1,
                         PAIRED: gl.constexpr = False, SPLIT: gl.constexpr = False):
    q_ring = gl.allocate_shared_memory(q_desc.dtype, [STAGES] + q_desc.block_shape,
                                       q_desc.layout)
    do_ring = gl.allocate_shared_memory(do_desc.dtype, [STAGES] + do_desc.block_shape,
                                        do_desc.layout)
    neg_lse2_ring = gl.allocate_shared_memory(gl.float32,
                                              [STAGES] + neg_lse2_desc.block_shape,
                                              neg_lse2_desc.layout)
    delta_ring = gl.allocate_shared_memory(gl.float32, [STAGES] + delta_desc.block_shape,
                                           delta_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, k_desc.block_shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, v_desc.block_shape, v_desc.layout)
    # dS^T as [keys, queries], 128-byte rows of 64 queries: the dQ wgmma reads it as dS
    # (queries contiguous, an MN-major A operand).
    ds_smem = gl.allocate_shared_memory(q_desc.dtype, [BN, BM],
                                        gl.NVMMASharedLayout(128, q_desc.dtype.primitive_bitwidth))
    dq_smem = gl.allocate_shared_memory(dq_desc.dtype, [DQ_STAGES] + dq_desc.block_shape,
                                        dq_desc.layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    mbarrier.init(kv_empty, count=1)
    # DQ_WRITER, PAIRED: the 8 consumer warps release stages (and hand dQ over) each on its
    # own.
    ARRIVALS: gl.constexpr = 8 if DQ_WRITER or PAIRED else 1
    qpipe = pipeline.create(STAGES, ARRIVALS)
    # DQ_WRITER: a ring of DQ_STAGES dQ tiles, filled by the consumers' 8 warps.
    dqpipe = None
    if DQ_WRITER:
        dqpipe = pipeline.create(DQ_STAGES, 1, ARRIVALS)
    consumer = (_consumer, (q_ring, do_ring, neg_lse2_ring, delta_ring, k_smem, v_smem, ds_smem,
                            dq_smem, kv_ready, kv_empty, qpipe, dqpipe, dq_desc,
                            dk_ptr, dv_ptr, N_Q, N_KV, H_KV, GROUP, num_tiles, qk_scale,
                            sm_scale, lpt_heads, CAUSAL, DQ_WRITER, EARLY_DV))
    producer = (_producer, (q_desc, do_desc, k_desc, v_desc, neg_lse2_desc, delta_desc, q_ring,
                            do_ring, neg_lse2_ring, delta_ring, k_smem, v_smem, kv_ready,
                            kv_empty, qpipe, N_Q, N_KV, N_PAD, H_KV, GROUP, num_tiles,
                            num_sms, lpt_heads, CAUSAL, SPLIT))
    if PAIRED:
        ds_b = gl.allocate_shared_memory(q_desc.dtype, [BN, BM], ds_smem.layout)
        dq_b = gl.allocate_shared_memory(dq_desc.dtype, dq_desc.block_shape, dq_desc.layout)
        consumer = (_consumer_paired, (q_ring, do_ring, neg_lse2_ring, delta_ring, k_smem,
                                       v_smem, ds_smem, ds_b, dq_smem.index(0), dq_b, kv_ready,
                                       kv_empty, qpipe, dq_desc, dk_ptr, dv_ptr, N_Q, N_KV,
                                       H_KV, GROUP, num_tiles, qk_scale, sm_scale, num_sms,
                                       split_part, split_count, lpt_heads, CAUSAL, SPLIT))
        gl.warp_specialize([consumer, producer], [1], [24])
    elif DQ_WRITER:
        writer = (_dq_writer, (dq_desc, dq_smem, dqpipe, N_Q, N_KV, H_KV, GROUP, num_tiles,
                               lpt_heads, CAUSAL))
        gl.warp_specialize([consumer, producer, writer], [1, 1], [24, 24])
    else:
        gl.warp_specialize([consumer, producer], [1], [24])
    pipeline.invalidate(qpipe)
    mbarrier.invalidate(kv_ready)
    mbarrier.invalidate(kv_empty)
    if DQ_WRITER:
        pipeline.invalidate(dqpipe)


# ---- host side ---------------------------------------------------------------------------------

DTYPES = OUT_DTYPES                 # fp16, bf16
HEAD_DIMS = BACKWARD_HEAD_DIMS      # 64, 128
# Q/dO ring depth (32.5 KB a stage at D = 128, next to 64 KB of K and V and, paired, 32 KB
# of dS^T and 64 KB of dQ: 225 KB, so the paired default has room for 2). The unpaired
# consumer measured 1.02-1.07x faster with 3 (settled samples, H100, 2026-12-06 19:28 UTC),
# and 0.90-0.94x the paired one with them (19:50); `stages=3` chooses it.
STAGES = 2
# split_tail's and lpt_tail's defaults (see attention_backward).
SPLIT_TAIL = True
LPT_TAIL = True


def _contiguous(x):
    return np.ascontiguousarray(x) if _is_numpy(x) else x.contiguous()


def _empty(like, shape, dtype_name):
    if _is_numpy(like):
        import ml_dtypes
        np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                    "float32": np.float32}[dtype_name]
        return np.empty(shape, np_dtype)
    import torch
    return torch.empty(shape, device=like.device, dtype=getattr(torch, dtype_name))


def _nvmma(inner: int) -> gl.NVMMASharedLayout:
    return gl.NVMMASharedLayout(min(128, inner * 2), 16, rank=4)


def dq_layout(swizzle: int) -> gl.NVMMASharedLayout:
    """dQ's fp32 tile in shared memory, reduced into dq_acc by TMA in boxes of `swizzle`
    bytes (8, 16 or 32 columns). With 32-byte boxes a warp's stores of one accumulator
    register pair cover 8 whole rows, 256 contiguous bytes (no bank conflict), and each
    thread's stores sit at one address plus constants; 128-byte boxes cost one more shared
    wavefront per store but issue 4 TMA reduces a block instead of 16 (D = 128), which
    measured 0.99-1.12x faster on the H200 (2026-11-28), so they are the default."""
    return gl.NVMMASharedLayout(swizzle, 32, rank=4)


DQ_SWIZZLE = 128
# neg_lse2 and delta: 64 fp32 per query block, read by every thread of a column (broadcast).
ROW_LAYOUT = gl.NVMMASharedLayout(0, 32, rank=2)


def attention_backward(q, k, v, o, lse, do, *, causal=False, sm_scale=None,
                       dq_swizzle=DQ_SWIZZLE, persistent=False, dq_writer=False,
                       early_dv=False, dq_stages=1, stages=None, paired=None,
                       split_tail=None, num_sms=None, lpt_tail=None, lpt_heads=None):
    """Gradients (dq, dk, dv) of o = attention(q, k, v) given dO = `do`, the forward's
    output `o` and its row log-sum-exp `lse` (natural log, fp32, (B, H, N_q)). q, o, do:
    (B, H, N_q, D); k, v: (B, H_kv, N_kv, D); fp16 / bf16, D in {64, 128}, H a multiple of
    H_kv (dk and dv are summed over the query heads that share a k/v head). numpy arrays run
    in the CPU interpreter, CUDA tensors on the GPU. `dq_swizzle` (32, 64 or 128 bytes):
    dQ's shared tile, reduced by TMA in boxes of that width (16, 8 or 4 boxes at D = 128;
    wider boxes issue fewer TMA messages, and the dQ stores then cost one more shared
    wavefront each, gl.bank_conflicts); `dq_layout` says why 128 is the default.
    `persistent`: one CTA per SM walks the (key block, head) tiles, loading the next tile's
    K and V under this one's dK / dV epilogue, instead of one CTA per tile (see `_tile`
    for what it measured). `stages`: the Q / dO ring's depth (default STAGES).

    Options measured on the H100 and left off (examples/flash_attention/README.md,
    "Measured (backward)", 2026-12-06, against the unpaired consumer and before the
    benchmarks settled their samples): `dq_writer`, a third partition, one warp, issues
    the dQ reduces (FlashAttention-3's dQ writer warp) while the consumer warps hand dQ and
    the Q / dO stages over each on its own, without a barrier of the 8 warps (about 3%
    slower); `dq_stages` (1 or 2, with `dq_writer`): dQ tiles in shared memory, so that
    the consumers need not wait for the writer's last reduce to have read one (with
    stages=2 at D = 128, where it fits: level with ours); `early_dv`: dV = P^T dO issued
    right after P^T's exp2s, before dP^T's wait, so that dS^T is computed under it (no
    gain; causal builds spill 8-12 bytes).

    `paired` (the default where the options allow it: None means paired unless one of
    `dq_writer`, `early_dv`, `dq_stages=2` or `stages` other than 2 is asked for): query
    blocks in pairs through two dS^T and two dQ tiles, one partition barrier a block instead
    of two (`_consumer_paired`); 2 Q / dO stages, so that it fits. Measured 1.04-1.11x the
    unpaired kernel in two runs (H100, 2026-12-06 19:26 and 19:28 UTC, N = 4k-16k, causal
    and not); `paired=False` chooses the unpaired one.

    `split_tail` (paired, one CTA a tile; non-causal, where the tiles are alike): the
    tiles of the last full wave and the ragged one are dealt out to `num_sms` CTAs (the
    GPU's SM count by default, 132 in the interpreter) as query blocks, about 1.5 tiles'
    worth each, instead of leaving part of the SMs idle through the last wave (2048 tiles
    on 132 SMs are 15.5 waves); a tile cut between two CTAs is finished by the second from
    both partial dK and dV (`gluon/stream_k.py`'s tail schedule). On by default
    (SPLIT_TAIL): 1.013-1.038x in two copies of it against two plain copies of ours at
    0.989-1.010x (H100, 2026-12-07 04:50 UTC, 4k and 8k, 9 rounds), as the 3% idle half
    wave predicts.

    `lpt_tail` (causal): the CTAs of a head-major grid run a head's key blocks longest
    first, but the grid ends on the last heads' long first blocks (a list-scheduling model
    of 64 heads x 32 key blocks on 132 SMs, 4k keys, ends 6.8% past the mean). With it the
    last `lpt_heads` heads (default 3 x cdiv(num_sms, key blocks a head): about three
    waves) go key block by key block across heads, longest first (the model: 1.0%).
    On by default (LPT_TAIL): 1.052x at 4k and 1.050x at 8k against copies of ours at
    1.003-1.010x (H100, 2026-12-07 04:49 UTC, 7 rounds)."""
    B, H, H_kv, N_q, N_kv, D = check_backward_inputs(q, k, v, o, lse, do)
    if dq_swizzle not in (32, 64, 128) or isinstance(dq_swizzle, bool):
        raise ValueError(f"attention_backward: dq_swizzle must be 32, 64 or 128 (bytes), got "
                         f"{dq_swizzle!r}")
    if dq_stages not in (1, 2) or isinstance(dq_stages, bool) or \
            (dq_stages == 2 and not dq_writer):
        raise ValueError(f"attention_backward: dq_stages must be 1, or 2 with dq_writer=True, "
                         f"got {dq_stages!r} (dq_writer={dq_writer!r})")
    unpaired = dq_writer or early_dv or dq_stages != 1 or stages not in (None, 2)
    if paired is None:
        paired = not unpaired
    elif paired and unpaired:
        raise ValueError(f"attention_backward: paired=True takes 2 Q / dO stages and none of "
                         f"dq_writer, early_dv and dq_stages=2 (its dS^T and dQ tiles fill the "
                         f"shared memory), got stages={stages!r}, dq_writer={dq_writer!r}, "
                         f"early_dv={early_dv!r}, dq_stages={dq_stages!r}")
    if stages is None:
        stages = STAGES
    if stages not in (2, 3, 4) or isinstance(stages, bool):
        raise ValueError(f"attention_backward: stages must be 2, 3 or 4, got {stages!r}")
    if split_tail and (persistent or not paired):
        raise ValueError(f"attention_backward: split_tail=True needs the paired consumer and "
                         f"one CTA a tile, got paired={paired!r}, persistent={persistent!r}")
    for name, value, least in (("num_sms", num_sms, 1), ("lpt_heads", lpt_heads, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < least):
            raise ValueError(f"attention_backward: {name} must be an int >= {least}, got "
                             f"{value!r}")
    dt = _dtype_name(q)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    q, k, v, o, lse, do = (_contiguous(x) for x in (q, k, v, o, lse, do))
    # delta and lse * log2(e) per (batch, head), padded to whole query blocks: the main
    # kernel loads them with Q and dO by TMA (a row stride of N_pad * 4 bytes is 16-byte
    # aligned, which N_q * 4 need not be).
    n_pad = -(-N_q // BM.value) * BM.value
    delta = _empty(q, (B * H, n_pad), "float32")
    neg_lse2 = _empty(q, (B * H, n_pad), "float32")
    dq_acc = _empty(q, (B, H, N_q, D), "float32")  # zeroed by _delta_kernel
    dq = _empty(q, (B, H, N_q, D), dt)
    dk = _empty(q, (B, H_kv, N_kv, D), dt)
    dv = _empty(q, (B, H_kv, N_kv, D), dt)
    n_rows = B * H * N_q
    if n_rows == 0:
        return dq, _zero(dk), _zero(dv)
    if N_kv == 0:  # every row sees no key: o = 0 whatever q is (FlashAttention's dq = 0)
        return _zero(dq), dk, dv
    _delta_kernel[(n_pad // ROWS.value, B * H)](o, do, lse, delta, neg_lse2, dq_acc, N_q,
                                                n_pad, D, num_warps=4)
    q_desc = TensorDescriptor.from_tensor(q, [1, 1, BM.value, D], _nvmma(D))
    do_desc = TensorDescriptor.from_tensor(do, [1, 1, BM.value, D], _nvmma(D))
    k_desc = TensorDescriptor.from_tensor(k, [1, 1, BN.value, D], _nvmma(D))
    v_desc = TensorDescriptor.from_tensor(v, [1, 1, BN.value, D], _nvmma(D))
    dq_desc = TensorDescriptor.from_tensor(dq_acc, [1, 1, BM.value, D], dq_layout(dq_swizzle))
    neg_lse2_desc = TensorDescriptor.from_tensor(neg_lse2, [1, BM.value], ROW_LAYOUT)
    delta_desc = TensorDescriptor.from_tensor(delta, [1, BM.value], ROW_LAYOUT)
    n_kb = -(-N_kv // BN.value)  # key blocks a head
    num_tiles = n_kb * B * H_kv
    grid = persistent_grid(q, num_tiles) if persistent else (num_tiles,)
    if num_sms is None:
        num_sms = 132 if _is_numpy(q) else device_sm_count()
    split = (SPLIT_TAIL if split_tail is None else bool(split_tail)) and paired and \
        not persistent and not causal and stream_k.enabled(num_tiles, num_sms)
    # split: a slot of partial dK and dV (fp32, both sides) per split-part CTA, and its
    # arrival count, which every launch leaves at 0.
    part = _empty(q, (num_sms, 2, 2, BN.value, D) if split else (1,), "float32")
    count = _zeros_i32(q, num_sms if split else 1)
    if split:
        grid = (stream_k.tail_grid(num_tiles, num_sms),)
    if lpt_heads is None:
        lpt = (LPT_TAIL if lpt_tail is None else lpt_tail) and causal
        lpt_heads = 3 * -(-num_sms // n_kb) if lpt else 0
    lpt_heads = min(lpt_heads, B * H_kv)
    attention_bwd_kernel[grid](q_desc, do_desc, k_desc, v_desc, dq_desc, neg_lse2_desc,
                               delta_desc, dk, dv, N_q, N_kv, n_pad, H_kv, H // H_kv, num_tiles,
                               float(sm_scale) * LOG2E.value, float(sm_scale), num_sms, part,
                               count, lpt_heads, stages, bool(causal), bool(dq_writer),
                               bool(early_dv), dq_stages, bool(paired), split, num_warps=8)
    block = 1024
    _dq_convert_kernel[(-(-n_rows * D // block),)](dq_acc, dq, n_rows * D, float(sm_scale),
                                                   block, num_warps=4)
    return dq, dk, dv


def _zero(x):
    x[...] = 0
    return x


def _zeros_i32(like, n: int):
    if _is_numpy(like):
        return np.zeros(n, np.int32)
    import torch
    return torch.zeros(n, device=like.device, dtype=torch.int32)
