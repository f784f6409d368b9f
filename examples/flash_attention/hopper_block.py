"""One K/V block's pieces of the Hopper attention forward's consumer warpgroups (hopper.py
draws the schedule they make up): S = Q K^T issued and masked, P as the PV wgmma's register
operand, O's rescale, the row sums, and the PV product with the waits before it. Split from
hopper.py so that the schedule there reads in one sitting."""

from __future__ import annotations

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait
from gluon.warp_spec import pingpong, pipeline


@gluon.jit
def _v_operand(v_ring, stage, V_T: gl.constexpr, D: gl.constexpr, BN: gl.constexpr):
    """The B operand of the PV wgmma: V[BN, D], or V^T stored K-major (fp8) seen as V."""
    if V_T:
        return v_ring.index(stage).reshape([D, BN]).permute([1, 0])
    return v_ring.index(stage).reshape([BN, D])


@gluon.jit
def _rescaled(x, alpha):
    """x (O, or l's [64, 8] accumulator) with each row times alpha."""
    return x * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, x.type.layout)), 1)


@gluon.jit
def _rescale_o(acc, alpha, rescale, LAZY_RESCALE: gl.constexpr, WARP_RESCALE: gl.constexpr):
    """O *= alpha: every block; with LAZY_RESCALE where the warpgroup's barrier found a row
    that outgrew its kept maximum (`rescale`); with WARP_RESCALE only in the warps that hold
    such a row (`gl.warp_any`: the others skip the 64 FMULs, and no barrier decides)."""
    if WARP_RESCALE:
        if gl.warp_any(alpha != 1.0):
            acc = _rescaled(acc, alpha)
    elif not LAZY_RESCALE or rescale:
        acc = _rescaled(acc, alpha)
    return acc


@gluon.jit
def _row_maxima(m_i, m_blk, SLACK: gl.constexpr):
    """WARP_RESCALE's maxima and alpha: a row keeps its maximum (alpha exactly 1) unless
    the block's outgrew it by more than SLACK (log2 units)."""
    grew = m_blk > m_i + SLACK
    m_new = gl.where(grew, m_blk, m_i)
    return m_new, gl.where(grew, gl.exp2(m_i - m_new), 1.0)


@gluon.jit
def _scaled_p(p, s, m_i, m_new, alpha, qk_scale):
    """SCALE_P: the speculative P (against the kept maxima m_i) put on the new maxima in the
    warps holding a row that grew: P * alpha, one FMUL an element where taking P again costs
    an FFMA and a MUFU.EX2 (the products round to the same 16-bit values but for a unit in
    the last place in about one element in 10^4 in fp16, 10^5 in bf16: a numpy model with
    fp32 exp2s and growths up to 8). Taken again against m_new where a row grew
    by more than 64 (log2 units): P against the kept maximum, up to 2^growth, may have
    overflowed fp32 past 127."""
    if gl.warp_any(alpha != 1.0):
        if gl.warp_any(m_new > m_i + 64.0):
            p = gl.exp2(gl.fma(s, qk_scale, -gl.expand_dims(m_new, 1)))
        else:
            p = p * gl.expand_dims(alpha, 1)
    return p


@gluon.jit
def _pass_blocks(kpipe, vpipe, turns, item, turn, n, WG: gl.constexpr, PINGPONG: gl.constexpr,
                 PER_WARP: gl.constexpr, PEERS: gl.constexpr):
    """A warpgroup whose 64 rows all lie outside [0, N_q) (a ragged tile's spare rows)
    computes nothing: it waits for and releases its n K and V stages and takes and passes
    its n + 1 ping-pong turns (a turn a block and the last PV product's), so that the
    other warpgroups' stages free and turns come round as if it had computed. Returns the
    next item and turn."""
    for _ in range(n):
        pipeline.consumer_wait(kpipe, item)
        if PINGPONG:
            pingpong.wait_turn(turns, WG, turn)
            turn = pingpong.pass_turn(turns, WG, turn, PER_WARP)
        pipeline.consumer_release(kpipe, item, multicast_cta=PEERS, per_warp=PER_WARP)
        pipeline.consumer_wait(vpipe, item)
        pipeline.consumer_release(vpipe, item, multicast_cta=PEERS, per_warp=PER_WARP)
        item += 1
    if PINGPONG:
        pingpong.wait_turn(turns, WG, turn)
        turn = pingpong.pass_turn(turns, WG, turn, PER_WARP)
    return item, turn


