"""Layouts as kernels see them (`gl.BlockedLayout`, `gl.SliceLayout`, ..., `gl.AutoLayout`).

The families are `gluon.layouts`' own classes, re-exported so `gl.BlockedLayout is
gluon.layouts.BlockedLayout`. This module adds what only the language needs:

- `AutoLayout()`: a placeholder for "not chosen yet". Tensors built without a layout
  (`gl.arange(0, 128)`) carry it; `gluon/passes.py` replaces it by propagating the layouts
  of the tensors it meets, and rejects a kernel where none reaches it.
- `check_layout`: whether a layout can describe a tensor of a given shape on a kernel with a
  given number of warps. The semantic layer calls it wherever a user hands in a layout, and
  the verify pass calls it on every tensor, so the interpreter and the compiler reject the
  same kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared_codegen.layouts import (BlockedLayout, DistributedLayout, DistributedLinearLayout,
                                    DotOperandLayout, LinearLayout, NVMMADistributedLayout,
                                    NVMMASharedLayout, PaddedSharedLayout, SharedLayout,
                                    SharedLinearLayout,
                                    SliceLayout, SwizzledSharedLayout, TensorMemoryLayout,
                                    TensorMemoryScalesLayout, default_blocked_layout,
                                    get_tmem_reg_layout)
from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.layouts import to_linear_layout as _to_linear_layout

WARP_SIZE = 32

# Kernels compute default shared layouts at compile time (`gl.constexpr = ...get_default_for`).
constexpr_function(NVMMASharedLayout.get_default_for)
constexpr_function(PaddedSharedLayout.with_identity_for)


@dataclass(frozen=True)
class AutoLayout(DistributedLayout):
    """A layout left to the compiler: resolved from the layouts of connected tensors."""

    alias_prefix = "auto"
    placeholder = True  # verifiers skip layout relations until resolution

    def __repr__(self):
        return "AutoLayout()"

    @property
    def rank(self):
        raise ValueError("AutoLayout has no rank")

    def to_linear_layout(self, shape):
        raise ValueError("AutoLayout has no linear form until the compiler resolves it; give "
                         "the tensor a layout (or gl.set_auto_layout) to inspect it")


@dataclass(frozen=True)
class CoalescedLayout(AutoLayout):
    """Triton 3.6's `CoalescedLayout()`: an AutoLayout whose choice starts at the global
    memory accesses it reaches. The pointers of a load, store or atomic with this layout get
    the coalesced layout Triton's Coalesce pass picks (`tile/passes/coalesce.py`: vectors
    as wide as the axis analysis allows, lanes along the most contiguous dim), which then
    propagates to the connected tensors like an AutoLayout's."""

    alias_prefix = "coalesced"

    def __repr__(self):
        return "CoalescedLayout()"

    @property
    def rank(self):
        raise ValueError("CoalescedLayout has no rank")


def is_auto(layout) -> bool:
    return isinstance(layout, AutoLayout)


def linear_form(layout, shape) -> str:
    """The printed LinearLayout of `layout` over `shape` (Triton's text), or why there is
    none; used in error messages so users see *why* two layouts differ."""
    try:
        text = str(_to_linear_layout(layout, list(shape)))
    except (ValueError, TypeError) as exc:
        return f"(no linear form: {exc})"
    return text.strip("\n")


def layout_difference(a, b) -> str:
    """What tells two layouts apart when their reprs read the same (a hidden field, a field of
    another type, or another class of the same name): "field: a vs b" for each differing
    dataclass field, recursing into nested layouts; "" when nothing can be named."""
    if type(a) is not type(b):
        return f"class {type(a).__module__}.{type(a).__qualname__} vs " \
               f"{type(b).__module__}.{type(b).__qualname__}"
    if not hasattr(a, "__dataclass_fields__"):
        return "" if a == b else f"{a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"
    parts = []
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if x == y and type(x) is type(y):
            continue
        inner = layout_difference(x, y) if hasattr(x, "__dataclass_fields__") else ""
        parts.append(f"{name}: {inner}" if inner else f"{name}: {x!r} ({type(x).__name__}) vs "
                                                       f"{y!r} ({type(y).__name__})")
    return "; ".join(parts)


