"""Flash attention forward for Hopper (sm_90a) in Gluon, scheduled by hand the way
FlashAttention-3 does it.

    o = softmax(q k^T * sm_scale [+ causal mask]) v,   lse = log(sum(exp(...))) per row
    q: (B, H, N_q, D), k and v: (B, H_kv, N_kv, D), H a multiple of H_kv (GQA)

One CTA per SM walks (batch*head, 128-row Q block) tiles, longest first when causal. Each
CTA runs three partitions (gl.warp_specialize), drawn here for D = 128 (`default_config`
gives D = 64 a third consumer warpgroup and 192-row tiles, and lets the two warpgroups of
D = 256 issue their GEMMs without taking turns):

  producer: 1 warp, 24 regs       consumer WG0 (rows 0-63)        consumer WG1 (rows 64-127)
  per tile:                       per tile:                       per tile:
    wait q_empty[wg]; TMA Q[wg]     wait q_ready                    wait q_ready
    for each KV block j           S0 = Q K0^T; softmax -> P0      S0 = Q K0^T; softmax -> P0
    (from a rotated start):       for j = 1 .. n-1:               for j = 1 .. n-1:
      wait k_empty; TMA K_j         wait PV_{j-2}; O *= alpha       wait PV_{j-2}; O *= alpha
      wait v_empty; TMA V_j         [my turn] ---------------.
                                    issue S_j = Q K_j^T      |      (WG1's softmax runs
                                    issue O += P_{j-1} V_{j-1}      under WG0's GEMMs)
                                    [hand the turn to WG1] --'----> [my turn]
                                    wait S_j (PV still runs)        issue S_j, O += P V
                                    softmax(S_j) -> P_j, alpha      [hand the turn to WG0]
                                  wait; O *= alpha; O += P V        ...
                                  O /= l; O -> smem (Q's buffer) -> TMA store; lse -> global

- K and V live in separate shared-memory rings (gluon.warp_spec.pipeline), so K_j frees as
  soon as S_j is computed and V_j after its PV product; every consumer warpgroup must
  release a stage before the producer refills it. At D = 256 the producer loads V_{j-1}
  after K_j (V_LAG, the consumers' order) into a ring one stage deeper than K's.
- The ping-pong (gluon.warp_spec.pingpong): each warpgroup waits for its turn before issuing
  its wgmmas and hands the turn over right after, so one warpgroup's softmax (exp2 on the
  MUFU unit) runs while the other's GEMMs keep the tensor cores busy. With PER_WARP
  (an option) each warp hands the turn over and releases its stages on its own.
- Inside a warpgroup S_j = Q K_j^T and O += P_{j-1} V_{j-1} are issued together and
  `warpgroup_mma_wait(1)` retires S_j only, so the PV product runs under the softmax of
  block j (FA3's intra-warpgroup overlap; 16-bit, see OVERLAP). Its wait sits at the top
  of the next iteration: ptxas moves a wgmma wait to the top of its basic block, and
  P_{j-1} is a dep of that wait so ptxas keeps its registers until the wgmma is done. With
  LATE_WAIT the wait follows the exp2s instead, behind K_{j+1}'s spin loop (a block of its
  own), and P_j is packed into P_{j-1}'s registers with no copies.
- P never touches shared memory: it is converted in registers to the A-operand layout of
  the PV wgmma (DotOperandLayout(0, o_layout)).
- Softmax in base 2: scores are scaled by sm_scale * log2(e) once; row max m and sum l are
  kept online, O rescaled by alpha = exp2(m_old - m_new). LAZY_RESCALE (FA4's; 16-bit's
  default): only when a row maximum of the warpgroup outgrew m by SLACK (`rescale_slack`,
  8 as FA4's: P <= 256; bf16 at D = 128: 0, exact maxima; `gl.barrier_any`); with
  WARP_RESCALE (D = 128's default) each row decides alone and only the warps holding a
  grown row rescale (`gl.warp_any`, no barrier). With SPEC_P (fp16's at D = 128), P is
  first taken against the kept m (as it is in most blocks), so the exp2s need not wait
  for the row max and what decides; SCALE_P puts it on a grown row's new m with one FMUL
  an element (alpha) instead of taking it again.
- Masks: only blocks that cross the causal diagonal or the ragged end of K pay for a mask;
  blocks past the diagonal are never loaded. With N_q != N_kv the last query row sees the
  last key (FlashAttention's alignment). Rows past N_q are clipped by the TMA store; a
  warpgroup with none in [0, N_q) computes nothing (`_pass_blocks`: it only releases
  stages and passes turns); rows that see no key at all give o = 0 and lse = -inf.
- SNAKE (causal 16-bit's default): each wave of longest-first tiles goes in the direction
  opposite to the last wave's, so no program gets the longest of every wave.
- RAGGED_FIRST (causal's default): where BM does not divide N_q, the spare rows' whole
  warpgroups go before row 0, in the head's first (shortest) tile, instead of at the end of
  its last (longest) one: 192-row tiles at D = 64 leave 128 of 4096 rows over, 6% of the
  causal work at 4k. They store no O: a TMA store at a negative row is an illegal
  instruction on the H100.
- fp8 (e4m3): the producer loads V^T (V transposed once on the host: fp8 wgmma reads B
  K-major only) with the keys of every 32 in FP8_KEY_ORDER, the order in which a thread
  already holds P's columns, so P packs into the wgmma's A registers without moving between
  lanes (`_p_operand`); the per-tensor descales fold into the score scale and the output.
  With ROW_SUM_MMA (an option) P's row sums come from the tensor cores (a small wgmma
  against ones beside PV's, added into l in fp32), which frees the issue-bound fp8 softmax
  of 64 FADDs a thread a block.
- SPLIT (`split_tail`, non-causal): the last full wave's and the ragged wave's tiles are
  dealt out as K/V blocks (gluon.stream_k), so no SM idles through a half-empty last wave;
  a tile cut between two programs is finished by the second of them to get there, from
  both partials (attention_tiles.combine).
- Between tiles the producer sends the next tile's first K/V block before its Q (KV_AHEAD):
  ring stages free as the last blocks are consumed, Q's buffer only after the epilogue.
  With Q_BUFS = 2 (16-bit D = 128's default) Q has a buffer per tile parity, so the next
  tile's Q loads while this one runs; O's TMA store out of Q's buffer is waited for in the
  next tile, after its first QK^T's issue.
- BN_X (an option): blocks of BN + BN_X keys, the last BN_X in K and V rings and wgmmas
  of their own (FA3's 176-key blocks, in power-of-two parts).
- `cluster=2` (an option, non-causal): 2-CTA clusters on neighbouring Q tiles, each
  producer fetching half of every K/V block for both (TMA multicast; not faster here).
"""