@gluon.jit
def _row_shares(p):
    """Each thread's share of P's row sums (SPEC_P): the columns it holds added up, with no
    shuffles. The accumulator layout gives a thread columns 8i + 2q + e of its rows (q its
    lane in the quad, e in 0..1); the quad's four shares are added once, after the loop."""
    BM_: gl.constexpr = p.shape[0]
    BN_: gl.constexpr = p.shape[1]
    return gl.sum(gl.sum(p.reshape([BM_, BN_ // 8, 4, 2]), axis=3), axis=1)


@gluon.jit
def _pv_operands(vpipe, item, v_ring, v_ring_x, acc, p_run, l_blk, OVERLAP: gl.constexpr,
                 ROW_SUM_MMA: gl.constexpr, V_T: gl.constexpr, D: gl.constexpr,
                 BN: gl.constexpr, BN_X: gl.constexpr):
    """Before a PV wgmma: its V stage has landed and the previous PV product (and with
    ROW_SUM_MMA its row sums) is done (with OVERLAP it ran under the last softmax). Returns
    O, the P that the finished product read, l's accumulator, V and V's extra keys."""
    stage = pipeline.consumer_wait(vpipe, item)
    if OVERLAP:
        if ROW_SUM_MMA:
            acc, p_run, l_blk = warpgroup_mma_wait(0, deps=[acc, p_run, l_blk])
        else:
            acc, p_run = warpgroup_mma_wait(0, deps=[acc, p_run])
    v_x = v_ring  # a placeholder unless BN_X
    if BN_X > 0:
        v_x = _v_operand(v_ring_x, stage, V_T, D, BN_X)
    return acc, p_run, l_blk, _v_operand(v_ring, stage, V_T, D, BN), v_x


@gluon.jit
def _pv_product(p_op, v, acc, ones, l_blk, ROW_SUM_MMA: gl.constexpr, FRESH: gl.constexpr):
    """Issue O += P V (with FRESH, for PROMOTE_PV, acc = P V) and, with ROW_SUM_MMA,
    l_blk = P 1: the block's row sums on the tensor cores, one more small wgmma against a
    block of ones in shared memory, in place of 64 FADDs a thread in the softmax (l then
    sums the P that the PV product reads, rounded to the operand type). A fresh
    accumulator each block, added into l in fp32 by the caller:
    fp8 wgmmas accumulate with fewer mantissa bits than fp32, and a running l (thousands,
    growing by at most 1 a key) went wrong at 16k keys: O's error 0.29 against 0.04."""
    acc = warpgroup_mma(p_op, v, acc, use_acc=not FRESH, is_async=True)
    if ROW_SUM_MMA:
        p_l = gl.convert_layout(p_op, gl.DotOperandLayout(
            operand_index=0, parent=l_blk.type.layout, k_width=p_op.type.layout.k_width))
        l_blk = warpgroup_mma(p_l, ones.permute([1, 0]), l_blk, use_acc=False, is_async=True)
    return acc, l_blk


@gluon.jit
def _promoted(acc, alpha, o_blk):
    """PROMOTE_PV: O = O * alpha + the block's P V, in fp32 (fp8 wgmmas accumulate with
    fewer mantissa bits, and O's error grew with N: 2.8e-2 at 4k keys, 4.1e-2 at 16k)."""
    a = gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, acc.type.layout)), 1)
    return gl.fma(acc, a, o_blk)


@gluon.jit
def _p_operand(p, dtype: gl.constexpr, p_layout: gl.constexpr, V_T: gl.constexpr):
    """P as the register A operand of the PV wgmma. For fp8 the columns are first put in
    FP8_KEY_ORDER (V^T's keys are stored in the same order, so P V is unchanged): within
    each 32-key group a thread then already holds the four keys that share one operand
    register, and the conversion packs bytes in place instead of moving them across lanes
    (S's accumulator gives a thread keys 2q, 2q+1, 2q+8, 2q+9, 2q+16, ... of each 32; the
    e4m3 A operand wants 4q .. 4q+3 and 16+4q .. 16+4q+3 in its registers)."""
    if V_T:
        BM_: gl.constexpr = p.shape[0]
        BN_: gl.constexpr = p.shape[1]
        # Column bits c0..c4 (fastest first) of each 32-key group become k0 = c0, k1 = c3,
        # k2 = c1, k3 = c2, k4 = c4: a permutation of index bits, so no data moves.
        p = p.reshape([BM_, BN_ // 32, 2, 2, 2, 2, 2]).permute([0, 1, 2, 4, 5, 3, 6])
        p = p.reshape([BM_, BN_])
    return gl.convert_layout(p.to(dtype), p_layout)


@gluon.jit
def _masked(s, col0, masked, row0, N_KV, off, CAUSAL: gl.constexpr, s_layout: gl.constexpr):
    """S (keys col0, col0 + 1, ...) with -inf where a key is past N_kv or (causal) after the
    query; only the blocks from n_full on (`masked`) can hold such keys, the others pass
    through untouched."""
    if masked:
        cols = col0 + gl.arange(0, s.shape[1], layout=gl.SliceLayout(0, s_layout))
        keep = gl.expand_dims(cols < N_KV, 0)
        if CAUSAL:
            rows = row0 + off + gl.arange(0, s.shape[0], layout=gl.SliceLayout(1, s_layout))
            keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        s = gl.where(keep, s, -float("inf"))
    return s


@gluon.jit
def _issue_s(q, k_ring, k_ring_x, sk, s_zero, s_x_zero, D: gl.constexpr, BN: gl.constexpr,
             BN_X: gl.constexpr):
    """Issue S_j = Q K_j^T, and with BN_X extra keys a block S_x = Q K_x^T for them."""
    s = warpgroup_mma(q, k_ring.index(sk).reshape([BN, D]).permute([1, 0]), s_zero,
                      use_acc=False, is_async=True)
    s_x = s_x_zero
    if BN_X > 0:
        s_x = warpgroup_mma(q, k_ring_x.index(sk).reshape([BN_X, D]).permute([1, 0]),
                            s_x_zero, use_acc=False, is_async=True)
    return s, s_x


@gluon.jit
def _scores(s, s_x, jb, n_full, row0, N_KV, off, qk_scale, BN: gl.constexpr,
            BN_X: gl.constexpr, CAUSAL: gl.constexpr):
    """Block jb's S (and S_x) masked, and its row max in the scaled (log2) units."""
    masked = jb >= n_full
    s = _masked(s, jb * (BN + BN_X), masked, row0, N_KV, off, CAUSAL, s.type.layout)
    m = gl.max(s, axis=1) * qk_scale
    if BN_X > 0:
        s_x = _masked(s_x, jb * (BN + BN_X) + BN, masked, row0, N_KV, off, CAUSAL,
                      s_x.type.layout)
        m = gl.maximum(m, gl.convert_layout(gl.max(s_x, axis=1) * qk_scale, m.type.layout))
    return s, s_x, m


@gluon.jit
def _extra_p(s_x, m, l_i, qk_scale):
    """P of the extra keys against the row max m, and l with their row sums added."""
    m_x = gl.convert_layout(m, gl.SliceLayout(1, s_x.type.layout))
    p_x = gl.exp2(gl.fma(s_x, qk_scale, -gl.expand_dims(m_x, 1)))
    return p_x, l_i + gl.convert_layout(gl.sum(p_x, axis=1), l_i.type.layout)
