"""The attention forward's and backward's float64 references, random inputs, and the check
the examples' `main` runs (hopper.py and blackwell.py re-export them)."""

from __future__ import annotations

import math

import numpy as np


def softmax_parts(q64, k64, causal=False, sm_scale=None):
    """The float64 softmax of q k^T * scale (k64 with q's heads, GQA already expanded):
    (p = exp(s - m), m, l = rowsum(p), scale), keepdims; m = 0 and l = 0 in rows that see
    no key. Causal masking lines the last query up with the last key (FlashAttention's
    alignment). Shared by the forward's and the backward's references."""
    N_q, D = q64.shape[-2:]
    N_kv = k64.shape[-2]
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    s = np.einsum("bhqd,bhkd->bhqk", q64, k64) * scale
    if causal:
        keep = np.arange(N_kv)[None, :] <= np.arange(N_q)[:, None] + (N_kv - N_q)
        s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m_safe)
    return p, m_safe, p.sum(axis=-1, keepdims=True), scale


def reference(q, k, v, causal=False, sm_scale=None, descales=(1.0, 1.0, 1.0)):
    """(o, lse) in float64 on the CPU. Rows that see no key: o = 0, lse = -inf."""
    q64, k64, v64 = (np.asarray(x).astype(np.float64) * s for x, s in zip((q, k, v), descales))
    H, H_kv = q64.shape[1], k64.shape[1]
    k64 = np.repeat(k64, H // H_kv, axis=1)
    v64 = np.repeat(v64, H // H_kv, axis=1)
    p, m_safe, l, _ = softmax_parts(q64, k64, causal, sm_scale)
    o = np.einsum("bhqk,bhkd->bhqd", p, v64) / np.where(l > 0, l, 1.0)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, np.log(np.where(l[..., 0] > 0, l[..., 0], 1.0))
                       + m_safe[..., 0], -np.inf)
    return o, lse


def backward_reference(q, k, v, do, causal=False, sm_scale=None):
    """The backward's (dq, dk, dv) in float64 on the CPU (rows that see no key get zero
    gradients; dk and dv summed over the query heads that share them)."""
    q64, k64, v64, do64 = (np.asarray(x).astype(np.float64) for x in (q, k, v, do))
    B, H, N_q, D = q64.shape
    H_kv, N_kv = k64.shape[1], k64.shape[2]
    group = H // H_kv
    kr, vr = np.repeat(k64, group, axis=1), np.repeat(v64, group, axis=1)
    p, _, denom, scale = softmax_parts(q64, kr, causal, sm_scale)
    p = p / np.where(denom > 0, denom, 1.0)
    o = np.einsum("bhqk,bhkd->bhqd", p, vr)
    dv = np.einsum("bhqk,bhqd->bhkd", p, do64)
    dp = np.einsum("bhqd,bhkd->bhqk", do64, vr)
    ds = p * (dp - (do64 * o).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bhkd->bhqd", ds, kr) * scale
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q64) * scale
    fold = lambda x: x.reshape(B, H_kv, group, N_kv, D).sum(axis=2)  # noqa: E731
    return dq, fold(dk), fold(dv)


def numpy_dtype(dtype_name: str):
    """The numpy dtype of an input dtype name (fp16, bf16 and fp8 e4m3 through ml_dtypes)."""
    import ml_dtypes
    return {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
            "float8_e4m3fn": ml_dtypes.float8_e4m3fn}[dtype_name]


def random_inputs(B, H, H_kv, N_q, N_kv, D, dtype_name="float16", seed=0):
    np_dtype = numpy_dtype(dtype_name)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, N_q, D)).astype(np_dtype)
    k = rng.standard_normal((B, H_kv, N_kv, D)).astype(np_dtype)
    v = rng.standard_normal((B, H_kv, N_kv, D)).astype(np_dtype)
    return q, k, v


def check_forward(attention_forward, shape, gpu: bool, label: str = "attention fwd") -> bool:
    """Run `attention_forward` on random inputs of `shape` (B, H, H_kv, N, D), causal and
    not, against `reference`; print each check and return whether all passed."""
    from _common import to_device, to_host
    B, H, H_kv, N, D = shape
    ok = True
    for causal in (False, True):
        q, k, v = random_inputs(B, H, H_kv, N, N, D)
        o, lse = attention_forward(*(to_device(x, gpu) for x in (q, k, v)), causal=causal,
                                   return_lse=True)
        ref_o, ref_lse = reference(q, k, v, causal)
        err = float(np.abs(to_host(o).astype(np.float64) - ref_o).max())
        lerr = float(np.abs(to_host(lse) - ref_lse).max())
        good = err < 2e-2 and lerr < 1e-3
        ok &= good
        print(f"{label} B={B} H={H} H_kv={H_kv} N={N} D={D} causal={causal} on the "
              f"{'GPU' if gpu else 'CPU interpreter'}: max |o - ref| {err:.1e}, "
              f"max |lse - ref| {lerr:.1e} ({'ok' if good else 'WRONG'})")
    return ok
