"""Flash decoding with the KV cache split across ranks, combined by log-sum-exp.

One query token per head; each of the `W` ranks holds `S_LOCAL` of the sequence's keys and
values. Each program (one head) of each rank:

1. runs the online softmax over its rank's keys: a partial output `o_r` (already divided by
   its own softmax sum) and `lse_r = max + log(sum)`;
2. puts `o_r` and `lse_r` into slot `r` of every rank's `parts` / `lses` (symmetric
   tensors) and adds 1 to that rank's counter for the head (release);
3. waits until its own counter reaches `W` (acquire) and combines the slots:
   `o = sum_r exp(lse_r - lse) * o_r` with `lse = log(sum_r exp(lse_r))`.

Every rank ends with the full attention output. Run
`python examples/distributed/flash_decode.py` for 4 simulated ranks on the CPU, or under
`torchrun --nproc-per-node 8` on GPUs.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tile  # noqa: E402
import tile.language as tl  # noqa: E402
from _world import fill, make_world, ranks, read  # noqa: E402
from tile.language import distributed as dl  # noqa: E402


@tile.jit
def flash_decode_kernel(q_ptr, k_ptr, v_ptr, parts_ptr, lses_ptr, out_ptr, heap_bases,
                        signal_pad_bases, signal_ptr, rank, world_size, sm_scale,
                        H: tl.constexpr, S_LOCAL: tl.constexpr, D: tl.constexpr,
                        BLOCK_S: tl.constexpr):
    head = tl.program_id(0)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + head * D + dims).to(tl.float32) * (sm_scale * 1.4426950408889634)
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros((D,), dtype=tl.float32)
    for start in range(0, S_LOCAL, BLOCK_S):
        pos = start + tl.arange(0, BLOCK_S)
        kv = (head * S_LOCAL + pos)[:, None] * D + dims[None, :]
        k = tl.load(k_ptr + kv).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)  # base-2 logits
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new)
        v = tl.load(v_ptr + kv).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    o_part = acc / l_i
    lse_part = m_i + tl.log2(l_i)  # base 2
    slot = rank * H + head
    for step in range(0, world_size):
        peer = (rank + step) % world_size
        dl.store(parts_ptr + slot * D + dims, o_part, rank, peer, heap_bases)
        dl.store(lses_ptr + slot, lse_part, rank, peer, heap_bases)
        dl.notify(signal_ptr + head, peer, rank, signal_pad_bases, sig_op="add")
    token = dl.wait(signal_ptr + head, world_size, cmp="ge")
    parts = dl.consume_token(parts_ptr, token)
    lses = dl.consume_token(lses_ptr, token)
    lse_max = -float("inf")
    for src in range(0, world_size):
        lse_max = tl.maximum(lse_max, tl.load(lses + src * H + head))
    total = 0.0
    out = tl.zeros((D,), dtype=tl.float32)
    for src in range(0, world_size):
        weight = tl.exp2(tl.load(lses + src * H + head) - lse_max)
        out += weight * tl.load(parts + (src * H + head) * D + dims)
        total += weight
    tl.store(out_ptr + head * D + dims, (out / total).to(out_ptr.dtype.element_ty))


def flash_decode(world, q, k, v, parts, lses, out, heads, s_local, d, sm_scale, block_s=16,
                 num_warps=4):
    world.reset_signals()
    world.launch(flash_decode_kernel, (heads,),
                 lambda ctx: (q.local(ctx), k.local(ctx), v.local(ctx), parts.local(ctx),
                              lses.local(ctx), out.local(ctx), ctx.heap_bases,
                              ctx.signal_pad_bases, ctx.signal_pad, ctx.rank, ctx.world_size,
                              sm_scale),
                 H=heads, S_LOCAL=s_local, D=d, BLOCK_S=block_s, num_warps=num_warps)


def reference(q, k_all, v_all, sm_scale):
    """Attention of one query per head over the whole (gathered) sequence, in float64."""
    keys = np.concatenate(list(k_all), axis=1).astype(np.float64)   # H x S x D
    values = np.concatenate(list(v_all), axis=1).astype(np.float64)
    logits = np.einsum("hd,hsd->hs", q.astype(np.float64), keys) * sm_scale
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return np.einsum("hs,hsd->hd", p, values)


def main(world_size: int = 4, heads: int = 4, s_local: int = 32, d: int = 32,
         heap_bytes: int = 1 << 20) -> float:
    world, on_gpu = make_world(world_size, heap_bytes)
    w = world.world_size
    rng = np.random.default_rng(0)
    q_host = rng.standard_normal((heads, d)).astype(np.float16)
    k_all = rng.standard_normal((w, heads, s_local, d)).astype(np.float16)
    v_all = rng.standard_normal((w, heads, s_local, d)).astype(np.float16)
    sm_scale = 1.0 / float(np.sqrt(d))
    q = world.empty("q", (heads, d), np.float16)
    k = world.empty("k", (heads, s_local, d), np.float16)
    v = world.empty("v", (heads, s_local, d), np.float16)
    parts = world.empty("parts", (w, heads, d), np.float32)
    lses = world.empty("lses", (w, heads), np.float32)
    out = world.empty("out", (heads, d), np.float32)
    for r in ranks(world, on_gpu):
        fill(q, r, q_host, on_gpu)
        fill(k, r, k_all[r], on_gpu)
        fill(v, r, v_all[r], on_gpu)
    if on_gpu:
        world.barrier()
    flash_decode(world, q, k, v, parts, lses, out, heads, s_local, d, sm_scale)
    expected = reference(q_host, k_all, v_all, sm_scale)
    error = max(float(np.max(np.abs(read(out, r, on_gpu) - expected)))
                for r in ranks(world, on_gpu))
    where = "GPUs" if on_gpu else "simulated ranks"
    print(f"flash decoding on {w} {where}: {heads} heads, {w * s_local} keys, D={d}, "
          f"max abs error {error:.3g}")
    if error > 1e-3:
        raise SystemExit(f"flash decoding is wrong: max abs error {error}")
    return error


if __name__ == "__main__":
    main()