from __future__ import annotations

import functools
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import gluon  # noqa: E402
from gluon import language as gl  # noqa: E402
from gluon.language.nvidia.hopper import (cluster, fence_async_shared, mbarrier,  # noqa: E402
                                          tma, warpgroup_mma, warpgroup_mma_wait)
from gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from gluon import stream_k  # noqa: E402
from gluon.warp_spec import pingpong, pipeline  # noqa: E402
# Which tiles and K/V blocks a program visits; split_tail's partials combined.
import attention_tiles  # noqa: E402
from attention_tiles import _kv_block, _kv_blocks, _rotation, _tile_coords  # noqa: E402,F401
import tile.profiler.language as pl  # noqa: E402  (timeline regions: nothing unless recorded)
from hopper_tuning import default_config, tuned_config  # noqa: E402,F401
# One K/V block's pieces of the consumers (S's issue and mask, P's operand, the PV product).
from hopper_block import (_extra_p, _issue_s, _p_operand, _pass_blocks,  # noqa: E402
                          _promoted, _pv_operands, _pv_product, _rescale_o, _rescaled,
                          _row_maxima, _row_shares, _scaled_p, _scores)
# The float64 reference and the random inputs the tests and benchmarks take from here.
from attention_reference import (check_forward, numpy_dtype, random_inputs,  # noqa: E402,F401
                                 reference)
# The host side the Hopper and Blackwell forwards share (checks, outputs, descriptors).
from attention_host import (FP8_KEY_ORDER, _aligned, _is_numpy, _nvmma,  # noqa: E402,F401
                            allocate_outputs, check_inputs, no_key_outputs,
                            persistent_grid, transposed_v_descriptor)

BM_WG = gl.constexpr(64)  # query rows per consumer warpgroup (one m64 wgmma tile)
LOG2E = gl.constexpr(1.4426950408889634)


