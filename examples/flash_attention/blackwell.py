"""Flash attention forward for Blackwell (sm_100a) in Gluon, scheduled by hand the way
FlashAttention-4 does it: tcgen05 MMAs into tensor memory, six warp-specialized partitions.

    o = softmax(q k^T * sm_scale [+ causal mask]) v,   lse = log(sum(exp(...))) per row
    q: (B, H, N_q, D), k and v: (B, H_kv, N_kv, D), H a multiple of H_kv (GQA)

One CTA per SM walks 256-row Q tiles (two 128-row halves, one per softmax warpgroup),
longest first when causal. Tensor memory (512 columns x 128 lanes of 32 bits) holds, per
half h, S_h (BN = 128 fp32 columns) with P_h written over it (fp16/bf16/fp8, packed) and
the output accumulator O_h (D fp32 columns): 2 * 128 + 2 * D <= 512.

  load (1 warp)    mma (1 warp)            softmax h (2 x 4 warps)   correction (4 warps)
  Q0, Q1 -> smem   S0 = Q0 K0^T            wait S_h(j)               wait alpha_h(j)
  per KV block j:  S1 = Q1 K0^T            m_new = max(m, rowmax)    j > 0 and some
    K_j -> ring    for j = 1 .. n-1:       keep the stale max unless   alpha < 1:
    V_j -> ring      wait P0(j-1) ready      it grew by > 8 (log2)     O_h *= alpha
                     O0 += P0 V_{j-1}      alpha -> smem, arrive ---->   (TMEM ld/st)
                     S0 = Q0 K_j^T         P = exp2(S * scale - m):  arrive P_h ready
                     wait P1(j-1) ready      1/4 of the columns on   after the last block:
                     O1 += P1 V_{j-1}        the FMA pipe (poly),      O_h / l -> smem
                     S1 = Q1 K_j^T           3/4 on MUFU ex2           (Q_h's buffer),
                   O0 += P0 V_{n-1}        P -> TMEM over S_h          lse -> global,
                   O1 += P1 V_{n-1}        arrive P_h ready            arrive O_h staged --.
                                                                                           |
  epilogue (1 warp): wait O_h staged, TMA store O_h, then free Q_h's buffer <--------------'

- The tensor core runs one thread's MMAs in order: O_h += P_h V is issued before the next
  S_h = Q_h K^T that overwrites P_h's columns, and while softmax 0 works on S_0 the tensor
  core computes S_1 and P_1 V (the two halves ping-pong through the MMA warp's order).
- "P_h ready" has two arrivals: the softmax's (P written) and the correction's (O_h
  rescaled for the new row max). The correction may touch O_h once S_h(j) is done: the
  tensor core finished O_h += P_h V_{j-1} before it.
- Conditional rescaling (FA4): a row keeps its stale max unless the new one is larger by
  more than log2(256) = 8, so P <= 256 and O is rescaled only when some row's max grew that
  much; the correction skips the O round trip through registers otherwise. l and O stay
  consistent because both use the same (possibly stale) max.
- exp2 on two units: MUFU.EX2 does 16 per clock per SM, the FMA pipe 128 FMAs. The first
  POLY_COLS columns of every S block use 2^x = 2^n * p(f) (Cody-Waite: n = round(x) by the
  1.5 * 2^23 trick, f = x - n in [-0.5, 0.5], p a degree-3 or -5 minimax polynomial, 2^n
  added to p's exponent bits); the rest use ex2.approx.
- Masks: only blocks that cross the causal diagonal or the ragged end of K pay for a mask.
  With N_q != N_kv the last query row sees the last key (FlashAttention's alignment). Rows
  past N_q are computed and clipped by the TMA store; rows that see no key give o = 0 and
  lse = -inf.
- fp8 (e4m3): P is stored as e4m3, P V reads V^T (fp8 MMAs read B K-major; V is transposed
  once on the host) and the per-tensor descales fold into the score scale and the output;
  O (fp16/bf16) then needs its own shared buffer (16-bit O goes out through Q's).
- Registers (setmaxnreg): softmax 184, the one-warp partitions 40, the correction the rest
  (104); ptxas spills nothing at these counts.
"""

from __future__ import annotations

