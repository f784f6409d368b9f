"""The Hopper flash-attention backward (examples/flash_attention/hopper_bwd.py) and the torch
operator (ops.py) on the GPU: gradients against a float32 computation, within the error
SDPA's own backward (cuDNN / efficient) shows on the same inputs; torch.compile with
fullgraph=True through the operator."""

import math
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _mask(torch, n_q, n_kv):
    return torch.arange(n_kv, device="cuda")[None, :] <= \
        torch.arange(n_q, device="cuda")[:, None] + (n_kv - n_q)


def _grads_float32(torch, q, k, v, do, causal):
    """(dq, dk, dv) of a float32 attention with a bottom-right causal mask."""
    group = q.shape[1] // k.shape[1]
    q32, k32, v32 = (x.detach().float().requires_grad_() for x in (q, k, v))
    s = q32 @ k32.repeat_interleave(group, 1).transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~_mask(torch, q.shape[2], k.shape[2]), -float("inf"))
    o = torch.softmax(s, -1).nan_to_num(0.0) @ v32.repeat_interleave(group, 1)
    return torch.autograd.grad(o, (q32, k32, v32), do.float())


def _sdpa_grads(torch, q, k, v, do, causal):
    import torch.nn.functional as F
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    kw = {"enable_gqa": True}
    if causal and q.shape[2] != k.shape[2]:
        kw["attn_mask"] = _mask(torch, q.shape[2], k.shape[2])
    else:
        kw["is_causal"] = causal
    o = F.scaled_dot_product_attention(*leaves, **kw)
    return torch.autograd.grad(o, leaves, do)