@gluon.jit
def _num_pieces(num_tiles, N_KV, BN_ALL: gl.constexpr, SPLIT: gl.constexpr,
                SNAKE: gl.constexpr):
    """How many pieces (tiles, or SPLIT's parts of the last ones) this program walks."""
    return stream_k.num_work(num_tiles // gl.num_ctas(), gl.cdiv(N_KV, BN_ALL), SPLIT, SNAKE)


@gluon.jit
def _piece(w, num_tiles, N_Q, N_KV, H, BH, num_m, BN_ALL: gl.constexpr, CAUSAL: gl.constexpr,
           BM: gl.constexpr, SPLIT: gl.constexpr, SNAKE: gl.constexpr,
           RAGGED_FIRST: gl.constexpr):
    """Piece `w`: (batch, head, first query row (below 0 for RAGGED_FIRST's first tile), the
    tile's blocks, those without a mask, its rotation, the piece's blocks [j0, j1), slot,
    side), for the producer and the consumers alike. SPLIT (never causal) may make a piece
    a part of a tile."""
    NUM_CTAS: gl.constexpr = gl.num_ctas()
    tile, j0, j1, slot, side = stream_k.work(w, num_tiles // NUM_CTAS, gl.cdiv(N_KV, BN_ALL),
                                             SPLIT, SNAKE)
    b, h, m0 = _tile_coords(tile * NUM_CTAS + cluster.cta_rank(), BH, H, num_m, CAUSAL, BM)
    place = m0  # the tile's place from row 0 (never negative) sets its rotation
    if CAUSAL and RAGGED_FIRST:  # the spare rows' whole warpgroups go before row 0
        m0 = m0 - (num_m * BM - N_Q) // BM_WG * BM_WG
    n_blocks, n_full = _kv_blocks(m0, N_Q, N_KV, BN_ALL, CAUSAL, BM)
    rot = _rotation(place, n_blocks, BM * NUM_CTAS)
    if not SPLIT:
        j1 = n_blocks
    return b, h, m0, n_blocks, n_full, rot, j0, j1, slot, side


@gluon.jit
def _load_k(k_desc, k_ring, kpipe, item, b, hk, j, BN: gl.constexpr, k_desc_x, k_ring_x,
            BN_X: gl.constexpr):
    """TMA load of K_j into its ring's stage for `item`; with BN_X extra keys a block, its
    last BN_X keys go into the second ring (k_ring_x, through k_desc_x)."""
    s, ready = pipeline.producer_acquire(kpipe, item)
    n0 = j * (BN + BN_X)
    if BN_X > 0:
        mbarrier.expect(ready, k_desc.block_type.nbytes + k_desc_x.block_type.nbytes)
        tma.async_load(k_desc_x, [b, hk, n0 + BN, 0], ready, k_ring_x.index(s),
                       multicast=gl.num_ctas() > 1)
    else:
        mbarrier.expect(ready, k_desc.block_type.nbytes)
    tma.async_load(k_desc, [b, hk, n0, 0], ready, k_ring.index(s), multicast=gl.num_ctas() > 1)


@gluon.jit
def _load_v(v_desc, v_ring, vpipe, item, b, hk, j, BN: gl.constexpr, V_T: gl.constexpr,
            v_desc_x, v_ring_x, BN_X: gl.constexpr):
    """TMA load of V_j (V_j^T for fp8) into its ring's stage for `item`, its last BN_X keys
    into the second ring as in `_load_k`."""
    s, ready = pipeline.producer_acquire(vpipe, item)
    n0 = j * (BN + BN_X)
    if BN_X > 0:
        mbarrier.expect(ready, v_desc.block_type.nbytes + v_desc_x.block_type.nbytes)
        _v_copy(v_desc_x, v_ring_x.index(s), ready, b, hk, n0 + BN, V_T)
    else:
        mbarrier.expect(ready, v_desc.block_type.nbytes)
    _v_copy(v_desc, v_ring.index(s), ready, b, hk, n0, V_T)


@gluon.jit
def _v_copy(v_desc, dst, ready, b, hk, n0, V_T: gl.constexpr):
    if V_T:
        tma.async_load(v_desc, [b, hk, 0, n0], ready, dst, multicast=gl.num_ctas() > 1)
    else:
        tma.async_load(v_desc, [b, hk, n0, 0], ready, dst, multicast=gl.num_ctas() > 1)


@gluon.jit
def _load_step(k_desc, v_desc, k_ring, v_ring, kpipe, vpipe, item, b, hk, i, j0, rot,
               n_blocks, BN: gl.constexpr, V_T: gl.constexpr, V_LAG: gl.constexpr, k_desc_x,
               v_desc_x, k_ring_x, v_ring_x, BN_X: gl.constexpr):
    """The producer's i-th step of a tile (whose part starts at its j0-th block): K of the
    i-th block visited, then V of the (i - V_LAG)-th. With V_LAG = 1 the loads come in the
    order the consumers use them (S_j = Q K_j^T is issued with O += P_{j-1} V_{j-1}), so a
    full V ring never holds back a K that the K ring has room for."""
    _load_k(k_desc, k_ring, kpipe, item + i, b, hk, _kv_block(i, rot, n_blocks), BN, k_desc_x,
            k_ring_x, BN_X)
    if i >= j0 + V_LAG:
        _load_v(v_desc, v_ring, vpipe, item + i - V_LAG, b, hk,
                _kv_block(i - V_LAG, rot, n_blocks), BN, V_T, v_desc_x, v_ring_x, BN_X)


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_ring, v_ring, kpipe, vpipe, q_ready, q_empty,
              N_Q, N_KV, H, GROUP, BH, num_m, num_tiles,
              BN: gl.constexpr, CAUSAL: gl.constexpr, V_T: gl.constexpr,
              KV_AHEAD: gl.constexpr, V_LAG: gl.constexpr, k_desc_x, v_desc_x, k_ring_x,
              v_ring_x, BN_X: gl.constexpr, SPLIT: gl.constexpr, Q_PREFETCH: gl.constexpr,
              Q_BUFS: gl.constexpr, SNAKE: gl.constexpr, RAGGED_FIRST: gl.constexpr):
    NUM_WG: gl.constexpr = q_smem.shape[0] // Q_BUFS
    BM: gl.constexpr = NUM_WG * BM_WG
    NUM_CTAS: gl.constexpr = gl.num_ctas()
    item = 0
    t = 0
    num_pieces = _num_pieces(num_tiles, N_KV, BN + BN_X, SPLIT, SNAKE)
    for w in range(num_pieces):
        b, h, m0, n_blocks, _n_full, rot, j0, j1, _slot, _side = _piece(
            w, num_tiles, N_Q, N_KV, H, BH, num_m, BN + BN_X, CAUSAL, BM, SPLIT, SNAKE,
            RAGGED_FIRST)
        hk = h // GROUP
        base = item - j0  # ring items count the blocks of every piece
        pl.enter_scope("load K, V")
        # The tile's first KV_AHEAD K/V blocks go out before its Q: their ring stages free
        # while the previous tile's last blocks are consumed, but Q's buffer only once the
        # consumers are done with the previous tile (with O_IN_Q, once its epilogue's TMA
        # store has read O out of it). Waiting for Q first would leave the whole ring empty
        # across every tile boundary.
        ahead = gl.minimum(j1, j0 + KV_AHEAD)
        for i in range(j0, ahead):
            _load_step(k_desc, v_desc, k_ring, v_ring, kpipe, vpipe, base, b, hk, i, j0, rot,
                       n_blocks, BN, V_T, V_LAG, k_desc_x, v_desc_x, k_ring_x, v_ring_x, BN_X)
        for wg in gl.static_range(NUM_WG):
            # The warpgroup is done with the Q that last used this buffer (its last QK^T
            # retired; with O_IN_Q, its O stored): with Q_BUFS = 2 the tile before last's.
            qi = (t % Q_BUFS) * NUM_WG + wg
            mbarrier.wait(q_empty.index(qi), ((t // Q_BUFS) & 1) ^ 1)
            mbarrier.expect(q_ready.index(qi), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [b, h, m0 + wg * BM_WG, 0],
                                            q_ready.index(qi), q_smem.index(qi))
        if Q_PREFETCH and w + 1 < num_pieces:
            # The next piece's Q into L2 now: its load waits for the epilogue that frees
            # Q's buffer (with O_IN_Q, for O's TMA store), and then finds it in L2.
            b2, h2, m2, _nb, _nf, _rt, _j0, _j1, _sl, _sd = _piece(
                w + 1, num_tiles, N_Q, N_KV, H, BH, num_m, BN + BN_X, CAUSAL, BM, SPLIT,
                SNAKE, RAGGED_FIRST)
            for wg in gl.static_range(NUM_WG):
                if m2 + wg * BM_WG >= 0:  # (RAGGED_FIRST: no rows before row 0 to fetch)
                    tma.async_prefetch(q_desc, [b2, h2, m2 + wg * BM_WG, 0])
        for i in range(ahead, j1):
            _load_step(k_desc, v_desc, k_ring, v_ring, kpipe, vpipe, base, b, hk, i, j0, rot,
                       n_blocks, BN, V_T, V_LAG, k_desc_x, v_desc_x, k_ring_x, v_ring_x, BN_X)
        for i in range(gl.maximum(j1 - V_LAG, j0), j1):  # the lagging V blocks
            _load_v(v_desc, v_ring, vpipe, base + i, b, hk, _kv_block(i, rot, n_blocks), BN,
                    V_T, v_desc_x, v_ring_x, BN_X)
        item += j1 - j0
        pl.exit_scope("load K, V")
        t += 1
    if NUM_CTAS > 1:  # the peers' last releases arrive here: none may come after we leave
        pipeline.producer_drain(kpipe, item)
        pipeline.producer_drain(vpipe, item)


@gluon.jit
def _free_last_q(q_empty, t, WG: gl.constexpr, NUM_WG: gl.constexpr):
    """Q_BUFS = 2 with O through Q's buffer: early in tile t, the previous tile's buffer
    is freed once its O's TMA store has read it (long done by now), for the Q after next."""
    if t > 0:
        tma.store_wait(0)
        mbarrier.arrive(q_empty.index(((t - 1) % 2) * NUM_WG + WG))


@gluon.jit
def _consumer(WG: gl.constexpr, q_smem, k_ring, v_ring, o_smem, o_desc, o_ptr, lse_ptr, kpipe,
              vpipe, q_ready, q_empty, turns, N_Q, N_KV, H, BH, num_m, num_tiles, qk_scale,
              o_scale, BN: gl.constexpr, CAUSAL: gl.constexpr, V_T: gl.constexpr,
              RETURN_LSE: gl.constexpr, O_IN_Q: gl.constexpr, OVERLAP: gl.constexpr,
              Q_IN_REGS: gl.constexpr, PINGPONG: gl.constexpr, LATE_WAIT: gl.constexpr,
              ROW_SUM_MMA: gl.constexpr, PROMOTE_PV: gl.constexpr, ones, k_ring_x, v_ring_x,
              BN_X: gl.constexpr, PER_WARP: gl.constexpr, LAZY_RESCALE: gl.constexpr,
              SPLIT: gl.constexpr, split_ws, O_DIRECT: gl.constexpr, SPEC_P: gl.constexpr,
              Q_BUFS: gl.constexpr, SNAKE: gl.constexpr, RAGGED_FIRST: gl.constexpr,
              SLACK: gl.constexpr, WARP_RESCALE: gl.constexpr, SCALE_P: gl.constexpr):
    # SPEC_P's P taken again where the deciding barrier says so: that barrier is LAZY_RESCALE's.
    gl.static_assert(LAZY_RESCALE or not SPEC_P, "SPEC_P needs LAZY_RESCALE")
    gl.static_assert(LAZY_RESCALE or not WARP_RESCALE, "WARP_RESCALE needs LAZY_RESCALE")
    gl.static_assert(SPEC_P and WARP_RESCALE or not SCALE_P, "SCALE_P needs SPEC_P, WARP_RESCALE")
    D: gl.constexpr = o_desc.block_shape[3]
    dtype: gl.constexpr = q_smem.dtype
    NUM_WG: gl.constexpr = q_smem.shape[0] // Q_BUFS
    BM: gl.constexpr = NUM_WG * BM_WG
    # Q_BUFS = 2 with O through Q's buffer: the buffer is freed during the next tile, once
    # O's TMA store has read it, so neither the epilogue nor the next Q's load waits for it.
    LATE_Q_FREE: gl.constexpr = O_IN_Q and Q_BUFS == 2
    NUM_CTAS: gl.constexpr = gl.num_ctas()
    # In a cluster every CTA's producer multicasts into this CTA's rings: releases go to all.
    PEERS: gl.constexpr = NUM_CTAS - 1
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(
        operand_index=0, parent=o_layout, k_width=32 // dtype.primitive_bitwidth)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    # BN_X: each block's last BN_X keys in rings of their own, S_x their scores.
    s_x_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN_X if BN_X > 0 else BN, 16])
    # ROW_SUM_MMA: l as [64, 8] (8 equal columns): l_blk = P 1 for the last issued block,
    # l_tot the rows' sums before it.
    l_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 8, 16])
    # Where the PV wait goes: at the top of the next block (PV_WAIT_TOP) or, with LATE_WAIT,
    # after this block's softmax and before P_j is packed into the registers P_{j-1} held.
    PV_WAIT_TOP: gl.constexpr = OVERLAP and not LATE_WAIT
    s_zero = gl.zeros([BM_WG, BN], gl.float32, s_layout)
    s_x_zero = gl.zeros([BM_WG, BN_X if BN_X > 0 else BN], gl.float32, s_x_layout)
    item = 0
    t = 0
    turn = 0
    if PINGPONG:
        turn = pingpong.start(turns, WG, PER_WARP)
    for w in range(_num_pieces(num_tiles, N_KV, BN + BN_X, SPLIT, SNAKE)):
        # Blocks [j0, j1) of the tile (all of them unless SPLIT made it a part of one).
        b, h, m0, n_blocks, n_full, rot, j0, j1, slot, side = _piece(
            w, num_tiles, N_Q, N_KV, H, BH, num_m, BN + BN_X, CAUSAL, BM, SPLIT, SNAKE,
            RAGGED_FIRST)
        row0 = m0 + WG * BM_WG
        off = N_KV - N_Q
        m_i = gl.full([BM_WG], -1.0e30, gl.float32, row_s)
        l_i = gl.zeros([BM_WG], gl.float32, row_s)
        acc = gl.zeros([BM_WG, D], gl.float32, o_layout)
        l_blk = gl.zeros([BM_WG, 8], gl.float32, l_layout)
        l_tot = gl.zeros([BM_WG, 8], gl.float32, l_layout)
        o_blk = gl.zeros([BM_WG, D], gl.float32, o_layout)  # PROMOTE_PV: one block's P V
        qi = (t % Q_BUFS) * NUM_WG + WG  # this tile's Q buffer (and O's, with O_IN_Q)
        q_view = q_smem.index(qi).reshape([BM_WG, D])
        pl.enter_scope("wait Q")
        mbarrier.wait(q_ready.index(qi), (t // Q_BUFS) & 1)
        pl.exit_scope("wait Q")
        if Q_IN_REGS:  # the register A operand of every QK^T wgmma of the tile
            q = q_view.load(gl.DotOperandLayout(operand_index=0, parent=s_layout,
                                                k_width=32 // dtype.primitive_bitwidth))
        else:
            q = q_view
        busy = (row0 < N_Q) & (row0 + BM_WG > 0)  # (else a ragged tile's spare rows)
        if (j1 > j0) & (busy == 0):
            item, turn = _pass_blocks(kpipe, vpipe, turns, item, turn, j1 - j0, WG, PINGPONG,
                                      PER_WARP, PEERS)
        if (j1 > j0) & busy:
            # The first block (j0: 0 unless a split tile's second part): S = Q K^T, softmax.
            sk = pipeline.consumer_wait(kpipe, item)
            if PINGPONG:
                pingpong.wait_turn(turns, WG, turn)
            s, s_x = _issue_s(q, k_ring, k_ring_x, sk, s_zero, s_x_zero, D, BN, BN_X)
            if PINGPONG:
                turn = pingpong.pass_turn(turns, WG, turn, PER_WARP)
            if LATE_Q_FREE:
                _free_last_q(q_empty, t, WG, NUM_WG)
            if BN_X > 0:
                s, s_x = warpgroup_mma_wait(0, deps=[s, s_x])
            else:
                s = warpgroup_mma_wait(0, deps=[s])
            pipeline.consumer_release(kpipe, item, multicast_cta=PEERS, per_warp=PER_WARP)
            # Scores stay unscaled: max(S) * scale = max(S * scale) (scale > 0), and
            # exp2(S * scale - m) is one FFMA before the MUFU.EX2.
            s, s_x, m_blk = _scores(s, s_x, _kv_block(j0, rot, n_blocks), n_full, row0, N_KV,
                                    off, qk_scale, BN, BN_X, CAUSAL)
            m_i = gl.maximum(m_i, m_blk)
            p = gl.exp2(gl.fma(s, qk_scale, -gl.expand_dims(m_i, 1)))
            # SPEC_P, 16-bit WARP_RESCALE: each thread's share of the row sums, added up
            # after the loop (no shuffles in it).
            SHARES: gl.constexpr = (SPEC_P or WARP_RESCALE and not V_T) and not ROW_SUM_MMA
            if SHARES:
                l_part = _row_shares(p)
            elif not ROW_SUM_MMA:
                l_i = gl.sum(p, axis=1)
            p_op = _p_operand(p, dtype, p_layout, V_T)
            p_op_x = p_op
            if BN_X > 0:
                p_x, l_i = _extra_p(s_x, m_i, l_i, qk_scale)
                p_op_x = _p_operand(p_x, dtype, p_layout, V_T)
            p_run = p_op  # the P an in-flight PV wgmma reads
            p_run_x = p_op_x
            alpha = gl.full([BM_WG], 1.0, gl.float32, row_s)
            rescale = n_blocks < 0  # LAZY_RESCALE: O *= alpha needed (an i1 the loop carries)
            for j in range(j0 + 1, j1):
                pl.enter_scope("wait K")
                sk = pipeline.consumer_wait(kpipe, item + 1)
                pl.exit_scope("wait K")
                # O += P_{j-2} V_{j-2} ran under the last softmax and is done by now. The
                # wait sits after the loop's back edge, where ptxas cannot hoist it above the
                # softmax (it moves a wgmma wait to its block's top); P_{j-2} is a dep so its
                # registers stay untouched until here.
                acc, p_run, l_blk, v, v_x = _pv_operands(vpipe, item, v_ring, v_ring_x, acc,
                                                         p_run, l_blk, PV_WAIT_TOP,
                                                         ROW_SUM_MMA, V_T, D, BN, BN_X)
                if PINGPONG:
                    pl.enter_scope("wait turn")
                    pingpong.wait_turn(turns, WG, turn)
                    pl.exit_scope("wait turn")
                s, s_x = _issue_s(q, k_ring, k_ring_x, sk, s_zero, s_x_zero, D, BN, BN_X)
                # O's rescale after S_j's issue (FA3's order; ptxas schedules it there
                # anyway): S_j's wgmma runs under the FMULs.
                if ROW_SUM_MMA:
                    l_tot = _rescaled(l_tot + l_blk, alpha)
                if PROMOTE_PV:
                    o_blk, l_blk = _pv_product(p_op, v, o_blk, ones, l_blk, True, True)
                else:
                    acc = _rescale_o(acc, alpha, rescale, LAZY_RESCALE, WARP_RESCALE)
                    acc, l_blk = _pv_product(p_op, v, acc, ones, l_blk, ROW_SUM_MMA, False)
                if BN_X > 0:
                    acc = warpgroup_mma(p_op_x, v_x, acc, is_async=True)
                p_run = p_op
                p_run_x = p_op_x
                if PINGPONG:
                    turn = pingpong.pass_turn(turns, WG, turn, PER_WARP)
                # A predicate, not a branch: the turn's arrival, this release and K's below
                # stay in one basic block and share one partition barrier (mbarrier lowering).
                pipeline.consumer_release(vpipe, item - 1, pred=j > j0 + 1, multicast_cta=PEERS,
                                          per_warp=PER_WARP)
                # S_j is done (wgmmas retire in order); O += P_{j-1} V_{j-1} (and l's
                # product) runs on under the softmax of S_j.
                if OVERLAP:
                    if BN_X > 0:  # S, S_x, then the two PV products in flight
                        s, s_x = warpgroup_mma_wait(2, deps=[s, s_x])
                    else:
                        s = warpgroup_mma_wait(2 if ROW_SUM_MMA else 1, deps=[s])
                elif PROMOTE_PV:  # no overlap: P's registers are free before anything else
                    s, o_blk, l_blk = warpgroup_mma_wait(0, deps=[s, o_blk, l_blk])
                    acc = _promoted(acc, alpha, o_blk)  # alpha is still the block's
                elif ROW_SUM_MMA:
                    s, acc, l_blk = warpgroup_mma_wait(0, deps=[s, acc, l_blk])
                elif BN_X > 0:
                    s, s_x, acc = warpgroup_mma_wait(0, deps=[s, s_x, acc])
                else:
                    s, acc = warpgroup_mma_wait(0, deps=[s, acc])
                if not LAZY_RESCALE or WARP_RESCALE:
                    pipeline.consumer_release(kpipe, item + 1, multicast_cta=PEERS,
                                              per_warp=PER_WARP)
                pl.enter_scope("softmax")
                s, s_x, m_blk = _scores(s, s_x, _kv_block(j, rot, n_blocks), n_full, row0,
                                        N_KV, off, qk_scale, BN, BN_X, CAUSAL)
                if LAZY_RESCALE:
                    # FA4's conditional rescale: the maxima stay unless a row of the
                    # warpgroup grew by more than SLACK (log2 units), so P <= 2^SLACK
                    # (exact once O / l) and most blocks skip O *= alpha's 64 FMULs a
                    # thread. K_j's release shares the barrier that decides.
                    if SPEC_P:
                        # P against the kept maxima before the block's own are known, as
                        # it is in most blocks: the exp2s need not wait for the row max's
                        # tree, its shuffles and the barrier (taken again if it rescales).
                        p = gl.exp2(gl.fma(s, qk_scale, -gl.expand_dims(m_i, 1)))
                        if not SCALE_P:  # (else summed and packed once settled, below)
                            if SHARES:
                                l_shares = _row_shares(p)
                            p_op = _p_operand(p, dtype, p_layout, V_T)
                    if WARP_RESCALE:  # each row decides alone: no barrier (K_j's release
                        # shares the one above)
                        m_new, alpha = _row_maxima(m_i, m_blk, SLACK)
                    else:
                        rescale = gl.barrier_any(m_blk > m_i + SLACK)
                        pipeline.consumer_release(kpipe, item + 1, multicast_cta=PEERS,
                                                  per_warp=PER_WARP)
                        if rescale:
                            m_new = gl.maximum(m_i, m_blk)
                            alpha = gl.exp2(m_i - m_new)
                        else:
                            m_new = m_i
                            alpha = gl.full([BM_WG], 1.0, gl.float32, row_s)
                else:
                    m_new = gl.maximum(m_i, m_blk)
                    alpha = gl.exp2(m_i - m_new)
                if SPEC_P:
                    # Against the new maxima (the speculative P may overflow): with
                    # WARP_RESCALE in the warps holding a row that grew.
                    if SCALE_P:  # (WARP_RESCALE) P * alpha where a row grew
                        p = _scaled_p(p, s, m_i, m_new, alpha, qk_scale)
                        if SHARES:
                            l_shares = _row_shares(p)
                        p_op = _p_operand(p, dtype, p_layout, V_T)
                    elif gl.warp_any(alpha != 1.0) if WARP_RESCALE else rescale:
                        p = gl.exp2(gl.fma(s, qk_scale, -gl.expand_dims(m_new, 1)))
                        if SHARES:
                            l_shares = _row_shares(p)
                        p_op = _p_operand(p, dtype, p_layout, V_T)
                    if SHARES:
                        l_part = _rescaled(l_part, alpha) + l_shares
                else:
                    p = gl.exp2(gl.fma(s, qk_scale, -gl.expand_dims(m_new, 1)))
                    if SHARES:
                        l_part = _rescaled(l_part, alpha) + _row_shares(p)
                    elif not ROW_SUM_MMA:
                        l_i = l_i * alpha + gl.sum(p, axis=1)
                if BN_X > 0:
                    p_x, l_i = _extra_p(s_x, m_new, l_i, qk_scale)
                m_i = m_new
                if OVERLAP and LATE_WAIT:
                    # K_{j+1}'s wait (a spin loop, so a basic block of its own) keeps ptxas
                    # from hoisting the PV wait above the exp2s: it moves a wgmma wait to
                    # the top of its block. The loop's top finds K_{j+1} ready.
                    if j + 1 < j1:
                        pipeline.consumer_wait(kpipe, item + 2)
                    if ROW_SUM_MMA:
                        acc, p_run, l_blk = warpgroup_mma_wait(0, deps=[acc, p_run, l_blk])
                    elif BN_X > 0:
                        acc, p_run, p_run_x = warpgroup_mma_wait(0, deps=[acc, p_run,
                                                                          p_run_x])
                    else:
                        acc, p_run = warpgroup_mma_wait(0, deps=[acc, p_run])
                if not SPEC_P:
                    p_op = _p_operand(p, dtype, p_layout, V_T)
                if BN_X > 0:
                    p_op_x = _p_operand(p_x, dtype, p_layout, V_T)
                pl.exit_scope("softmax")
                item += 1
            pl.enter_scope("last PV")
            if SHARES:
                l_i = gl.convert_layout(gl.sum(l_part, axis=1), row_s)
            if not O_IN_Q:  # Q is no longer read: the producer may load the next tile's
                mbarrier.arrive(q_empty.index(qi))
            acc, p_run, l_blk, v, v_x = _pv_operands(vpipe, item, v_ring, v_ring_x, acc, p_run,
                                                     l_blk, PV_WAIT_TOP, ROW_SUM_MMA, V_T, D,
                                                     BN, BN_X)
            if not PROMOTE_PV:
                acc = _rescale_o(acc, alpha, rescale, LAZY_RESCALE, WARP_RESCALE)
            if ROW_SUM_MMA:
                l_tot = _rescaled(l_tot + l_blk, alpha)
            if PINGPONG:
                pingpong.wait_turn(turns, WG, turn)
            if PROMOTE_PV:
                o_blk, l_blk = _pv_product(p_op, v, o_blk, ones, l_blk, True, True)
            else:
                acc, l_blk = _pv_product(p_op, v, acc, ones, l_blk, ROW_SUM_MMA, False)
            if BN_X > 0:
                acc = warpgroup_mma(p_op_x, v_x, acc, is_async=True)
            if PINGPONG:
                turn = pingpong.pass_turn(turns, WG, turn, PER_WARP)
            pipeline.consumer_release(vpipe, item - 1, pred=j1 - j0 > 1, multicast_cta=PEERS,
                                      per_warp=PER_WARP)
            if PROMOTE_PV:
                o_blk, p_op, l_blk = warpgroup_mma_wait(0, deps=[o_blk, p_op, l_blk])
                acc = _promoted(acc, alpha, o_blk)
                l_i = gl.convert_layout(gl.max(l_tot + l_blk, axis=1), row_s)
            elif ROW_SUM_MMA:
                acc, p_op, l_blk = warpgroup_mma_wait(0, deps=[acc, p_op, l_blk])
                l_i = gl.convert_layout(gl.max(l_tot + l_blk, axis=1), row_s)
            elif BN_X > 0:
                acc, p_op, p_op_x = warpgroup_mma_wait(0, deps=[acc, p_op, p_op_x])
            else:
                acc, p_op = warpgroup_mma_wait(0, deps=[acc, p_op])
            pipeline.consumer_release(vpipe, item, multicast_cta=PEERS, per_warp=PER_WARP)
            item += 1
            pl.exit_scope("last PV")
        elif LATE_Q_FREE:
            _free_last_q(q_empty, t, WG, NUM_WG)
        elif not O_IN_Q:
            mbarrier.arrive(q_empty.index(qi))
        finish = True
        if SPLIT:  # part of a tile: the second of its two programs to get here finishes it
            finish = slot < 0
            if slot >= 0:
                finish, acc, m_i, l_i = attention_tiles.combine(
                    acc, m_i, l_i, split_ws[0], split_ws[1], split_ws[2], slot, side, WG,
                    NUM_WG)
        # Epilogue: O / l through shared memory and a TMA store (clipped at N_q), or with
        # O_DIRECT stored from registers (masked at N_q).
        pl.enter_scope("epilogue")
        if finish:
            l_safe = gl.where(l_i > 0.0, l_i, 1.0)
            o = acc * gl.expand_dims(gl.convert_layout(o_scale / l_safe, row_o), 1)
            if O_DIRECT:  # from registers: Q's buffer was free once the last S_j was done
                rows = row0 + gl.arange(0, BM_WG, layout=row_o)
                cols = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
                o_head = o_ptr + (b * H + h).to(gl.int64) * N_Q * D
                gl.store(o_head + gl.expand_dims(rows, 1) * D + gl.expand_dims(cols, 0),
                         o.to(o_desc.dtype),
                         mask=gl.expand_dims((rows >= 0) & (rows < N_Q), 1))
            else:
                if not LATE_Q_FREE:  # (else: waited for when the buffer was freed)
                    tma.store_wait(0)  # the previous tile's store is done reading o_smem
                o_view = o_smem.index(qi if O_IN_Q else WG)
                o_view.reshape([BM_WG, D]).store(o.to(o_desc.dtype))
                fence_async_shared()
                if row0 >= 0:  # (RAGGED_FIRST: a warpgroup wholly before row 0 has no O)
                    tma.async_copy_shared_to_global(o_desc, [b, h, row0, 0], o_view)
            if O_IN_Q and not LATE_Q_FREE:  # O went through Q's buffer: free it once the
                tma.store_wait(0)           # store has read it
                mbarrier.arrive(q_empty.index(qi))
            if RETURN_LSE:
                lse = gl.where(l_i > 0.0, (m_i + gl.log2(l_safe)) / LOG2E, -float("inf"))
                rows = row0 + gl.arange(0, BM_WG, layout=row_s)
                gl.store(lse_ptr + (b * H + h) * N_Q + rows, lse,
                         mask=(rows >= 0) & (rows < N_Q))
        elif O_IN_Q and not LATE_Q_FREE:
            mbarrier.arrive(q_empty.index(qi))
        pl.exit_scope("epilogue")
        t += 1
    tma.store_wait(0)


@gluon.jit
def attention_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, N_Q, N_KV, H, GROUP, BH,
                     num_tiles, qk_scale, o_scale, k_desc_x, v_desc_x, BN: gl.constexpr,
                     STAGES: gl.constexpr,
                     CAUSAL: gl.constexpr, V_T: gl.constexpr, RETURN_LSE: gl.constexpr,
                     O_IN_Q: gl.constexpr, OVERLAP: gl.constexpr, KV_AHEAD: gl.constexpr,
                     NUM_WG: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                     Q_IN_REGS: gl.constexpr, PINGPONG: gl.constexpr, K_STAGES: gl.constexpr,
                     V_LAG: gl.constexpr, LATE_WAIT: gl.constexpr, ROW_SUM_MMA: gl.constexpr,
                     PROMOTE_PV: gl.constexpr, BN_X: gl.constexpr, PER_WARP: gl.constexpr,
                     LAZY_RESCALE: gl.constexpr, split_part, split_ml, split_count,
                     SPLIT: gl.constexpr, o_ptr, O_DIRECT: gl.constexpr,
                     SPEC_P: gl.constexpr = False, Q_PREFETCH: gl.constexpr = False,
                     Q_BUFS: gl.constexpr = 1, SNAKE: gl.constexpr = False,
                     RAGGED_FIRST: gl.constexpr = False, SLACK: gl.constexpr = 8.0,
                     WARP_RESCALE: gl.constexpr = False, SCALE_P: gl.constexpr = False):
    NUM_CTAS: gl.constexpr = gl.num_ctas()
    # Q blocks per head, whole clusters of them (a cluster's CTAs share the head's K/V
    # loads; a last tile past N_q computes rows the TMA store clips).
    num_m = gl.cdiv(gl.cdiv(N_Q, NUM_WG * BM_WG), NUM_CTAS) * NUM_CTAS
    # Q_BUFS = 2: two tiles' Q buffers, so the next tile's Q loads during this one.
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [Q_BUFS * NUM_WG] + q_desc.block_shape,
                                       q_desc.layout)
    if O_IN_Q or O_DIRECT:  # O through Q's buffer (no room for its own), or no buffer at all
        o_smem = q_smem
    else:
        o_smem = gl.allocate_shared_memory(o_desc.dtype, [NUM_WG] + o_desc.block_shape,
                                           o_desc.layout)
    k_ring = gl.allocate_shared_memory(k_desc.dtype, [K_STAGES] + k_desc.block_shape,
                                       k_desc.layout)
    v_ring = gl.allocate_shared_memory(v_desc.dtype, [STAGES] + v_desc.block_shape,
                                       v_desc.layout)
    k_ring_x = k_ring  # BN_X: rings for each block's last BN_X keys (k_desc_x's, v_desc_x's)
    v_ring_x = v_ring
    if BN_X > 0:
        k_ring_x = gl.allocate_shared_memory(k_desc_x.dtype, [K_STAGES] + k_desc_x.block_shape,
                                             k_desc_x.layout)
        v_ring_x = gl.allocate_shared_memory(v_desc_x.dtype, [STAGES] + v_desc_x.block_shape,
                                             v_desc_x.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [Q_BUFS * NUM_WG, 1],
                                        mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFS * NUM_WG, 1],
                                        mbarrier.MBarrierLayout())
    for qi in gl.static_range(Q_BUFS * NUM_WG):
        mbarrier.init(q_ready.index(qi), count=1)
        mbarrier.init(q_empty.index(qi), count=1)
    # Every consumer warpgroup reads every K and V stage: NUM_WG arrivals free one; in a
    # cluster the loads are multicast (each CTA fetches a slice of a block for all), so a
    # stage frees when the consumers of every CTA are done with it.
    # PER_WARP: each consumer warp releases and hands the turn over on its own (4 arrivals a
    # warpgroup), so a warpgroup's warps never wait for one another at a partition barrier.
    WARP_ARRIVALS: gl.constexpr = 4 if PER_WARP else 1
    kpipe = pipeline.create(K_STAGES, NUM_WG * NUM_CTAS * WARP_ARRIVALS)
    vpipe = pipeline.create(STAGES, NUM_WG * NUM_CTAS * WARP_ARRIVALS)
    turns = pingpong.create(NUM_WG, WARP_ARRIVALS)
    ones = None
    if ROW_SUM_MMA:  # the B operand of l += P 1: [8, BN] ones, K-major
        ones = gl.allocate_shared_memory(
            q_desc.dtype, [8, BN],
            gl.NVMMASharedLayout(min(128, BN * q_desc.dtype.primitive_bitwidth // 8),
                                 q_desc.dtype.primitive_bitwidth))
        ones.store(gl.full([8, BN], 1.0, q_desc.dtype,
                           gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0])))
        fence_async_shared()
    if NUM_CTAS > 1:  # peers multicast into our rings and release them: all initialized first
        fence_async_shared(cluster=True)
        cluster.barrier()
    common = (N_Q, N_KV, H, BH, num_m, num_tiles, qk_scale, o_scale, BN, CAUSAL, V_T,
              RETURN_LSE, O_IN_Q, OVERLAP, Q_IN_REGS, PINGPONG, LATE_WAIT, ROW_SUM_MMA,
              PROMOTE_PV, ones, k_ring_x, v_ring_x, BN_X, PER_WARP, LAZY_RESCALE, SPLIT,
              (split_part, split_ml, split_count), O_DIRECT, SPEC_P, Q_BUFS, SNAKE,
              RAGGED_FIRST, SLACK, WARP_RESCALE, SCALE_P)
    shared = (q_smem, k_ring, v_ring, o_smem, o_desc, o_ptr, lse_ptr, kpipe, vpipe, q_ready,
              q_empty, turns) + common
    consumers = [(_consumer, (0,) + shared), (_consumer, (1,) + shared)]
    if NUM_WG == 3:  # D = 64: FA3's 192-row tiles
        consumers = consumers + [(_consumer, (2,) + shared)]
    gl.warp_specialize(
        consumers +
        [(_producer, (q_desc, k_desc, v_desc, q_smem, k_ring, v_ring, kpipe, vpipe, q_ready,
                      q_empty, N_Q, N_KV, H, GROUP, BH, num_m, num_tiles, BN, CAUSAL, V_T,
                      KV_AHEAD, V_LAG, k_desc_x, v_desc_x, k_ring_x, v_ring_x, BN_X, SPLIT,
                      Q_PREFETCH, Q_BUFS, SNAKE, RAGGED_FIRST))],
        [4] * (NUM_WG - 1) + [1], [CONSUMER_REGS] * (NUM_WG - 1) + [24])
    pipeline.invalidate(kpipe)
    pipeline.invalidate(vpipe)
    pingpong.invalidate(turns)
    for qi in gl.static_range(Q_BUFS * NUM_WG):
        mbarrier.invalidate(q_ready.index(qi))
        mbarrier.invalidate(q_empty.index(qi))


