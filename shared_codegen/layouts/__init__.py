"""Layouts over GF(2): the ``LinearLayout`` core and every layout family (the IR's vocabulary:
every distributed tensor type carries one).

Every family (``BlockedLayout``, ``NVMMASharedLayout``, ...) is a frozen dataclass with Gluon
3.6's constructor; ``to_linear_layout(layout, shape)`` gives its ``LinearLayout``, basis for
basis what Triton 3.6 gives.
"""

from shared_codegen.layouts.distributed import (BlockedLayout, DistributedLayout,
                                                DistributedLinearLayout, DotOperandLayout,
                                                NVMMADistributedLayout, SliceLayout,
                                                default_blocked_layout)
from shared_codegen.layouts.linear_layout import LinearLayout
from shared_codegen.layouts.shared import (NVMMASharedLayout, PaddedSharedLayout, SharedLayout,
                                           SharedLinearLayout,
                                           SwizzledSharedLayout, TensorMemoryLayout,
                                           TensorMemoryScalesLayout)
from shared_codegen.layouts.tmem import get_tmem_reg_layout

__all__ = [
    "LinearLayout",
    "DistributedLayout",
    "BlockedLayout",
    "SliceLayout",
    "DistributedLinearLayout",
    "NVMMADistributedLayout",
    "DotOperandLayout",
    "SharedLayout",
    "NVMMASharedLayout",
    "SwizzledSharedLayout",
    "SharedLinearLayout",
    "PaddedSharedLayout",
    "TensorMemoryLayout",
    "TensorMemoryScalesLayout",
    "get_tmem_reg_layout",
    "default_blocked_layout",
    "to_linear_layout",
    "layout_equivalent",
]


def to_linear_layout(layout, shape) -> LinearLayout:
    """The ``LinearLayout`` of ``layout`` for a tensor of ``shape``: in dims ``register, lane,
    warp, block`` (distributed), ``offset, block`` (shared) or ``row, col`` (tensor memory);
    out dims ``dim0..``."""
    if isinstance(layout, LinearLayout):
        return layout
    convert = getattr(layout, "to_linear_layout", None)
    if convert is None:
        raise ValueError(f"to_linear_layout: expected a layout, got {layout!r}")
    return convert(list(shape) if shape is not None else None)


def layout_equivalent(a, b, shape) -> bool:
    """Whether two layouts place every element of a ``shape`` tensor identically."""
    return to_linear_layout(a, shape) == to_linear_layout(b, shape)
