"""Gluon's own builtins: the ones whose signature or meaning differs from the tile language
(creation with a `layout`, layout conversion and queries, warps and barriers).

Everything else in `gl.*` is the tile language's builtin itself (see `__init__.py`): those
delegate to `_semantic`, and `GluonSemantic` supplies Gluon's layout rules underneath. Names,
parameters and defaults follow `triton.experimental.gluon.language` 3.6.
"""

from __future__ import annotations

from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.frontend.values import builtin, tensor, unwrap
from shared_codegen.ir.types import TensorType
from tile.language import _types as T

# ---- creation ------------------------------------------------------------------------------


@builtin
def arange(start, end, layout=None, _semantic=None):
    """The int32 values [start, end) in `layout` (AutoLayout() when omitted)."""
    return _semantic.arange(start, end, layout)


@builtin
def full(shape, value, dtype, layout=None, _semantic=None):
    """A `shape` tensor of `dtype` filled with `value`, in `layout` (AutoLayout() when
    omitted)."""
    return _semantic.full(shape, value, dtype, layout)


@builtin
def zeros(shape, dtype, layout=None, _semantic=None):
    return _semantic.full(shape, 0, dtype, layout)


@builtin
def full_like(input, value, shape=None, dtype=None, layout=None, _semantic=None):
    """Like `input` (its shape, dtype and layout unless given), filled with `value`."""
    if not isinstance(input, tensor):
        raise TypeError(f"gl.full_like needs a tensor, got {T.describe(input)}")
    return _semantic.full(input.shape if shape is None else shape, value,
                          input.dtype if dtype is None else dtype,
                          input.layout if layout is None else layout)


@builtin
def zeros_like(input, shape=None, dtype=None, layout=None, _semantic=None):
    return full_like(input, 0, shape=shape, dtype=dtype, layout=layout, _semantic=_semantic)


@builtin
def to_tensor(x, _semantic=None):
    """A compile-time number as a scalar tensor (Triton's typing of literals)."""
    return _semantic.to_tensor(x)


# ---- layouts -------------------------------------------------------------------------------


@builtin
def convert_layout(value, layout, assert_trivial=False, _semantic=None):
    """`value` redistributed in `layout`. With `assert_trivial`, compilation fails unless no
    data crosses threads (a no-op or a register permutation)."""
    return _semantic.convert_layout(value, layout, assert_trivial)


@builtin
def set_auto_layout(value, layout, _semantic=None):
    """Give a tensor that has AutoLayout() the concrete `layout` (and, through the resolve
    pass, every AutoLayout tensor it was computed from)."""
    return _semantic.set_auto_layout(value, layout)


@builtin
def to_linear_layout(layout, shape, _semantic=None):
    """The `LinearLayout` of `layout` for a tensor of `shape`, a compile-time value."""
    return _semantic.to_linear_layout(layout, shape)


@builtin
def bank_conflicts(distr_ty, shared_ty, _semantic=None) -> int:
    """Extra shared-memory wavefronts per instruction when a tensor of type `distr_ty`
    (`x.type`) is written to / read from a descriptor of type `shared_ty` with
    st.shared / ld.shared (0: conflict free). A compile-time int."""
    return _semantic.bank_conflicts(distr_ty, shared_ty)


@constexpr_function
def distributed_type(element_ty, shape, layout):
    """The type of a register tensor (Gluon's `distributed_type`): ours is the IR's
    TensorType, which `x.type` also returns."""
    return TensorType(tuple(int(s) for s in shape), unwrap(element_ty), unwrap(layout))


# ---- warps, barriers -----------------------------------------------------------------------


@builtin
def num_warps(_semantic=None):
    """The number of warps running the kernel (a compile-time int)."""
    return _semantic.num_warps


@builtin
def num_ctas(_semantic=None):
    """The number of CTAs per program: the launch's `num_ctas` (a compile-time int; each
    program then runs as a thread-block cluster of that many CTAs, docs/clusters.md)."""
    return cluster_size(_semantic)


def cluster_size(semantic) -> int:
    """The kernel's `num_ctas` (module attribute, set from the launch)."""
    module = semantic.builder.module
    return int(module.attrs.get("num_ctas", 1)) if module is not None else 1


