"""Blackwell tensor-core builtins: `tcgen05_mma`, `tcgen05_mma_scaled`, `tcgen05_commit`,
`tcgen05_copy`, with the names and parameters of
`triton.experimental.gluon.language.nvidia.blackwell` 3.6.

    tcgen05_mma(a_smem, b_smem, acc_tmem, use_acc=False, mbarriers=[bar])
    mbarrier.wait(bar, phase)          # the MMA completed: acc_tmem may be loaded
    tcgen05_copy(src_smem, dst_tmem)   # shared -> tensor memory, in order with the MMAs

    tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc_tmem, a_scale_tmem, b_scale_tmem,
                       "e4m3", "e4m3", use_acc=False)   # block-scaled (MX formats)

Types and layouts are checked at the call in the user's terms (`check_tcgen05_mma` in
`shared_codegen/ops/tcgen05/definition.py`, `check_tcgen05_mma_scaled` in `scaled.py`); the
op verifiers repeat them.

Not here yet: `multicast=True`. Two-CTA MMAs (an accumulator in
`TensorMemoryLayout(two_ctas=True)`, Triton 3.6's way): ops/tcgen05/pair.py, docs/clusters.md.
"""

from __future__ import annotations

from gluon.language.nvidia.hopper._common import smem_arg
from shared_codegen.frontend.values import builtin, tensor, unwrap
from shared_codegen.ir.types import TensorType, int1
from shared_codegen.ops.tcgen05.copy import TCGen5CopyOp, check_tcgen05_copy
from shared_codegen.ops.tcgen05.definition import (TCGen5CommitOp, TCGen5MMAOp,
                                                   check_tcgen05_mma)
from shared_codegen.ops.tcgen05.scaled import TCGen5MMAScaledOp, check_tcgen05_mma_scaled

__all__ = ["tcgen05_mma", "tcgen05_mma_scaled", "tcgen05_commit", "tcgen05_copy"]


def _bool(value, semantic, what: str):
    x = semantic.to_tensor(value)
    if isinstance(x.type, TensorType) or x.type != int1:
        raise TypeError(f"tcgen05_mma: {what} must be a bool or an i1 scalar, got {x.type}")
    return x.handle


@builtin
def tcgen05_mma(a, b, acc, *, use_acc=True, pred=True, multicast=False, mbarriers=None,
                mbarrier_preds=None, _semantic=None):
    """`acc = a @ b + (acc if use_acc else 0)` on the tensor cores, asynchronously
    (`tcgen05.mma`, sm_100a). `acc` is a tensor memory descriptor, `a` a shared or tensor
    memory descriptor, `b` a shared memory descriptor. Each of `mbarriers` receives one
    arrival once the MMA (and every earlier one) completes (`mbarrier_preds` gates each)."""
    for what, x in (("a", a), ("b", b), ("acc", acc)):
        if not isinstance(x, tensor):
            raise TypeError(f"tcgen05_mma: {what} must be a memory descriptor, got {x!r}")
    if unwrap(multicast):
        raise NotImplementedError("tcgen05_mma: multicast=True (two-CTA MMA) is not "
                                  "supported yet")
    check_tcgen05_mma(a.type, b.type, acc.type)
    if acc.type.layout.two_ctas:
        from gluon.language._core import cluster_size
        num_ctas = cluster_size(_semantic)
        if num_ctas % 2:
            raise ValueError(f"tcgen05_mma: a two-CTA MMA (acc in TensorMemoryLayout("
                             f"two_ctas=True)) runs on CTA pairs: launch with num_ctas = 2, 4 "
                             f"or 8 (this kernel has num_ctas={num_ctas})")
    bars, preds = _barriers(mbarriers, mbarrier_preds, _semantic, "tcgen05_mma")
    TCGen5MMAOp.build(_semantic.builder, a.handle, b.handle, acc.handle,
                      _bool(use_acc, _semantic, "use_acc"), _bool(pred, _semantic, "pred"),
                      bars, preds)


