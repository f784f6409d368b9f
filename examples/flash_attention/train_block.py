"""Train a two-layer attention block for a few steps with our attention operator (ops.py) and
with torch's scaled_dot_product_attention from the same initial weights, printing both losses
step by step. On a GPU it runs the Gluon kernels; on the CPU, the interpreter.

    python examples/flash_attention/train_block.py
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from ops import attention  # noqa: E402


class Block(torch.nn.Module):
    """Pre-norm self-attention, causal, with a residual; q/k/v in the attention dtype."""

    def __init__(self, dim, heads, attn):
        super().__init__()
        self.heads, self.attn = heads, attn
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x, dtype):
        B, N, C = x.shape
        qkv = self.qkv(self.norm(x)).view(B, N, 3, self.heads, C // self.heads)
        q, k, v = (t.transpose(1, 2).to(dtype).contiguous() for t in qkv.unbind(2))
        o = self.attn(q, k, v).to(x.dtype)
        return x + self.out(o.transpose(1, 2).reshape(B, N, C))


def ours(q, k, v):
    return attention(q, k, v, causal=True)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def train(attn, seed, steps, device, B, N, dim, heads, dtype):
    torch.manual_seed(seed)
    blocks = torch.nn.ModuleList([Block(dim, heads, attn) for _ in range(2)]).to(device)
    opt = torch.optim.SGD(blocks.parameters(), lr=0.5)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn((B, N, dim), generator=gen).to(device)
    target = torch.randn((B, N, dim), generator=gen).to(device)
    losses = []
    for _ in range(steps):
        h = x
        for blk in blocks:
            h = blk(h, dtype)
        loss = F.mse_loss(h, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def main(steps=4):
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    B, N, dim, heads = (4, 1024, 1024, 8) if gpu else (1, 96, 128, 2)
    dtype = torch.bfloat16 if gpu else torch.float16
    mine = train(ours, 0, steps, device, B, N, dim, heads, dtype)
    ref = train(sdpa, 0, steps, device, B, N, dim, heads, dtype)
    print(f"two-layer attention block, B={B} N={N} dim={dim} heads={heads} {dtype} on "
          f"{'the GPU' if gpu else 'the CPU interpreter'}")
    for i, (a, b) in enumerate(zip(mine, ref)):
        print(f"step {i}: loss ours {a:.5f}   sdpa {b:.5f}")
    return mine, ref


if __name__ == "__main__":
    main()
