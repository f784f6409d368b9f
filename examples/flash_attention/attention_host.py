"""The host side of the attention forwards (hopper.py, and blackwell.py through it):
input checks, outputs, TMA descriptors (V^T for fp8) and the persistent grid."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from gluon import language as gl
from gluon.nvidia.hopper import TensorDescriptor

IN_DTYPES = ("float16", "bfloat16", "float8_e4m3fn")
OUT_DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128, 256)
BACKWARD_HEAD_DIMS = (64, 128)


def _dtype_name(x) -> str:
    name = str(x.dtype)
    return name[len("torch."):] if name.startswith("torch.") else name


def _is_numpy(x) -> bool:
    return isinstance(x, np.ndarray)


def _shape(x, name):
    shape = tuple(int(s) for s in x.shape)
    if len(shape) != 4:
        raise ValueError(f"attention_forward: {name} must have 4 dims (B, H, N, D), got shape "
                         f"{shape}")
    return shape


def _strides(x):
    if _is_numpy(x):
        return [s // x.itemsize for s in x.strides]
    return list(x.stride())


def _aligned(x):
    """x itself when TMA can read it (16-byte aligned strides), else a contiguous copy."""
    item = x.itemsize if _is_numpy(x) else x.element_size()
    if all((s * item) % 16 == 0 for s in _strides(x)[:-1]):
        return x
    return np.ascontiguousarray(x) if _is_numpy(x) else x.contiguous()


def _nvmma(bits: int, inner: int) -> gl.NVMMASharedLayout:
    return gl.NVMMASharedLayout(min(128, inner * bits // 8), bits, rank=4)


@functools.lru_cache(maxsize=None)  # a device query is ~10 driver calls; launchers ask per call
def num_sms() -> int:
    from shared_codegen.runtime.driver import get_device
    return get_device().sm_count


def persistent_grid(q, num_tiles: int, num_programs=None, ctas: int = 1):
    """The launch grid of a persistent kernel over `num_tiles` tiles: `num_programs` programs
    (default: one per SM on the GPU, one per `ctas` SMs when a program is a cluster of that
    many CTAs, 2 in the interpreter), never more than there are tiles."""
    if num_programs is None:
        num_programs = 2 if _is_numpy(q) else num_sms() // ctas
    return (max(1, min(num_programs, num_tiles)),)


def _check_heads(func, D, head_dims, H, H_kv, why=""):
    """`func`'s head dim D among `head_dims` and H query heads a multiple of H_kv."""
    if D not in head_dims:
        raise ValueError(f"{func}: head dim D = {D} is not supported; allowed: "
                         f"{', '.join(map(str, head_dims))}")
    if H % H_kv:
        raise ValueError(f"{func}: q has H = {H} heads, not a multiple of k/v's H_kv = "
                         f"{H_kv}{why}")


def _check_dtypes(func, arrays, allowed) -> str:
    """The one dtype name that `arrays` ((name, array) pairs) share, each among `allowed`."""
    names = {n: _dtype_name(x) for n, x in arrays}
    for n, dt in names.items():
        if dt not in allowed:
            raise ValueError(f"{func}: {n} has dtype {dt}; allowed: {', '.join(allowed)}")
    if len(set(names.values())) != 1:
        *most, last = names
        raise ValueError(f"{func}: {', '.join(most)} and {last} must share one dtype, got "
                         f"{', '.join(f'{n} {d}' for n, d in names.items())}")
    return names[arrays[0][0]]


class Problem(NamedTuple):
    """The checked shapes and dtypes of one attention call."""
    B: int
    H: int
    N_q: int
    D: int
    H_kv: int
    N_kv: int
    dtype: str      # the inputs' dtype name
    out_dtype: str  # o's dtype name
    fp8: bool


def check_inputs(q, k, v, out_dtype=None, head_dims=HEAD_DIMS) -> Problem:
    """The problem `attention_forward(q, k, v)` describes, or a ValueError naming the bad
    argument (shared by the Hopper and Blackwell forwards)."""
    qs, ks, vs = _shape(q, "q"), _shape(k, "k"), _shape(v, "v")
    B, H, N_q, D = qs
    if ks != vs:
        raise ValueError(f"attention_forward: k and v must have the same shape, got k {ks} "
                         f"and v {vs}")
    Bk, H_kv, N_kv, Dk = ks
    if Bk != B:
        raise ValueError(f"attention_forward: k has batch {Bk} but q has batch {B}; they "
                         f"must match")
    if Dk != D:
        raise ValueError(f"attention_forward: k has head dim {Dk} but q has {D}; they must "
                         f"match")
    _check_heads("attention_forward", D, head_dims, H, H_kv,
                 " (grouped-query attention shares each k/v head among H / H_kv query heads)")
    dt = _check_dtypes("attention_forward", (("q", q), ("k", k), ("v", v)), IN_DTYPES)
    for n, x in (("q", q), ("k", k), ("v", v)):
        if _strides(x)[-1] != 1 and 0 not in x.shape:  # numpy gives empty arrays 0 strides
            raise ValueError(f"attention_forward: {n}'s last dim must be contiguous (stride "
                             f"1), got strides {tuple(_strides(x))}")
    fp8 = dt == "float8_e4m3fn"
    out_name = (out_dtype if isinstance(out_dtype, str) or out_dtype is None
                else _dtype_name(out_dtype)) or ("float16" if fp8 else dt)
    if out_name not in (OUT_DTYPES if fp8 else (dt,)):
        raise ValueError(f"attention_forward: out_dtype {out_name} is not allowed for {dt} "
                         f"inputs; allowed: {', '.join(OUT_DTYPES if fp8 else (dt,))}")
    return Problem(B, H, N_q, D, H_kv, N_kv, dt, out_name, fp8)