import functools
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402
from gluon.language.nvidia.blackwell import (TensorMemoryLayout,  # noqa: E402
                                             allocate_tensor_memory, fence_async_shared,
                                             get_tmem_reg_layout, mbarrier, tcgen05_mma, tma)
from gluon.nvidia.blackwell import TensorDescriptor  # noqa: E402
from gluon.fma_exp2 import exp2_poly  # noqa: E402
from gluon.warp_spec import pipeline  # noqa: E402
from hopper import (_aligned, _is_numpy, _kv_blocks, _nvmma,  # noqa: E402,F401
                    _tile_coords, allocate_outputs, check_forward, check_inputs, no_key_outputs,
                    numpy_dtype, persistent_grid, random_inputs, reference,
                    transposed_v_descriptor)

HALF_M = gl.constexpr(128)  # query rows per softmax warpgroup: one TMEM lane per row
BM = gl.constexpr(256)      # query rows per CTA tile
BN = gl.constexpr(128)      # keys per KV block
CHUNK = gl.constexpr(32)    # S columns per tcgen05.ld and per exp2 unit decision
LOG2E = gl.constexpr(1.4426950408889634)
RESCALE_THRESHOLD = gl.constexpr(8.0)  # log2(256): P stays <= 256 with a stale row max
NO_MAX = gl.constexpr(-1.0e30)         # a row max before any key (finite: no inf - inf)



@gluon.constexpr_function
def _chunk_layout():
    """The registers of a [128, CHUNK] fp32 slice of S or O loaded by 4 warps with
    tcgen05.ld 32x32b: thread i of the warpgroup holds row i, CHUNK registers."""
    shape = [HALF_M.value, CHUNK.value]
    return get_tmem_reg_layout(gl.float32, shape, TensorMemoryLayout(shape, col_stride=1), 4)


# ---- load: one warp of TMA ------------------------------------------------------------------