def linear_layout_of(layout, shape):
    """`gl.to_linear_layout`'s value, typed as in Gluon 3.6: a `DistributedLinearLayout` for a
    register layout and a `SharedLinearLayout` for a shared one, so it can be handed to
    `gl.arange(..., layout=...)`, `gl.SliceLayout` or `allocate_shared_memory` like any other
    layout; `.to_linear_layout()` gives its bit matrix."""
    if isinstance(layout, DistributedLinearLayout):
        return layout
    ll = _to_linear_layout(layout, list(shape))
    if isinstance(layout, DistributedLayout):
        return DistributedLinearLayout.from_linear_layout(ll)
    if isinstance(layout, SharedLinearLayout):
        return layout
    ll = ll.transpose_outs([f"dim{i}" for i in range(len(shape))])
    # Swizzled NVMMA tiles repeat every 1024 bytes: the allocation must keep that alignment.
    swizzled = isinstance(layout, NVMMASharedLayout) and layout.swizzle_byte_width
    return SharedLinearLayout(ll.bases.get("offset", []), ll.bases.get("block", []),
                              1024 if swizzled else 16)


def check_layout(layout, shape, num_warps=None, what="tensor") -> None:
    """Raise (ValueError / TypeError) unless `layout` is a distributed layout whose linear
    form covers exactly `shape` with 32-thread warps and `num_warps` warps."""
    if is_auto(layout):
        return
    if not isinstance(layout, DistributedLayout):
        raise TypeError(f"{what}: expected a distributed layout (gl.BlockedLayout, "
                        f"gl.SliceLayout, ...), got {layout!r}")
    shape = [int(s) for s in shape]
    if layout.rank != len(shape):
        raise ValueError(f"{what}: layout {layout!r} has rank {layout.rank} but the tensor "
                         f"has shape {shape} (rank {len(shape)})")
    try:
        ll = _to_linear_layout(layout, shape)
    except ValueError as exc:
        raise ValueError(f"{what}: layout {layout!r} cannot describe a tensor of shape "
                         f"{shape}: {exc}") from None
    covered = [ll.out_dim_size(f"dim{i}") for i in range(len(shape))]
    if covered != shape:
        raise ValueError(f"{what}: layout {layout!r} covers shape {covered}, not the tensor's "
                         f"shape {shape}")
    check_no_cta_split(layout, ll.bases.get("block", []), what)
    lanes = ll.in_dim_size("lane")
    if lanes != WARP_SIZE:
        raise ValueError(f"{what}: layout has {lanes} threads per warp but a warp has "
                         f"{WARP_SIZE} threads\n  layout: {layout!r}")
    warps = ll.in_dim_size("warp")
    if num_warps is not None and warps != num_warps:
        raise ValueError(f"layout has {warps} warps but the kernel runs with "
                         f"num_warps={num_warps}\n  {what} layout: {layout!r}")


def check_no_cta_split(layout, block_bases, what="tensor") -> None:
    """ValueError when `layout` spreads a tensor over several CTAs (a `cga_layout` basis that
    is not zero): every CTA holds whole tensors here (docs/clusters.md), and lowering such a
    layout would leave the other CTAs' parts out."""
    if any(any(basis) for basis in block_bases):
        raise ValueError(f"{what}: layout {layout!r} splits the tensor across the CTAs of a "
                         f"cluster (cga_layout bases {[list(b) for b in block_bases]}), which "
                         f"is not supported: every CTA holds whole tensors here; give each CTA "
                         f"its part with cluster.cta_rank() (docs/clusters.md)")


__all__ = ["AutoLayout", "CoalescedLayout", "BlockedLayout", "SliceLayout", "DistributedLayout",
           "DistributedLinearLayout", "DotOperandLayout", "NVMMADistributedLayout",
           "SharedLayout", "NVMMASharedLayout", "SwizzledSharedLayout", "SharedLinearLayout",
           "PaddedSharedLayout",
           "TensorMemoryLayout", "TensorMemoryScalesLayout", "LinearLayout",
           "default_blocked_layout", "get_tmem_reg_layout", "check_layout", "check_no_cta_split",
           "linear_form",
           "is_auto", "linear_layout_of"]