def _rel(a, b):
    return float((a.float() - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("dtype, D, causal, B, H, H_kv, N_q, N_kv, options", [
    ("float16", 128, False, 2, 8, 2, 1000, 1000, {}),
    ("float16", 128, True, 2, 8, 8, 2048, 2048, {}),
    ("bfloat16", 128, True, 1, 4, 2, 700, 1500, {}),
    ("bfloat16", 64, False, 2, 4, 4, 2048, 2048, {}),
    ("float16", 64, True, 1, 4, 1, 1500, 600, {}),
    ("float16", 128, False, 1, 4, 2, 1000, 1000, {"dq_swizzle": 32}),  # 16 dQ boxes
    # 512 (key block, head) tiles: each persistent CTA walks 3-4 of them, loading the next
    # tile's K and V under the last one's epilogue.
    ("float16", 128, False, 2, 16, 8, 4096, 4096, {"persistent": True}),
    ("float16", 128, True, 2, 8, 4, 2048, 2048, {"persistent": True}),  # 128 causal tiles
    # A dQ writer warp issues the reduces; the consumer warps arrive each on its own.
    ("float16", 128, False, 2, 8, 2, 1000, 1000, {"dq_writer": True}),
    ("bfloat16", 128, True, 1, 4, 2, 700, 1500, {"dq_writer": True}),
    ("float16", 64, True, 2, 8, 4, 2048, 2048, {"dq_writer": True, "persistent": True}),
    ("float16", 128, False, 2, 8, 2, 1000, 1000, {"early_dv": True}),
    ("float16", 128, True, 2, 8, 8, 2048, 2048, {"early_dv": True, "dq_writer": True}),
    ("float16", 128, True, 2, 8, 2, 1000, 1000, {"dq_writer": True, "dq_stages": 2,
                                                 "stages": 2}),  # two dQ tiles in flight
    # The unpaired consumer (two partition barriers a block), with 2 and 3 Q / dO stages;
    # the rows with {} above run the paired default.
    ("float16", 128, True, 2, 8, 8, 2048, 2048, {"paired": False}),
    ("bfloat16", 64, True, 1, 4, 2, 700, 1500, {"paired": False}),
    ("float16", 128, False, 2, 8, 2, 1000, 1000, {"stages": 3}),
    ("bfloat16", 64, True, 1, 4, 2, 700, 1500, {"paired": True, "persistent": True}),
])
def test_gradients_match_float32_like_sdpa(torch, dtype, D, causal, B, H, H_kv, N_q, N_kv,
                                           options):
    _check_gradients(torch, dtype, D, causal, B, H, H_kv, N_q, N_kv, options)


@pytest.mark.parametrize("dtype, D, B, H, H_kv, N, options", [
    # 512 tiles on the SMs (3.9 waves), the last 116 + 132 dealt out as query blocks (GQA:
    # cuts inside a head's blocks and between heads); 192 tiles at D = 64; 16 tiles on 5
    # "SMs", most of them cut.
    ("float16", 128, 2, 16, 8, 4096, {}),
    ("bfloat16", 64, 1, 8, 8, 3000, {}),
    ("float16", 128, 1, 4, 2, 1000, {"num_sms": 5}),
])
def test_split_tail_gradients_match_float32_like_sdpa(torch, dtype, D, B, H, H_kv, N, options):
    _check_gradients(torch, dtype, D, False, B, H, H_kv, N, N, dict(options, split_tail=True))


@pytest.mark.parametrize("dtype, D, B, H, H_kv, N_q, N_kv, options", [
    ("float16", 128, 2, 16, 8, 4096, 4096, {"lpt_tail": True}),  # the last 15 of 16 heads
    ("bfloat16", 64, 1, 8, 2, 1500, 3000, {"lpt_heads": 2}),     # every head, N_q < N_kv
    ("float16", 128, 2, 8, 8, 2048, 2048, {"lpt_heads": 5, "paired": False}),
])
def test_lpt_tail_gradients_match_float32_like_sdpa(torch, dtype, D, B, H, H_kv, N_q, N_kv,
                                                    options):
    _check_gradients(torch, dtype, D, True, B, H, H_kv, N_q, N_kv, options)


def _check_gradients(torch, dtype, D, causal, B, H, H_kv, N_q, N_kv, options):
    from hopper import attention_forward
    from hopper_bwd import attention_backward

    gen = torch.Generator(device="cuda").manual_seed(N_q + D)
    tdt = getattr(torch, dtype)
    mk = lambda h, n: torch.randn((B, h, n, D), device="cuda", generator=gen).to(tdt)  # noqa
    q, k, v, do = mk(H, N_q), mk(H_kv, N_kv), mk(H_kv, N_kv), mk(H, N_q)
    o, lse = attention_forward(q, k, v, causal=causal, return_lse=True)
    grads = attention_backward(q, k, v, o, lse, do, causal=causal, **options)
    refs = _grads_float32(torch, q, k, v, do, causal)
    sdpa = _sdpa_grads(torch, q, k, v, do, causal)
    for name, g, s, ref in zip(("dq", "dk", "dv"), grads, sdpa, refs):
        assert g.dtype == tdt and g.shape == ref.shape, name
        # SDPA's own error on these inputs, with room for a different summation order.
        bound = max(2.0 * _rel(s, ref), 5e-3 if dtype == "float16" else 3e-2)
        assert _rel(g, ref) <= bound, (name, _rel(g, ref), _rel(s, ref))


def test_operator_compiles_fullgraph_and_matches_eager(torch):
    from ops import attention

    gen = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn((2, 8, 512, 128), device="cuda", generator=gen).half()
               for _ in range(3))

    def f(q, k, v):
        return attention(q, k, v, causal=True).float().square().mean()

    compiled = torch.compile(f, fullgraph=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    loss = compiled(*leaves)
    loss.backward()
    eager = [x.clone().requires_grad_() for x in (q, k, v)]
    f(*eager).backward()
    for a, b in zip(leaves, eager):
        assert _rel(a.grad, b.grad.float()) < 1e-3
    # The operator's gradients against SDPA's, with the loss's dO = 2 o / numel.
    leaves32 = [x.float().requires_grad_() for x in (q, k, v)]
    import torch.nn.functional as F
    F.scaled_dot_product_attention(*leaves32, is_causal=True).square().mean().backward()
    for a, b in zip(leaves, leaves32):
        assert _rel(a.grad, b.grad) < 1e-2

def test_training_example_follows_sdpa(torch):
    import train_block
    mine, ref = train_block.main(steps=3)
    assert mine[-1] < mine[0]
    for a, b in zip(mine, ref):
        assert abs(a - b) <= 2e-2 * abs(b)