@builtin
def tcgen05_mma_scaled(a, b, acc, a_scale, b_scale, a_type, b_type, *, use_acc=True, pred=True,
                       multicast=False, mbarriers=None, mbarrier_preds=None, _semantic=None):
    """`acc = (a * a_scale) @ (b * b_scale) + (acc if use_acc else 0)` on the tensor cores,
    asynchronously (block-scaled `tcgen05.mma`, sm_100a). `a` [M, K] and `b` [K, N] are
    shared memory descriptors holding `a_type` / `b_type` values ("e4m3", "e5m2", or "e2m1"
    packed two per uint8 byte along K); `a_scale` [M, K // VEC] and `b_scale` [N, K // VEC]
    tensor memory in a `TensorMemoryScalesLayout` (uint8 e8m0, VEC 32; or float8e4nv for
    nvfp4, VEC 16). Completion as `tcgen05_mma`: `mbarriers` each get one arrival."""
    for what, x in (("a", a), ("b", b), ("acc", acc), ("a_scale", a_scale),
                    ("b_scale", b_scale)):
        if not isinstance(x, tensor):
            raise TypeError(f"tcgen05_mma_scaled: {what} must be a memory descriptor, got "
                            f"{x!r}")
    if unwrap(multicast):
        raise NotImplementedError("tcgen05_mma_scaled: multicast=True (two-CTA MMA) is not "
                                  "supported yet")
    a_type, b_type = unwrap(a_type), unwrap(b_type)
    for what, fmt in (("a_type", a_type), ("b_type", b_type)):
        if not isinstance(fmt, str):
            raise TypeError(f"tcgen05_mma_scaled: {what} must be a format string ('e2m1', "
                            f"'e4m3' or 'e5m2'), got {fmt!r}")
    check_tcgen05_mma_scaled(a.type, b.type, acc.type, a_scale.type, b_scale.type, a_type,
                             b_type)
    bars, preds = _barriers(mbarriers, mbarrier_preds, _semantic, "tcgen05_mma_scaled")
    TCGen5MMAScaledOp.build(_semantic.builder, a.handle, b.handle, acc.handle, a_scale.handle,
                            b_scale.handle, a_type, b_type,
                            _bool(use_acc, _semantic, "use_acc"), _bool(pred, _semantic, "pred"),
                            bars, preds)


def _barriers(mbarriers, mbarrier_preds, semantic, name):
    """Handles of `mbarriers` and of their predicates (True when not given)."""
    bars = list(unwrap(mbarriers) or [])
    for bar in bars:
        smem_arg(bar, name, "each of mbarriers")
    preds = unwrap(mbarrier_preds)
    preds = [True] * len(bars) if preds is None else list(preds)
    if len(preds) != len(bars):
        raise ValueError(f"{name}: {len(preds)} mbarrier_preds for {len(bars)} mbarriers")
    return ([bar.handle for bar in bars],
            [_bool(p, semantic, "each of mbarrier_preds") for p in preds])


@builtin
def tcgen05_commit(barrier, pred=True, _semantic=None):
    """One arrival on `barrier` once every tcgen05 MMA issued so far has completed
    (`tcgen05.commit`)."""
    from gluon.language.nvidia.hopper._common import pred_arg
    smem_arg(barrier, "tcgen05_commit", "barrier")
    TCGen5CommitOp.build(_semantic.builder, barrier.handle,
                         pred_arg(pred, _semantic, "tcgen05_commit"))


@builtin
def tcgen05_copy(src, dst, _semantic=None):
    """Start an asynchronous copy of the shared memory `src` into the tensor memory `dst`
    (`tcgen05.cp`). It runs in order with the tcgen05 MMAs issued after it; track its
    completion with `tcgen05_commit` (fence generic stores to `src` with
    `fence_async_shared()` first)."""
    for what, x in (("src", src), ("dst", dst)):
        if not isinstance(x, tensor):
            raise TypeError(f"tcgen05_copy: {what} must be a memory descriptor, got {x!r}")
    check_tcgen05_copy(src.type, dst.type)
    TCGen5CopyOp.build(_semantic.builder, src.handle, dst.handle)
