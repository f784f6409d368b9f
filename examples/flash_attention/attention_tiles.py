"""Which tiles and K/V blocks a program of the attention forwards visits (hopper.py; the
Blackwell forward walks its tiles the same way), and the tiles that the Hopper forward
splits between two programs (`split_tail`: the stream-K schedule of gluon/stream_k.py,
non-causal).

A split tile: each program runs the online softmax over its part of the tile's K/V blocks,
so each holds a partial (O unnormalized, row maxima m, row sums l), the same state the loop
carries from block to block; two such partials combine exactly as a block does:

    m = max(m_a, m_b);  O = O_a 2^(m_a - m) + O_b 2^(m_b - m);  l = l_a 2^(m_a - m) + l_b 2^(m_b - m)

Neither program waits for the other. Each consumer warpgroup stores its partial into the
pair's workspace row (its side of it), then counts itself in with one atomic; the second
to arrive reads the other side, combines, and runs the tile's epilogue, and sets the count
back to 0 for the next launch (so the workspace is reused without clearing). The first
returns with nothing to write. Written after CUTLASS's stream-K fix-up, in its
"whoever comes last finishes" form, which needs no program to be resident while another
waits (a wait would hang whenever the GPU runs fewer of our programs at once than the grid).
"""

from __future__ import annotations

import numpy as np

import gluon
from gluon import language as gl


def workspace(q, num_programs: int, num_wg: int, rows: int, head_dim: int):
    """(partial O, m and l, arrival counts) for a grid of `num_programs` (0: no split tiles,
    1-element placeholders), numpy or on q's device: a slot per pair of neighbouring
    programs (num_programs - 1 of them are used), two sides, one row block per consumer
    warpgroup. The counts start at 0 and every launch leaves them at 0; the partials are
    written before they are read, so only the counts are cleared (a call of
    `attention_forward` allocates its own: 17 MB of partials at D = 128 on 132 SMs)."""
    shapes = (((num_programs, 2, num_wg, rows, head_dim), (num_programs, 2, num_wg, 2, rows),
               (num_programs, num_wg)) if num_programs else ((1,), (1,), (1,)))
    if isinstance(q, np.ndarray):
        return (np.empty(shapes[0], np.float32), np.empty(shapes[1], np.float32),
                np.zeros(shapes[2], np.int32))
    import torch
    return (torch.empty(shapes[0], device=q.device, dtype=torch.float32),
            torch.empty(shapes[1], device=q.device, dtype=torch.float32),
            torch.zeros(shapes[2], device=q.device, dtype=torch.int32))


@gluon.jit
def _tile_coords(tile, BH, H, num_m, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr):
    """(batch, head, first query row) of tile `tile` (BLOCK_M query rows). Causal: the last
    (longest) Q blocks first, across all heads; otherwise head-major so neighbouring CTAs
    share K/V in L2. (The Blackwell forward walks its tiles the same way.)"""
    if CAUSAL:
        mb = num_m - 1 - tile // BH
        bh = tile % BH
    else:
        mb = tile % num_m
        bh = tile // num_m
    return bh // H, bh % H, mb * BLOCK_M


@gluon.jit
def _kv_blocks(m0, N_Q, N_KV, BN: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr):
    """(blocks to visit, blocks that need no mask) for the CTA's rows [m0, m0 + BLOCK_M)."""
    if CAUSAL:
        off = N_KV - N_Q
        hi = gl.minimum(N_KV, m0 + BLOCK_M + off)
        n_blocks = gl.cdiv(gl.maximum(hi, 0), BN)
        n_full = gl.minimum(gl.maximum(m0 + off + 1, 0) // BN, N_KV // BN)
    else:
        n_blocks = gl.cdiv(N_KV, BN)
        n_full = N_KV // BN
    return n_blocks, n_full


@gluon.jit
def _rotation(m0, n_blocks, ROWS: gl.constexpr):
    """The block a tile starts at (see `_kv_block`): the tile's index in units of ROWS query
    rows, so that the CTAs of a cluster (ROWS = their tiles' rows together) agree."""
    return (m0 // ROWS) % gl.maximum(n_blocks, 1)


@gluon.jit
def _kv_block(j, rot, n_blocks):
    """The KV block visited j-th: tiles start at a rotated block (`rot`) so that the CTAs
    working on one head do not all read the same K/V lines of L2 at once (at N = 16k a
    whole wave of CTAs shares a head)."""
    jj = j + rot
    return gl.where(jj >= n_blocks, jj - n_blocks, jj)


@gluon.jit
def combine(acc, m_i, l_i, part_ptr, ml_ptr, count_ptr, slot, side, WG: gl.constexpr,
            NUM_WG: gl.constexpr):
    """(finish, O, m, l): store this warpgroup's partial of a split tile, count in; the
    second to arrive gets finish = True and the two partials combined (the first gets
    finish = False and its own state back)."""
    BM: gl.constexpr = acc.shape[0]
    D: gl.constexpr = acc.shape[1]
    o_layout: gl.constexpr = acc.type.layout
    row_layout: gl.constexpr = m_i.type.layout
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    mine = (slot * 2 + side) * NUM_WG + WG
    theirs = (slot * 2 + 1 - side) * NUM_WG + WG
    offs = (gl.expand_dims(gl.arange(0, BM, layout=row_o), 1) * D
            + gl.expand_dims(gl.arange(0, D, layout=gl.SliceLayout(0, o_layout)), 0))
    rows = gl.arange(0, BM, layout=row_layout)
    gl.store(part_ptr + mine * (BM * D) + offs, acc)
    gl.store(ml_ptr + mine * (2 * BM) + rows, m_i)
    gl.store(ml_ptr + mine * (2 * BM) + BM + rows, l_i)
    # Every thread's stores are done before one thread's release (CUTLASS's arrive order:
    # a barrier of the warpgroup, then a gpu-scope atomic that is cumulative over them).
    gl.thread_barrier()
    count = count_ptr + slot * NUM_WG + WG
    finish = gl.atomic_add(count, 1, sem="acq_rel", scope="gpu") == 1
    if finish:
        gl.store(count, 0)
        acc_o = gl.load(part_ptr + theirs * (BM * D) + offs)
        m_o = gl.load(ml_ptr + theirs * (2 * BM) + rows)
        l_o = gl.load(ml_ptr + theirs * (2 * BM) + BM + rows)
        m_new = gl.maximum(m_i, m_o)
        a = gl.exp2(m_i - m_new)
        c = gl.exp2(m_o - m_new)
        acc = (acc * gl.expand_dims(gl.convert_layout(a, row_o), 1)
               + acc_o * gl.expand_dims(gl.convert_layout(c, row_o), 1))
        l_i = l_i * a + l_o * c
        m_i = m_new
    return finish, acc, m_i, l_i


__all__ = ["workspace", "combine"]