# ---- host side ---------------------------------------------------------------------------------

def attention_launcher(q, k, v, *, causal=False, sm_scale=None, return_lse=False,
                       out_dtype=None, q_descale=1.0, k_descale=1.0, v_descale=1.0,
                       num_programs=None, kv_ahead=1, q_in_regs=False, launch_options=None,
                       **tuning):
    """A function of no arguments running the forward pass (descriptors built once);
    it returns o, or (o, lse) with `return_lse`. See `attention_forward`. `launch_options`
    go to the kernel launch (`debug=True`, `timeline=True`: docs/debug_mode.md). Tuning
    options: `num_programs` (clusters with `cluster=2`), `kv_ahead` (K/V blocks of a tile
    the producer loads before the tile's Q), `q_in_regs` (Q as the register A operand of
    QK^T, loaded from shared memory once per tile), and those of `default_config`, which
    says what each does and what it measured: `block_n`, `stages` (V's ring), `k_stages`
    (K's ring; `stages` when only that is given), `warpgroups`, `overlap`, `pingpong`,
    `o_in_q`, `v_lag`, `late_wait`, `row_sum_mma`, `promote_pv`, `extra_n`, `cluster`,
    `warp_arrivals`, `lazy_rescale`, `split_tail`, `o_direct`, `speculative_p`,
    `q_prefetch`, `q_buffers`, `snake`, `ragged_first`, `rescale_slack`, `warp_rescale`
    and `scaled_p`."""
    B, H, N_q, D, H_kv, N_kv, dt, out_name, fp8 = check_inputs(q, k, v, out_dtype)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    cfg = tuned_config(D, dt, fp8, causal, return_lse, tuning, q_in_regs, kv_ahead)
    bn, st, warpgroups = cfg["block_n"], cfg["stages"], cfg["warpgroups"]
    block_m = BM_WG.value * warpgroups
    # 2 consumer warpgroups and the producer's: 240 registers a consumer thread; 3 and the
    # producer's: the CTA's 64K registers leave 160 (the producer warpgroup keeps 24).
    consumer_regs = 240 if warpgroups == 2 else 160
    q, k = _aligned(q), _aligned(k)
    o, lse = allocate_outputs(q, B, H, N_q, D, out_name, return_lse)
    if N_q == 0 or N_kv == 0:  # no rows, or rows that see no key: o = 0, lse = -inf
        return functools.partial(no_key_outputs, o, lse, return_lse)
    bits = 8 if fp8 else 16
    if fp8:
        # fp8 wgmma reads B K-major: V^T (B, H_kv, D, N_kv), keys in P's register order.
        v_desc = transposed_v_descriptor(v, bn, FP8_KEY_ORDER)
    else:
        v = _aligned(v)
        v_desc = TensorDescriptor.from_tensor(v, [1, 1, bn, D], _nvmma(bits, D))
    q_desc = TensorDescriptor.from_tensor(q, [1, 1, BM_WG.value, D], _nvmma(bits, D))
    k_desc = TensorDescriptor.from_tensor(k, [1, 1, bn, D], _nvmma(bits, D))
    bn_x = cfg["extra_n"]
    k_desc_x, v_desc_x = k_desc, v_desc  # with extra_n: blocks of each block's last keys
    if bn_x:
        k_desc_x = TensorDescriptor.from_tensor(k, [1, 1, bn_x, D], _nvmma(bits, D))
        v_desc_x = (TensorDescriptor(v_desc.base, v_desc.shape, v_desc.strides,
                                     [1, 1, D, bn_x], _nvmma(8, bn_x)) if fp8 else
                    TensorDescriptor.from_tensor(v, [1, 1, bn_x, D], _nvmma(bits, D)))
    o_desc = TensorDescriptor.from_tensor(o, [1, 1, BM_WG.value, D], _nvmma(16, D))
    ctas = cfg["cluster"]
    num_m = -(-N_q // block_m)
    if ctas > 1 and num_m % ctas and "cluster" not in tuning:
        ctas = 1  # the default: no phantom tile (computed, then clipped) for the pairs
    num_tiles = B * H * (-(-num_m // ctas) * ctas)
    grid = persistent_grid(q, num_tiles // ctas, num_programs, ctas)
    qk_scale = float(sm_scale) * LOG2E.value * float(q_descale) * float(k_descale)
    o_scale = float(v_descale)
    o_direct = bool(cfg["o_direct"])
    o_in_q = bool(cfg["o_in_q"]) and not fp8 and not o_direct  # fp8: Q's buffer is too small
    # split_tail: the partials' workspace (its counts start at 0 and end each launch at 0).
    split = (bool(cfg["split_tail"]) and not causal and ctas == 1 and N_kv > 0
             and stream_k.enabled(num_tiles, grid[0]))  # N_kv = 0: no blocks to deal out
    part, ml, count = attention_tiles.workspace(q, grid[0] if split else 0, warpgroups,
                                                BM_WG.value, D)
    launch = attention_kernel[grid]

    def run():
        launch(q_desc, k_desc, v_desc, o_desc, lse, N_q, N_kv, H, H // H_kv, B * H, num_tiles,
               qk_scale, o_scale, k_desc_x, v_desc_x, bn, st, bool(causal), fp8,
               bool(return_lse), o_in_q, bool(cfg["overlap"]), kv_ahead, warpgroups,
               consumer_regs, bool(q_in_regs), bool(cfg["pingpong"]), cfg["k_stages"],
               int(cfg["v_lag"]), bool(cfg["late_wait"]), bool(cfg["row_sum_mma"]),
               bool(cfg["promote_pv"]), bn_x, bool(cfg["warp_arrivals"]),
               bool(cfg["lazy_rescale"]), part, ml, count, split, o, o_direct,
               bool(cfg["speculative_p"]), bool(cfg["q_prefetch"]), cfg["q_buffers"],
               bool(cfg["snake"]), bool(cfg["ragged_first"]), float(cfg["rescale_slack"]),
               bool(cfg["warp_rescale"]), bool(cfg["scaled_p"]), num_warps=4,
               num_ctas=ctas,
               **(launch_options or {}))
        return (o, lse) if return_lse else o
    return run


def attention_forward(q, k, v, *, causal=False, sm_scale=None, return_lse=False, **options):
    """Attention forward: q (B, H, N_q, D), k and v (B, H_kv, N_kv, D), fp16 / bf16 / fp8
    e4m3, D in {64, 128, 256}, H a multiple of H_kv. numpy arrays run in the CPU
    interpreter, CUDA tensors on the GPU. Returns o (the input dtype; fp16 for fp8 inputs,
    or `out_dtype`) and, with `return_lse`, the rows' natural-log log-sum-exp in fp32.
    fp8 options: `q_descale`, `k_descale`, `v_descale` (per-tensor factors)."""
    return attention_launcher(q, k, v, causal=causal, sm_scale=sm_scale,
                              return_lse=return_lse, **options)()


def main(gpu=None) -> bool:
    from _common import use_gpu
    gpu = use_gpu() if gpu is None else gpu
    return check_forward(attention_forward, (2, 16, 4, 2048, 128) if gpu else (1, 2, 1, 200, 64),
                         gpu)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