@gluon.jit
def _load_partition(q_desc, k_desc, v_desc, q_smem, k_ring, v_ring, kpipe, vpipe, q_ready,
                    q_empty, N_Q, N_KV, H, GROUP, BH, num_m, num_tiles, CAUSAL: gl.constexpr,
                    V_T: gl.constexpr):
    item = 0
    t = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        b, h, m0 = _tile_coords(tile, BH, H, num_m, CAUSAL, BM)
        for half in gl.static_range(2):
            # The epilogue's TMA store of the previous tile's O_h is done: 16-bit O goes out
            # through this buffer, and the store comes after every MMA that read Q_h.
            mbarrier.wait(q_empty.index(half), (t & 1) ^ 1)
            mbarrier.expect(q_ready.index(half), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [b, h, m0 + half * HALF_M, 0],
                                            q_ready.index(half), q_smem.index(half))
        n_blocks, n_full = _kv_blocks(m0, N_Q, N_KV, BN, CAUSAL, BM)
        for j in range(n_blocks):
            s, ready = pipeline.producer_acquire(kpipe, item)
            mbarrier.expect(ready, k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [b, h // GROUP, j * BN, 0], ready,
                                            k_ring.index(s))
            s, ready = pipeline.producer_acquire(vpipe, item)
            mbarrier.expect(ready, v_desc.block_type.nbytes)
            if V_T:
                tma.async_copy_global_to_shared(v_desc, [b, h // GROUP, 0, j * BN], ready,
                                                v_ring.index(s))
            else:
                tma.async_copy_global_to_shared(v_desc, [b, h // GROUP, j * BN, 0], ready,
                                                v_ring.index(s))
            item += 1
        t += 1


# ---- mma: one warp issuing tcgen05 ----------------------------------------------------------

@gluon.jit
def _p_view(s_tmem, HALF: gl.constexpr, dtype: gl.constexpr):
    """P_h: S_h's tensor memory seen as [128, BN] of the input type, packed from S_h's
    first column (2 or 4 elements per 32-bit column)."""
    return s_tmem.index(HALF)._reinterpret(
        dtype, [HALF_M, BN], TensorMemoryLayout(block=(HALF_M, BN), col_stride=1))


@gluon.jit
def _pv(s_tmem, v, o_tmem, use_acc, p_ready, o_ready, v_empty, blk, HALF: gl.constexpr,
        LAST: gl.constexpr):
    """O_h += P_h V once P_h is written and O_h rescaled; its completion frees V's stage
    after the second half read it, and after a tile's last block hands O_h to the
    correction's epilogue. (Earlier P V products need no barrier of their own: the next
    S_h = Q_h K^T completes after them, and the correction hears of that through the
    softmax's alpha.)"""
    mbarrier.wait(p_ready.index(HALF), blk & 1)
    tcgen05_mma(_p_view(s_tmem, HALF, v.dtype), v, o_tmem.index(HALF), use_acc=use_acc,
                mbarriers=[o_ready.index(HALF), v_empty], mbarrier_preds=[LAST, HALF == 1])


@gluon.jit
def _qk(q_smem, k, s_tmem, s_ready, k_empty, HALF: gl.constexpr):
    """S_h = Q_h K^T; the second half's completion frees K's stage."""
    D: gl.constexpr = q_smem.shape[4]
    tcgen05_mma(q_smem.index(HALF).reshape([HALF_M, D]), k, s_tmem.index(HALF),
                use_acc=False, mbarriers=[s_ready.index(HALF), k_empty],
                mbarrier_preds=[True, HALF == 1])


@gluon.jit
def _v_operand(v_ring, stage, D: gl.constexpr, V_T: gl.constexpr):
    """The B operand of P V: V [BN, D], or (fp8) V^T stored K-major seen as V."""
    if V_T:
        return v_ring.index(stage).reshape([D, BN]).permute((1, 0))
    return v_ring.index(stage).reshape([BN, D])


@gluon.jit
def _mma_partition(q_smem, k_ring, v_ring, s_tmem, o_tmem, kpipe, vpipe, q_ready,
                   s_ready, p_ready, o_ready, N_Q, N_KV, BH, H, num_m, num_tiles,
                   CAUSAL: gl.constexpr, V_T: gl.constexpr):
    D: gl.constexpr = q_smem.shape[4]
    item = 0  # KV blocks issued so far (the rings' item index)
    blk = 0   # per-half blocks so far: the phase of s_ready / p_ready / o_ready
    t = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        b, h, m0 = _tile_coords(tile, BH, H, num_m, CAUSAL, BM)
        n_blocks, n_full = _kv_blocks(m0, N_Q, N_KV, BN, CAUSAL, BM)
        mbarrier.wait(q_ready.index(0), t & 1)
        mbarrier.wait(q_ready.index(1), t & 1)
        for j in range(n_blocks):
            ks = pipeline.consumer_wait(kpipe, item + j)
            k = k_ring.index(ks).reshape([BN, D]).permute((1, 0))
            k_empty = pipeline.release_barrier(kpipe, item + j)  # freed by S_1's MMA
            if j == 0:
                _qk(q_smem, k, s_tmem, s_ready, k_empty, 0)
                _qk(q_smem, k, s_tmem, s_ready, k_empty, 1)
            else:
                vs = pipeline.consumer_wait(vpipe, item + j - 1)
                v = _v_operand(v_ring, vs, D, V_T)
                v_empty = pipeline.release_barrier(vpipe, item + j - 1)
                _pv(s_tmem, v, o_tmem, j > 1, p_ready, o_ready, v_empty, blk + j - 1, 0,
                    False)
                _qk(q_smem, k, s_tmem, s_ready, k_empty, 0)
                _pv(s_tmem, v, o_tmem, j > 1, p_ready, o_ready, v_empty, blk + j - 1, 1,
                    False)
                _qk(q_smem, k, s_tmem, s_ready, k_empty, 1)
        if n_blocks > 0:
            vs = pipeline.consumer_wait(vpipe, item + n_blocks - 1)
            v = _v_operand(v_ring, vs, D, V_T)
            v_empty = pipeline.release_barrier(vpipe, item + n_blocks - 1)
            _pv(s_tmem, v, o_tmem, n_blocks > 1, p_ready, o_ready, v_empty,
                blk + n_blocks - 1, 0, True)
            _pv(s_tmem, v, o_tmem, n_blocks > 1, p_ready, o_ready, v_empty,
                blk + n_blocks - 1, 1, True)
        item += n_blocks
        blk += n_blocks
        t += 1


# ---- softmax: one warpgroup per 128-row half ------------------------------------------------

@gluon.jit
def _masked(s, j, c, n_full, row0, N_KV, off, CAUSAL: gl.constexpr, layout: gl.constexpr):
    """Chunk c of S block j with -inf where a key is past N_kv or (causal) after the query;
    blocks before n_full pass through untouched."""
    if j >= n_full:
        cols = j * BN + c * CHUNK + gl.arange(0, CHUNK, layout=gl.SliceLayout(0, layout))
        keep = gl.expand_dims(cols < N_KV, 0)
        if CAUSAL:
            rows = row0 + off + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, layout))
            keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        s = gl.where(keep, s, -float("inf"))
    return s


@gluon.jit
def _p_chunk(s, c, m_scaled, qk_scale, POLY_COLS: gl.constexpr, DEGREE: gl.constexpr):
    """exp2(S * scale - m) of chunk c: on the FMA pipe for the first POLY_COLS columns."""
    x = gl.fma(s, qk_scale, -gl.expand_dims(m_scaled, 1))
    if c * CHUNK < POLY_COLS:
        return exp2_poly(x, DEGREE)
    return gl.exp2(x)


@gluon.jit
def _softmax_partition(HALF: gl.constexpr, s_tmem, alpha_smem, stats_smem, s_ready,
                       p_ready, alpha_ready, stats_ready, N_Q, N_KV, BH, H, num_m, num_tiles,
                       qk_scale, CAUSAL: gl.constexpr, POLY_COLS: gl.constexpr,
                       DEGREE: gl.constexpr, P_DTYPE: gl.constexpr):
    chunk: gl.constexpr = _chunk_layout()
    row: gl.constexpr = gl.SliceLayout(1, chunk)
    s_view = s_tmem.index(HALF)
    p_view = _p_view(s_tmem, HALF, P_DTYPE)
    blk = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        b, h, m0 = _tile_coords(tile, BH, H, num_m, CAUSAL, BM)
        n_blocks, n_full = _kv_blocks(m0, N_Q, N_KV, BN, CAUSAL, BM)
        row0 = m0 + HALF * HALF_M
        off = N_KV - N_Q
        m_i = gl.full([HALF_M], NO_MAX, gl.float32, row)
        l_i = gl.zeros([HALF_M], gl.float32, row)
        for j in range(n_blocks):
            mbarrier.wait(s_ready.index(HALF), blk & 1)
            # All of S first (the row max needs every column); P then overwrites it.
            s0 = _masked(s_view.slice(0, CHUNK).load(chunk), j, 0, n_full, row0, N_KV, off,
                         CAUSAL, chunk)
            s1 = _masked(s_view.slice(CHUNK, CHUNK).load(chunk), j, 1, n_full, row0, N_KV,
                         off, CAUSAL, chunk)
            s2 = _masked(s_view.slice(2 * CHUNK, CHUNK).load(chunk), j, 2, n_full, row0,
                         N_KV, off, CAUSAL, chunk)
            s3 = _masked(s_view.slice(3 * CHUNK, CHUNK).load(chunk), j, 3, n_full, row0,
                         N_KV, off, CAUSAL, chunk)
            top = gl.maximum(gl.maximum(gl.max(s0, axis=1), gl.max(s1, axis=1)),
                             gl.maximum(gl.max(s2, axis=1), gl.max(s3, axis=1)))
            m_new = gl.maximum(m_i, top * qk_scale)  # scale > 0: max(S) * scale
            grow = m_new - m_i > RESCALE_THRESHOLD
            alpha = gl.where(grow, gl.exp2(m_i - m_new), 1.0)
            m_i = gl.where(grow, m_new, m_i)
            # alpha goes to the correction at once, so O is rescaled while P is computed.
            alpha_smem.index(HALF).store(alpha)
            mbarrier.arrive(alpha_ready.index(HALF))
            p0 = _p_chunk(s0, 0, m_i, qk_scale, POLY_COLS, DEGREE)
            p1 = _p_chunk(s1, 1, m_i, qk_scale, POLY_COLS, DEGREE)
            p2 = _p_chunk(s2, 2, m_i, qk_scale, POLY_COLS, DEGREE)
            p3 = _p_chunk(s3, 3, m_i, qk_scale, POLY_COLS, DEGREE)
            p_view.slice(0, CHUNK).store(p0.to(P_DTYPE))
            p_view.slice(CHUNK, CHUNK).store(p1.to(P_DTYPE))
            p_view.slice(2 * CHUNK, CHUNK).store(p2.to(P_DTYPE))
            p_view.slice(3 * CHUNK, CHUNK).store(p3.to(P_DTYPE))
            mbarrier.arrive(p_ready.index(HALF))
            l_i = l_i * alpha + ((gl.sum(p0, axis=1) + gl.sum(p1, axis=1))
                                 + (gl.sum(p2, axis=1) + gl.sum(p3, axis=1)))
            blk += 1
        if n_blocks > 0:  # a tile that sees no key needs no statistics
            stats_smem.index(2 * HALF).store(l_i)
            stats_smem.index(2 * HALF + 1).store(m_i)
            mbarrier.arrive(stats_ready.index(HALF))


# ---- correction: the default warpgroup ------------------------------------------------------

@gluon.jit
def _rescale(o_view, alpha, D: gl.constexpr, o_chunk: gl.constexpr):
    """O_h *= alpha row by row, CHUNK columns at a time (tcgen05.ld, FMUL, tcgen05.st)."""
    a = gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_chunk)), 1)
    for c in gl.static_range(D // CHUNK):
        part = o_view.slice(c * CHUNK, CHUNK)
        part.store(part.load(o_chunk) * a)


@gluon.jit
def _write_o(o_view, o_out, scale, D: gl.constexpr, o_chunk: gl.constexpr,
             HAS_O: gl.constexpr):
    """O_h * scale (per row) -> the shared buffer the epilogue stores from."""
    a = gl.expand_dims(gl.convert_layout(scale, gl.SliceLayout(1, o_chunk)), 1)
    for c in gl.static_range(D // CHUNK):
        if HAS_O:
            o = o_view.slice(c * CHUNK, CHUNK).load(o_chunk) * a
        else:
            o = gl.zeros([HALF_M, CHUNK], gl.float32, o_chunk)
        o_out.slice(c * CHUNK, CHUNK, dim=1).store(o.to(o_out.dtype))


@gluon.jit
def _correction_partition(o_tmem, q_smem, o_smem, alpha_smem, stats_smem, lse_ptr, q_ready,
                          p_ready, o_ready, alpha_ready, stats_ready, o_staged, N_Q, N_KV, BH,
                          H, num_m, num_tiles, o_scale, CAUSAL: gl.constexpr,
                          RETURN_LSE: gl.constexpr):
    D: gl.constexpr = o_tmem.shape[2]
    o_chunk: gl.constexpr = _chunk_layout()
    row: gl.constexpr = gl.SliceLayout(1, o_chunk)
    blk = 0
    t = 0
    t_seen = 0  # tiles that saw a key: the phase of stats_ready
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        b, h, m0 = _tile_coords(tile, BH, H, num_m, CAUSAL, BM)
        n_blocks, n_full = _kv_blocks(m0, N_Q, N_KV, BN, CAUSAL, BM)
        for j in range(n_blocks):
            for half in gl.static_range(2):
                mbarrier.wait(alpha_ready.index(half), blk & 1)
                alpha = alpha_smem.index(half).load(row)
                # O_h += P_h V of block j-1 is done: S_h of block j completed after it.
                if j > 0:
                    if gl.min(alpha, axis=0) < 1.0:  # some row's max grew by more than 8
                        _rescale(o_tmem.index(half), alpha, D, o_chunk)
                mbarrier.arrive(p_ready.index(half))
            blk += 1
        for half in gl.static_range(2):
            rows = m0 + half * HALF_M + gl.arange(0, HALF_M, layout=row)
            # Q_h's buffer receives O_h (16-bit): its TMA load must have landed.
            mbarrier.wait(q_ready.index(half), t & 1)
            o_out = o_smem.index(half).reshape([HALF_M, D])
            if n_blocks > 0:
                mbarrier.wait(o_ready.index(half), t_seen & 1)  # the tile's last P V is done
                mbarrier.wait(stats_ready.index(half), t_seen & 1)
                l_i = stats_smem.index(2 * half).load(row)
                m_i = stats_smem.index(2 * half + 1).load(row)
                seen = m_i > 0.5 * NO_MAX  # the row saw a key (l > 0 then)
                _write_o(o_tmem.index(half), o_out, gl.where(seen, o_scale / l_i, 0.0), D,
                         o_chunk, True)
                lse = gl.where(seen, (m_i + gl.log2(gl.where(seen, l_i, 1.0))) / LOG2E,
                               -float("inf"))
            else:
                _write_o(o_tmem.index(half), o_out, gl.zeros([HALF_M], gl.float32, row), D,
                         o_chunk, False)
                lse = gl.full([HALF_M], -float("inf"), gl.float32, row)
            fence_async_shared()
            mbarrier.arrive(o_staged.index(half))
            if RETURN_LSE:
                gl.store(lse_ptr + (b * H + h) * N_Q + rows, lse, mask=rows < N_Q)
        if n_blocks > 0:
            t_seen += 1
        t += 1


# ---- epilogue: one warp of TMA stores -------------------------------------------------------

@gluon.jit
def _epilogue_partition(o_desc, o_smem, o_staged, q_empty, N_Q, BH, H, num_m, num_tiles,
                        CAUSAL: gl.constexpr):
    t = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        b, h, m0 = _tile_coords(tile, BH, H, num_m, CAUSAL, BM)
        for half in gl.static_range(2):
            mbarrier.wait(o_staged.index(half), t & 1)
            tma.async_copy_shared_to_global(o_desc, [b, h, m0 + half * HALF_M, 0],
                                            o_smem.index(half))
        tma.store_wait(1)  # O_0 is out: Q_0's buffer may be refilled
        mbarrier.arrive(q_empty.index(0))
        tma.store_wait(0)
        mbarrier.arrive(q_empty.index(1))
        t += 1


@gluon.jit
def attention_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, N_Q, N_KV, H, GROUP, BH,
                     num_tiles, qk_scale, o_scale, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                     RETURN_LSE: gl.constexpr, POLY_COLS: gl.constexpr,
                     POLY_DEGREE: gl.constexpr, V_T: gl.constexpr):
    D: gl.constexpr = q_desc.block_shape[3]
    dtype: gl.constexpr = q_desc.dtype
    num_m = gl.cdiv(N_Q, BM)
    q_smem = gl.allocate_shared_memory(dtype, [2] + q_desc.block_shape, q_desc.layout)
    if dtype.primitive_bitwidth == 16:  # O (16-bit) goes out through Q's buffer
        o_smem = q_smem
    else:
        o_smem = gl.allocate_shared_memory(o_desc.dtype, [2] + o_desc.block_shape,
                                           o_desc.layout)
    k_ring = gl.allocate_shared_memory(dtype, [STAGES] + k_desc.block_shape, k_desc.layout)
    v_ring = gl.allocate_shared_memory(dtype, [STAGES] + v_desc.block_shape, v_desc.layout)
    rows: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    alpha_smem = gl.allocate_shared_memory(gl.float32, [2, HALF_M], rows)
    stats_smem = gl.allocate_shared_memory(gl.float32, [4, HALF_M], rows)  # l_h, m_h
    # Eight kinds of mbarrier, one per half each; "P ready" takes two arrivals (the
    # softmax's and the correction's), the others one.
    bars = gl.allocate_shared_memory(gl.int64, [8, 2, 1], mbarrier.MBarrierLayout())
    for kind in gl.static_range(8):
        for half in gl.static_range(2):
            mbarrier.init(bars.index(kind).index(half), count=2 if kind == 3 else 1)
    q_ready = bars.index(0)
    q_empty = bars.index(1)
    s_ready = bars.index(2)
    p_ready = bars.index(3)
    o_ready = bars.index(4)
    alpha_ready = bars.index(5)
    stats_ready = bars.index(6)
    o_staged = bars.index(7)
    kpipe = pipeline.create(STAGES)
    vpipe = pipeline.create(STAGES)
    # S_h fp32 with P_h (16 or 8 bits, packed) over its first columns; O_h fp32.
    s_tmem = allocate_tensor_memory(gl.float32, [2, HALF_M, BN],
                                    TensorMemoryLayout(block=(HALF_M, BN), col_stride=1))
    o_tmem = allocate_tensor_memory(gl.float32, [2, HALF_M, D],
                                    TensorMemoryLayout(block=(HALF_M, D), col_stride=1))
    tiles = (N_Q, N_KV, BH, H, num_m, num_tiles)
    # 64K registers over 16 warps (the 3 one-warp partitions pad a warpgroup): softmax 2 x 4
    # warps at 184, the one-warp group 40 each, the correction what is left (104). At these
    # counts whole-program ptxas spills nothing for any dtype, D or mask; 8 fewer for the
    # softmax or the one-warp partitions and it does.
    SOFTMAX_REGS: gl.constexpr = 184
    gl.warp_specialize(
        [(_correction_partition, (o_tmem, q_smem, o_smem, alpha_smem, stats_smem, lse_ptr,
                                  q_ready, p_ready, o_ready, alpha_ready, stats_ready,
                                  o_staged) + tiles + (o_scale, CAUSAL, RETURN_LSE)),
         (_softmax_partition, (0, s_tmem, alpha_smem, stats_smem, s_ready, p_ready,
                               alpha_ready, stats_ready) + tiles
          + (qk_scale, CAUSAL, POLY_COLS, POLY_DEGREE, dtype)),
         (_softmax_partition, (1, s_tmem, alpha_smem, stats_smem, s_ready, p_ready,
                               alpha_ready, stats_ready) + tiles
          + (qk_scale, CAUSAL, POLY_COLS, POLY_DEGREE, dtype)),
         (_mma_partition, (q_smem, k_ring, v_ring, s_tmem, o_tmem, kpipe, vpipe,
                           q_ready, s_ready, p_ready, o_ready) + tiles + (CAUSAL, V_T)),
         (_load_partition, (q_desc, k_desc, v_desc, q_smem, k_ring, v_ring, kpipe, vpipe,
                            q_ready, q_empty, N_Q, N_KV, H, GROUP, BH, num_m, num_tiles,
                            CAUSAL, V_T)),
         (_epilogue_partition, (o_desc, o_smem, o_staged, q_empty, N_Q, BH, H, num_m,
                                num_tiles, CAUSAL))],
        [4, 4, 1, 1, 1], [SOFTMAX_REGS, SOFTMAX_REGS, 40, 40, 40])
    pipeline.invalidate(kpipe)
    pipeline.invalidate(vpipe)
    for kind in gl.static_range(8):
        for half in gl.static_range(2):
            mbarrier.invalidate(bars.index(kind).index(half))


# ---- host side ---------------------------------------------------------------------------------

HEAD_DIMS = (64, 128)


def default_config(head_dim: int, fp8: bool) -> int:
    """KV ring depth that fits 227 KB of shared memory next to Q (and, for fp8, O)."""
    if fp8:
        return 3 if head_dim == 128 else 4
    return 2 if head_dim == 128 else 3


def _is_blackwell(x) -> bool:
    import torch
    major, minor = torch.cuda.get_device_capability(x.device)
    return major == 10


def attention_launcher(q, k, v, *, causal=False, sm_scale=None, return_lse=False,
                       out_dtype=None, q_descale=1.0, k_descale=1.0, v_descale=1.0,
                       stages=None, poly_cols=32, poly_degree=3, num_programs=None,
                       launch_options=None):
    """A function of no arguments running the forward pass (descriptors built once); it
    returns o, or (o, lse) with `return_lse`. See `attention_forward`."""
    B, H, N_q, D, H_kv, N_kv, dt, out_name, fp8 = check_inputs(q, k, v, out_dtype, HEAD_DIMS)
    if not _is_numpy(q) and not _is_blackwell(q):
        import torch
        cap = torch.cuda.get_device_capability(q.device)
        raise RuntimeError(f"attention_forward (Blackwell): needs an sm_100 GPU (tcgen05 and "
                           f"tensor memory); {torch.cuda.get_device_name(q.device)} is "
                           f"sm_{cap[0]}{cap[1]}: use examples/flash_attention/hopper.py there")
    if poly_cols not in (0, 32, 64, 96, 128):
        raise ValueError(f"attention_forward: poly_cols (columns of each 128-key block whose "
                         f"exp2 runs on the FMA pipe) must be a multiple of 32 in [0, 128], "
                         f"got {poly_cols}")
    if poly_degree not in (3, 5):
        raise ValueError(f"attention_forward: poly_degree must be 3 or 5, got {poly_degree}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o, lse = allocate_outputs(q, B, H, N_q, D, out_name, return_lse)
    if N_q == 0 or N_kv == 0:
        return functools.partial(no_key_outputs, o, lse, return_lse)
    bits = 8 if fp8 else 16
    in_block = lambda x, rows: TensorDescriptor.from_tensor(  # noqa: E731
        x, [1, 1, rows, D], _nvmma(bits, D))
    q_desc, k_desc = in_block(q, HALF_M.value), in_block(k, BN.value)
    # fp8 tcgen05 MMAs read B K-major: P V takes V^T (a transposed copy).
    v_desc = transposed_v_descriptor(v, BN.value) if fp8 else in_block(v, BN.value)
    o_desc = TensorDescriptor.from_tensor(o, [1, 1, HALF_M.value, D], _nvmma(16, D))
    num_tiles = B * H * (-(-N_q // BM.value))
    grid = persistent_grid(q, num_tiles, num_programs)
    qk_scale = float(sm_scale) * LOG2E.value * float(q_descale) * float(k_descale)
    launch = attention_kernel[grid]
    st = stages or default_config(D, fp8)

    def run():
        launch(q_desc, k_desc, v_desc, o_desc, lse, N_q, N_kv, H, H // H_kv, B * H, num_tiles,
               qk_scale, float(v_descale), st, bool(causal), bool(return_lse), poly_cols,
               poly_degree, fp8, num_warps=4, **(launch_options or {}))
        return (o, lse) if return_lse else o
    return run


def attention_forward(q, k, v, *, causal=False, sm_scale=None, return_lse=False, **options):
    """Attention forward on Blackwell: q (B, H, N_q, D), k and v (B, H_kv, N_kv, D),
    fp16 / bf16 / fp8 e4m3, D in {64, 128}, H a multiple of H_kv. numpy arrays run in the
    CPU interpreter, CUDA tensors on an sm_100 GPU. Returns o (the input dtype; fp16 for fp8
    inputs, or `out_dtype`) and, with `return_lse`, the rows' natural-log log-sum-exp in
    fp32. fp8 options: `q_descale`, `k_descale`, `v_descale` (per-tensor factors)."""
    return attention_launcher(q, k, v, causal=causal, sm_scale=sm_scale,
                              return_lse=return_lse, **options)()


def compile_for_sm100a(dtype_name="float16", D=128, causal=True, poly_cols=32,
                       poly_degree=3):
    """The kernel compiled for sm_100a as `attention_forward` would launch it on 16 heads of
    4096 rows (the descriptors' shapes do not change the code), for static checks."""
    np_dtype = numpy_dtype(dtype_name)
    fp8 = dtype_name == "float8_e4m3fn"
    x = np.zeros((1, 16, 4096, D), np_dtype)
    out = np.zeros((1, 16, 4096, D), np.float16 if fp8 else np_dtype)
    bits = 8 if fp8 else 16
    block = lambda a, rows, b: TensorDescriptor.from_tensor(  # noqa: E731
        a, [1, 1, rows, D], _nvmma(b, D))
    v_desc = transposed_v_descriptor(x, BN.value) if fp8 else block(x, BN.value, bits)
    signature = {"q_desc": block(x, HALF_M.value, bits), "k_desc": block(x, BN.value, bits),
                 "v_desc": v_desc, "o_desc": block(out, HALF_M.value, 16),
                 "lse_ptr": "*fp32:16", "N_Q": "i32", "N_KV": "i32", "H": "i32",
                 "GROUP": "i32", "BH": "i32", "num_tiles": "i32", "qk_scale": "fp32",
                 "o_scale": "fp32"}
    return gluon.compile(attention_kernel, signature,
                         {"STAGES": default_config(D, fp8), "CAUSAL": causal,
                          "RETURN_LSE": True, "POLY_COLS": poly_cols,
                          "POLY_DEGREE": poly_degree, "V_T": fp8},
                         target="sm_100a", num_warps=4)


def main(gpu=None) -> bool:
    from _common import use_gpu
    gpu = use_gpu() if gpu is None else gpu
    if gpu:
        import torch
        if torch.cuda.get_device_capability()[0] != 10:
            print("no Blackwell GPU: running the interpreter instead")
            gpu = False
    return check_forward(attention_forward, (2, 16, 4, 4096, 128) if gpu else (1, 2, 1, 200, 64),
                         gpu, label="attention fwd (Blackwell)")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
