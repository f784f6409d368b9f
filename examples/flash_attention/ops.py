"""The Hopper flash attention (hopper.py forward, hopper_bwd.py backward) as a torch operator.

    from ops import attention
    o = attention(q, k, v, causal=True)       # q (B, H, N_q, D), k, v (B, H_kv, N_kv, D)
    o.sum().backward()                        # dq, dk, dv from hopper_bwd

With torch, `attention` calls `torch.ops.flash_attention_hopper.forward`, a
`torch.library.custom_op` with a fake (meta) implementation, so `torch.compile(fullgraph=True)`
traces through it without a graph break, and an autograd formula that saves (q, k, v, o, lse)
and calls `torch.ops.flash_attention_hopper.backward`. CUDA tensors run the Gluon kernels on
the GPU; CPU tensors run them in the CPU interpreter (through numpy). Without torch,
`attention` is a plain function of numpy arrays (the interpreter's forward).

Inputs: fp16 / bf16 (the backward's dtypes), D in {64, 128}; see hopper.attention_forward.
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import hopper  # noqa: E402
import hopper_bwd  # noqa: E402

try:
    import torch
except ImportError:  # numpy only: the interpreter path
    torch = None


def _to_numpy(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _from_numpy(a):
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _on_host(fn, *tensors, **kw):
    """fn on CPU tensors through the interpreter (numpy in, numpy out)."""
    out = fn(*(_to_numpy(t) for t in tensors), **kw)
    return tuple(_from_numpy(a) for a in out)


def _check_dtype(x, name):
    dt = str(x.dtype).replace("torch.", "")
    if dt not in hopper_bwd.DTYPES:
        raise ValueError(f"attention: {name} has dtype {dt}; allowed: "
                         f"{', '.join(hopper_bwd.DTYPES)} (the backward's dtypes)")


if torch is not None:
    @torch.library.custom_op("flash_attention_hopper::forward", mutates_args=())
    def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                 sm_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        if q.is_cuda:
            return hopper.attention_forward(q, k, v, causal=causal, sm_scale=sm_scale,
                                            return_lse=True)
        return _on_host(hopper.attention_forward, q, k, v, causal=causal, sm_scale=sm_scale,
                        return_lse=True)

    @_forward.register_fake
    def _(q, k, v, causal, sm_scale):
        B, H, N_q, D = q.shape
        return q.new_empty((B, H, N_q, D)), q.new_empty((B, H, N_q), dtype=torch.float32)

    @torch.library.custom_op("flash_attention_hopper::backward", mutates_args=())
    def _backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                  lse: torch.Tensor, do: torch.Tensor, causal: bool,
                  sm_scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if q.is_cuda:
            return hopper_bwd.attention_backward(q, k, v, o, lse, do, causal=causal,
                                                 sm_scale=sm_scale)
        return _on_host(hopper_bwd.attention_backward, q, k, v, o, lse, do, causal=causal,
                        sm_scale=sm_scale)

    @_backward.register_fake
    def _(q, k, v, o, lse, do, causal, sm_scale):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def _setup_context(ctx, inputs, output):
        q, k, v, causal, sm_scale = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        ctx.mark_non_differentiable(lse)

    def _autograd_backward(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o, lse, do.contiguous(), ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None

    _forward.register_autograd(_autograd_backward, setup_context=_setup_context)


def attention(q, k, v, causal=False, sm_scale=None):
    """softmax(q k^T * sm_scale [+ causal mask]) v; q (B, H, N_q, D), k and v (B, H_kv,
    N_kv, D), fp16 / bf16, D in {64, 128}. torch tensors: a differentiable custom op (GPU
    kernels for CUDA tensors, the interpreter for CPU tensors). numpy arrays: the forward in
    the interpreter."""
    D = int(q.shape[-1])
    if D not in hopper_bwd.HEAD_DIMS:
        raise ValueError(f"attention: head dim D = {D} is not supported; allowed: "
                         f"{', '.join(map(str, hopper_bwd.HEAD_DIMS))}")
    scale = float(sm_scale) if sm_scale is not None else D ** -0.5
    if isinstance(q, np.ndarray):
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.dtype.name not in hopper_bwd.DTYPES:
                raise ValueError(f"attention: {name} has dtype {x.dtype.name}; allowed: "
                                 f"{', '.join(hopper_bwd.DTYPES)}")
        return hopper.attention_forward(q, k, v, causal=causal, sm_scale=scale)
    if torch is None:
        raise TypeError(f"attention: q is a {type(q).__name__}; without torch only numpy "
                        f"arrays are accepted")
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_dtype(x, name)
    return _forward(q, k, v, bool(causal), scale)[0]