def _backward_shape(x, name, rank):
    shape = tuple(int(s) for s in x.shape)
    if len(shape) != rank:
        dims = "(B, H, N, D)" if rank == 4 else "(B, H, N_q)"
        raise ValueError(f"attention_backward: {name} must have {rank} dims {dims}, got shape "
                         f"{shape}")
    return shape


def check_backward_inputs(q, k, v, o, lse, do):
    """hopper_bwd.attention_backward's arguments checked: (B, H, H_kv, N_q, N_kv, D)."""
    B, H, N_q, D = _backward_shape(q, "q", 4)
    ks, vs = _backward_shape(k, "k", 4), _backward_shape(v, "v", 4)
    if ks != vs:
        raise ValueError(f"attention_backward: k and v must have the same shape, got k {ks} "
                         f"and v {vs}")
    Bk, H_kv, N_kv, Dk = ks
    if (Bk, Dk) != (B, D):
        raise ValueError(f"attention_backward: k has (batch, head dim) ({Bk}, {Dk}) but q has "
                         f"({B}, {D}); they must match")
    for name, x in (("o", o), ("do", do)):
        if _backward_shape(x, name, 4) != (B, H, N_q, D):
            raise ValueError(f"attention_backward: {name} must have q's shape {(B, H, N_q, D)}, "
                             f"got {tuple(x.shape)}")
    if _backward_shape(lse, "lse", 3) != (B, H, N_q):
        raise ValueError(f"attention_backward: lse must have shape (B, H, N_q) = "
                         f"{(B, H, N_q)}, got {tuple(lse.shape)}")
    if _dtype_name(lse) != "float32":
        raise ValueError(f"attention_backward: lse has dtype {_dtype_name(lse)}; it must be "
                         f"float32 (attention_forward(..., return_lse=True) gives it)")
    _check_heads("attention_backward", D, BACKWARD_HEAD_DIMS, H, H_kv)
    _check_dtypes("attention_backward",
                  (("q", q), ("k", k), ("v", v), ("o", o), ("do", do)), OUT_DTYPES)
    return B, H, H_kv, N_q, N_kv, D


def allocate_outputs(q, B, H, N_q, D, out_name, return_lse):
    """o (B, H, N_q, D) of dtype `out_name` and lse (B, H, N_q) fp32 (a 1-element placeholder
    without `return_lse`), numpy or on q's device like q."""
    if _is_numpy(q):
        import ml_dtypes
        np_out = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[out_name]
        o = np.empty((B, H, N_q, D), np_out)
        lse = np.empty((B, H, N_q), np.float32) if return_lse else np.empty((1,), np.float32)
    else:
        import torch
        o = torch.empty((B, H, N_q, D), device=q.device, dtype=getattr(torch, out_name))
        lse = torch.empty((B, H, N_q) if return_lse else (1,), device=q.device,
                          dtype=torch.float32)
    return o, lse


def no_key_outputs(o, lse, return_lse):
    """The forward of an empty problem (N_q = 0, or N_kv = 0: every row sees no key): o = 0
    and lse = -inf, as for a causal row that sees no key."""
    o[...] = 0
    lse[...] = -np.inf
    return (o, lse) if return_lse else o


# Within each group of 32 keys, the key stored at position k of V^T for the Hopper fp8 PV
# wgmma (see `_p_operand`): bits (k0, k1, k2, k3, k4) of k select key
# k0 + 8 k1 + 2 k2 + 4 k3 + 16 k4.
FP8_KEY_ORDER = tuple((k & 1) | ((k >> 1) & 1) << 3 | ((k >> 2) & 1) << 1
                      | ((k >> 3) & 1) << 2 | ((k >> 4) & 1) << 4 for k in range(32))


def transposed_v_descriptor(v, block_n, key_order=None):
    """A TMA descriptor of V^T (B, H_kv, D, N_kv) with [1, 1, D, block_n] blocks: fp8 MMAs
    read their B operand K-major only. N_kv is padded to 16 bytes in the copy. With
    `key_order` (a permutation of range(32), e.g. FP8_KEY_ORDER), position k of every
    32-key group holds key key_order[k]; N_kv is then padded with zero keys to a multiple of
    32 and the descriptor covers the padding (masked out of S, so it adds nothing)."""
    B, H_kv, N_kv, D = _shape(v, "v")
    group = 16 if key_order is None else 32
    n_pad = -(-N_kv // group) * group
    index = (None if key_order is None
             else np.arange(n_pad).reshape(-1, 32)[:, list(key_order)].reshape(-1))
    if _is_numpy(v):
        vt = np.zeros((B, H_kv, D, n_pad), v.dtype)
        vt[..., :N_kv] = np.swapaxes(v, -1, -2)
        if index is not None:
            vt = np.ascontiguousarray(vt[..., index])
    else:
        import torch
        vt = torch.zeros((B, H_kv, D, n_pad), device=v.device, dtype=v.dtype)
        vt[..., :N_kv] = v.transpose(-1, -2)
        if index is not None:
            vt = vt[..., torch.as_tensor(index, device=v.device)].contiguous()
    n_desc = N_kv if key_order is None else n_pad
    return TensorDescriptor(vt, [B, H_kv, D, n_desc], _strides(vt), [1, 1, D, block_n],
                            _nvmma(8, block_n))
