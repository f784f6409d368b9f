"""`tma.make_tensor_descriptor` (Gluon 3.6): a TMA descriptor the kernel writes itself.

    desc = tma.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                      block_shape=[128, 64], layout=NVMMA_SHARED)
    tma.async_copy_global_to_shared(desc, [m, k], bar, smem)

The map is built in this program's slice of the launch's global scratch (the allocator of
`set_allocator`, as in Triton) with `tensormap.replace`, and fenced for the TMA unit before use:
the same ops as the tile DSL's `tl.make_tensor_descriptor` on sm_90a
(`shared_codegen/ops/tma/tensormap.py`), so a tile kernel converted to Gluon compiles to the
same code. It needs an architecture- or family-specific target from sm_90 (`sm_90a`,
`sm_100a`, ...), where `tensormap.replace` exists; the CPU interpreter runs it too.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin
from shared_codegen.ir.types import TensorDescriptorType, int32, int64
from shared_codegen.layouts import NVMMASharedLayout
from shared_codegen.ops.tma.definition import check_block
from shared_codegen.ops.tma.tensormap import build_tensor_map
from tile.language import _block_access as B
from tile.language._descriptors import check_descriptor_args, compile_target

MAX_RANK = 5


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, layout, padding_option="zero",
                           _semantic=None):
    """A descriptor of the tensor at `base` (global `shape` and `strides` in elements, the
    last stride 1) whose TMA copies move `block_shape` blocks placed in shared memory by
    `layout` (an NVMMASharedLayout); out-of-bounds elements load as zero, or NaN with
    `padding_option="nan"`."""
    fn = "tma.make_tensor_descriptor"
    sem = _semantic
    block = check_descriptor_args(fn, base, shape, strides, block_shape, MAX_RANK)
    element = base.dtype.element
    layout = getattr(layout, "value", layout)
    if not isinstance(layout, NVMMASharedLayout):
        raise TypeError(f"{fn}: layout must be a gl.NVMMASharedLayout, got {layout!r}")
    try:
        check_block(block, element, layout)
    except ValueError as exc:
        raise ValueError(f"{fn}: {exc}") from None
    padding = B.check_padding(padding_option, element, fn) or "zero"
    _check_target(sem, fn)
    shape = B.scalars(sem, shape, int32, fn, "shape")
    strides = B.scalars(sem, strides, int64, fn, "strides")
    itemsize = sem.to_tensor(element.itemsize, int64)
    byte_strides = [sem.binary("mul", s, itemsize).handle for s in strides[:-1]]
    ty = TensorDescriptorType(tuple(block), element, layout)
    return sem.make_tensor(build_tensor_map(sem.builder, base.handle, [d.handle for d in shape],
                                            byte_strides, ty, padding))


def _check_target(sem, fn: str) -> None:
    from shared_codegen.lowering.backend import parse_target

    target = compile_target(sem)
    if target == "interpreter":
        return
    arch, suffix = parse_target(target)
    if arch < 90 or suffix not in ("a", "f"):
        raise ValueError(f"{fn}: a kernel writes tensor maps with tensormap.replace, which "
                         f"needs an architecture- or family-specific target from sm_90 "
                         f"(sm_90a, sm_100a, ...), not {target}")
