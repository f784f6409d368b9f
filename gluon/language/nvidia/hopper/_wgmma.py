"""Hopper warpgroup MMA builtins: `warpgroup_mma`, `warpgroup_mma_wait`, `warpgroup_mma_init`,
with the names, parameters and results of `triton.experimental.gluon.language.nvidia.hopper`
3.6.

    acc = warpgroup_mma(a_smem, b_smem, acc, is_async=True)      # a token
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])     # the tensor, safe to read

Layout and type rules are checked at the call in the user's terms (`shared_codegen.ops.wgmma.
definition.check_warpgroup_mma`); the op verifier repeats them on the IR. The ops and their
interpreter rules are in `shared_codegen/ops/wgmma/definition.py`, lowering in
`shared_codegen/ops/wgmma/lowering.py`.

Where we differ from Triton: the token an async `warpgroup_mma` returns is a tensor subclass
(it carries the accumulator's tensor type), so a kernel that uses it as a tensor before the
wait compiles; the interpreter reports that read as a race, naming both lines.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, tensor, wrap
from shared_codegen.ir.types import SharedMemoryType, int1
from shared_codegen.ops.wgmma.definition import (WarpGroupDotOp, WarpGroupDotWaitOp,
                                                 check_warpgroup_mma)

__all__ = ["warpgroup_mma", "warpgroup_mma_wait", "warpgroup_mma_init",
           "warpgroup_mma_accumulator", "warpgroup_mma_accumulator_type"]

_PRECISIONS = ("tf32", "tf32x3", "ieee")


class warpgroup_mma_accumulator_type:
    """Triton 3.6's type of an accumulator token: the accumulator's tensor type, wrapped.
    Ours is descriptive only: a token's `.type` stays its tensor type (the token is a tensor
    subclass), and `accumulator_type` gives this wrapper."""

    def __init__(self, tensor_type):
        self.tensor_type = tensor_type

    def __eq__(self, other):
        return isinstance(other, warpgroup_mma_accumulator_type) and \
            self.tensor_type == other.tensor_type

    def __hash__(self):
        return hash(("warpgroup_mma_accumulator_type", self.tensor_type))

    def __repr__(self):
        return f"warpgroup_mma_accumulator_type({self.tensor_type})"


class warpgroup_mma_accumulator(tensor):
    """The result of an async `warpgroup_mma`: registers the tensor cores are still writing.
    Pass it to another `warpgroup_mma` as `acc` or to `warpgroup_mma_wait` in `deps`."""

    @property
    def accumulator_type(self) -> warpgroup_mma_accumulator_type:
        return warpgroup_mma_accumulator_type(self.type)

    def __repr__(self):
        return f"warpgroup_mma_accumulator({self.type})"


@builtin
def warpgroup_mma_init(value, _semantic=None) -> warpgroup_mma_accumulator:
    """Wrap a register tensor as an accumulator token (no code)."""
    if not isinstance(value, tensor) or not value.is_block():
        raise TypeError(f"warpgroup_mma_init takes a tensor, got {value!r}")
    return warpgroup_mma_accumulator(value.handle, value.type)


def _use_acc(use_acc, _semantic):
    x = _semantic.to_tensor(use_acc)
    if x.is_block() or x.type != int1:
        raise TypeError(f"use_acc must be a bool or an i1 scalar, got {x.type}")
    return x


@builtin
def warpgroup_mma(a, b, acc, *, use_acc=True, precision=None, max_num_imprecise_acc=None,
                  is_async=False, _semantic=None):
    """`a @ b + (acc if use_acc else 0)` on a warpgroup's tensor cores (`wgmma.mma_async`,
    sm_90a). `acc` has an `NVMMADistributedLayout(version=[3, 0], ...)`; `a` is a shared
    memory descriptor (NVMMASharedLayout) or a register tensor with `DotOperandLayout(0,
    acc.layout, k_width=32 // element bits)`; `b` is a shared memory descriptor. With
    `is_async=True` the result is a `warpgroup_mma_accumulator` to retire with
    `warpgroup_mma_wait`; otherwise the op waits for itself (and every earlier wgmma)."""
    for what, x in (("a", a), ("b", b), ("acc", acc)):
        if not isinstance(x, tensor):
            raise TypeError(f"warpgroup_mma: {what} must be a tensor or shared memory "
                            f"descriptor, got {x!r}")
    use = _use_acc(use_acc, _semantic)
    precision = "tf32" if precision is None else str(precision).lower()
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {list(_PRECISIONS)}, got {precision!r}")
    mnia = max_num_imprecise_acc
    fp8 = a.dtype.is_fp8() and b.dtype.is_fp8()
    if mnia is not None and not fp8:
        mnia = None  # only fp8 products accumulate imprecisely
    is_async = bool(is_async)
    check_warpgroup_mma(a.type, b.type, acc.type, precision, mnia)
    handle = WarpGroupDotOp.build(_semantic.builder, a.handle, b.handle, acc.handle,
                                  use.handle, precision, mnia, is_async)
    if is_async:
        return warpgroup_mma_accumulator(handle, handle.type)
    return _semantic.make_tensor(handle)


@builtin
def warpgroup_mma_wait(num_outstanding=0, deps=None, _semantic=None):
    """Wait until at most `num_outstanding` warpgroup MMAs are in flight
    (`wgmma.wait_group`). `deps` (required, as in Triton) are the accumulators and operands
    to keep alive; they come back, the accumulators as tensors. One dep returns one value,
    several a tuple."""
    if deps is None:
        raise ValueError("warpgroup_mma_wait deps must be given")
    n = num_outstanding
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"num_outstanding must be a non-negative int (wgmma.wait_group takes "
                         f"an immediate), got {n!r}")
    deps = list(deps)
    for d in deps:
        if not isinstance(d, tensor):
            raise TypeError(f"warpgroup_mma_wait deps must be tensors or shared memory "
                            f"descriptors, got {d!r}")
    op = WarpGroupDotWaitOp.build(_semantic.builder, [d.handle for d in deps], n)
    results = []
    for d, r in zip(deps, op.results):
        if isinstance(d.type, SharedMemoryType):
            results.append(wrap(r))
        else:
            results.append(tensor(r, r.type))
    return results[0] if len(results) == 1 else tuple(results)