@builtin
def thread_barrier(_semantic=None):
    """Synchronize the threads of the CTA (`bar.sync 0`)."""
    _semantic.thread_barrier()


@builtin
def barrier_any(pred, _semantic=None):
    """A `thread_barrier` that also answers whether `pred` (a boolean tensor or scalar) is
    true anywhere: in any element of any thread of the CTA, or of the partition inside
    `gl.warp_specialize` (whose warps meet at their own named barrier). The result is a
    boolean scalar, the same in every thread, so `if` may branch on it without splitting
    the warps. PTX `bar.red.or.pred`, CUDA's `__syncthreads_or`; no Triton counterpart.
    Placed right before an `mbarrier.arrive`, it is the barrier that arrival needs."""
    from shared_codegen.ir.types import int1
    from shared_codegen.ops.program.definition import BarrierAnyOp

    pred = _semantic.to_tensor(pred)
    if pred.dtype != int1:
        raise TypeError(f"gl.barrier_any: pred must be a boolean (a comparison), got "
                        f"{pred.type}")
    return _semantic.make_tensor(BarrierAnyOp.build(_semantic.builder, pred.handle))


@builtin
def warp_any(pred, _semantic=None):
    """Whether `pred` (a boolean tensor) is true in any element this warp holds: the same in
    a warp's 32 threads, not across warps, and no barrier (PTX `vote.sync.any.pred`, CUDA's
    `__any_sync`; no Triton counterpart). Its one use is an `if`'s condition: each warp
    takes the branch on its own answer, so warps with nothing to do skip it, e.g. a lazy
    rescale's multiply where no row of the warp's grew:

        if gl.warp_any(alpha != 1.0):
            acc = acc * gl.expand_dims(alpha, 1)

    The branch may only compute values in registers: no loads, stores, barriers, prints or
    wgmma waits, and no conversion or reduction that moves data between warps (the
    compiler names the line). The interpreter runs it as the GPU does: each element of a
    value the branch assigns comes from the side its warps took; an element held by warps
    that disagree must come out the same on both sides."""
    from shared_codegen.ir.types import TensorType, int1
    from shared_codegen.ops.program.warp_vote import WarpAnyOp

    pred = _semantic.to_tensor(pred)
    if pred.dtype != int1:
        raise TypeError(f"gl.warp_any: pred must be a boolean (a comparison), got {pred.type}")
    if isinstance(pred.type, TensorType) and pred.type.layout is None:
        raise TypeError(f"gl.warp_any: pred needs a distributed layout (which says what each "
                        f"warp holds), got {pred.type}")
    return _semantic.make_tensor(WarpAnyOp.build(_semantic.builder, pred.handle))


__all__ = ["arange", "full", "zeros", "full_like", "zeros_like", "to_tensor", "convert_layout",
           "set_auto_layout", "to_linear_layout", "bank_conflicts", "distributed_type",
           "num_warps", "num_ctas", "thread_barrier", "barrier_any", "warp_any"]


# ---- arithmetic as functions, hints --------------------------------------------------------
# Triton 3.6 Gluon exports `add`, `sub`, `mul` (what `x + y` calls) and `assume`.


@builtin
def add(x, y, sanitize_overflow=True, _semantic=None):
    """`x + y` (pointer + offset included). We never insert overflow checks, so
    `sanitize_overflow` changes nothing."""
    return _semantic.add(x, y)


@builtin
def sub(x, y, sanitize_overflow=True, _semantic=None):
    return _semantic.sub(x, y)


@builtin
def mul(x, y, sanitize_overflow=True, _semantic=None):
    return _semantic.binary("mul", x, y)


@builtin
def assume(cond, _semantic=None):
    """A promise that `cond` holds (Triton emits `llvm.assume`). We emit nothing and use no
    such facts yet; a compile-time False is an error, as it can never hold."""
    cond = unwrap(cond)
    if not isinstance(cond, tensor) and not cond:
        raise ValueError("gl.assume: the condition is False at compile time")


__all__ += ["add", "sub", "mul", "assume"]
