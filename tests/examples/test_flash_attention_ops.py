"""examples/flash_attention/ops.py: the attention torch operator on the interpreter path (CPU
tensors) against SDPA computed in float32, its fake implementation (torch.library.opcheck
and torch.compile(fullgraph=True) with no graph break), the numpy-only path, and the
training example. The torch tests skip where torch is not installed; on the GPU:
tests/gpu/test_flash_attention_bwd_gpu.py."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import hopper  # noqa: E402
import ops  # noqa: E402


def test_numpy_inputs_run_the_interpreter_forward():
    q, k, v = hopper.random_inputs(1, 2, 1, 90, 70, 64, "float16", seed=3)
    o = ops.attention(q, k, v, causal=True)
    ref, _ = hopper.reference(q, k, v, causal=True)
    assert o.dtype == np.float16
    assert float(np.abs(o.astype(np.float64) - ref).max()) < 2e-3
    with pytest.raises(ValueError, match=r"attention: q has dtype float32; allowed: float16, "
                                         r"bfloat16"):
        ops.attention(q.astype(np.float32), k, v)
    with pytest.raises(ValueError, match=r"head dim D = 256 is not supported; allowed: 64, "
                                         r"128"):
        x = np.zeros((1, 1, 16, 256), np.float16)
        ops.attention(x, x, x)


def _sdpa_float32(torch, q, k, v, causal, scale):
    import torch.nn.functional as F
    q, k, v = (x.detach().float().requires_grad_() for x in (q, k, v))
    if causal and q.shape[2] != k.shape[2]:  # bottom-right aligned mask, as ours
        n_q, n_kv = q.shape[2], k.shape[2]
        mask = torch.arange(n_kv)[None, :] <= torch.arange(n_q)[:, None] + (n_kv - n_q)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                           enable_gqa=True)
    else:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                           enable_gqa=True)
    return o, (q, k, v)


@pytest.mark.parametrize("dtype, D, causal, H, H_kv, N_q, N_kv, scale", [
    ("float16", 64, True, 4, 2, 100, 100, None),
    ("bfloat16", 128, False, 2, 1, 70, 150, 0.2),
    ("float16", 128, True, 2, 2, 80, 140, None),
])
def test_gradients_match_sdpa_in_float32(dtype, D, causal, H, H_kv, N_q, N_kv, scale):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(N_q)
    tdt = getattr(torch, dtype)
    mk = lambda h, n: torch.randn((1, h, n, D), generator=gen).to(tdt)  # noqa: E731
    q, k, v = mk(H, N_q), mk(H_kv, N_kv), mk(H_kv, N_kv)
    w = torch.randn((1, H, N_q, D), generator=gen)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = ops.attention(*leaves, causal=causal, sm_scale=scale)
    (o.float() * w).sum().backward()
    ref_o, ref_leaves = _sdpa_float32(torch, q, k, v, causal, scale)
    (ref_o * w).sum().backward()
    tol = 3e-3 if dtype == "float16" else 2e-2
    assert o.dtype == tdt
    assert float((o.detach().float() - ref_o.detach()).abs().max() / ref_o.abs().max()) < tol
    for name, mine, ref in zip(("dq", "dk", "dv"), leaves, ref_leaves):
        assert mine.grad.dtype == tdt and mine.grad.shape == mine.shape, name
        err = float((mine.grad.float() - ref.grad).abs().max() / ref.grad.abs().max())
        assert err < tol, (name, err)


def test_fake_implementation_and_compile_without_graph_breaks():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((1, 2, 64, 64), generator=gen).half() for _ in range(3))
    torch.library.opcheck(torch.ops.flash_attention_hopper.forward.default,
                          (q, k, v, True, 0.125),
                          test_utils=("test_schema", "test_faketensor"))

    def f(q, k, v):
        return ops.attention(q, k, v, causal=True).float().square().sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    compiled(*leaves).backward()
    eager = [x.clone().requires_grad_() for x in (q, k, v)]
    f(*eager).backward()
    for a, b in zip(leaves, eager):
        assert torch.equal(a.grad, b.grad)
    with pytest.raises(ValueError, match=r"attention: q has dtype float32; allowed: float16, "
                                         r"bfloat16"):
        ops.attention(q.float(), k, v)


def test_the_training_example_follows_sdpa():
    pytest.importorskip("torch")
    import train_block
    mine, ref = train_block.main(steps=2)
    assert mine[1] < mine[0]
    np.testing.assert_allclose(mine, ref, rtol=2e-3)
