"""`tensor_descriptor`: how kernels of both languages see a value of `TensorDescriptorType`
(a descriptor kernel argument, or one the kernel wrote): `block_shape`, `dtype`, `layout`,
`block_type` and `nbytes` from the type, and the global `shape` / `strides` as runtime
scalars (`tt.descriptor_dim`, see `shared_codegen/ops/tma/descriptor_dims.py`). Registered in `VALUE_CLASSES`, so values the
code generator rebuilds (loop-carried, branch results) keep these attributes."""

from __future__ import annotations

from abc import ABCMeta

from shared_codegen.frontend.values import VALUE_CLASSES, tensor
from shared_codegen.ir.types import SharedMemoryType, TensorDescriptorType, int32, int64
from shared_codegen.ops.tma.descriptor_dims import TensorDescriptorDimOp

__all__ = ["tensor_descriptor", "write_tensor_map"]


def write_tensor_map(semantic, base, shape, strides, ty: TensorDescriptorType, padding: str):
    """A CUtensorMap for `ty` over `base` (shape i32 and strides i64 scalars, outermost
    first, in elements) written into this program's global scratch and fenced for the TMA
    unit (`shared_codegen/ops/tma/tensormap.py`): Triton's device-side descriptor on Hopper,
    for `tl.make_tensor_descriptor` and Gluon's `tma.make_tensor_descriptor`. Returns the
    descriptor value."""
    from shared_codegen.layouts import NVMMASharedLayout
    from shared_codegen.ops.shared_memory.definition import LocalAllocOp, LocalDeallocOp
    from shared_codegen.ops.tma.definition import box_shape
    from shared_codegen.ops.tma.tensormap import (ELEM_TYPES, FILL_MODES, SWIZZLE_MODES,
                                                  TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES,
                                                  GlobalScratchAllocOp,
                                                  ReinterpretTensorDescriptorOp,
                                                  TensormapCreateOp,
                                                  TensormapFenceproxyAcquireOp)
    b = semantic.builder
    element = ty.element
    scratch = GlobalScratchAllocOp.build(b, TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN)
    # An unswizzled NVMMA layout: the allocator places it on a 128-byte boundary, which the
    # tensor map's staging copy needs.
    words = TENSOR_MAP_BYTES // 4
    staging = LocalAllocOp.build(b, SharedMemoryType(
        (words,), int32, NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1),
        (words,)))
    itemsize = semantic.to_tensor(element.itemsize, int64)
    strides_bytes = [semantic.binary("mul", s, itemsize) for s in strides[:-1]]
    TensormapCreateOp.build(
        b, scratch, staging, base.handle, [d.handle for d in reversed(shape)],
        [s.handle for s in reversed(strides_bytes)], list(reversed(box_shape(ty))),
        ELEM_TYPES[element.name], SWIZZLE_MODES[ty.layout.swizzle_byte_width],
        FILL_MODES[padding])
    LocalDeallocOp.build(b, staging)
    TensormapFenceproxyAcquireOp.build(b, scratch)
    return semantic.make_tensor(ReinterpretTensorDescriptorOp.build(b, scratch, ty))


def _global_dims(kind):
    def rule(semantic, desc):
        return [semantic.make_tensor(TensorDescriptorDimOp.build(semantic.builder, desc.handle,
                                                                 kind, i))
                for i in range(desc.type.rank)]
    return rule


class tensor_descriptor(tensor, metaclass=ABCMeta):
    """A kernel's tensor descriptor parameter: `block_shape`, `dtype`, `layout`,
    `block_type` (`block_type.nbytes` is what one copy moves), and the global `shape` (i32)
    and `strides` (i64) as runtime scalars (interpreter only for now, see
    `shared_codegen/ops/tma/descriptor_dims.py`).

    A language may `register` its own descriptor values as virtual subclasses, so that
    kernels' `isinstance(x, tl.tensor_descriptor)` (Triton 3.6's tutorial 06) holds for
    descriptors from the host and from `make_tensor_descriptor` alike."""

    semantic_attrs = {"shape": _global_dims("shape"), "strides": _global_dims("stride")}

    @property
    def block_shape(self):
        return list(self.type.block_shape)

    @property
    def dtype(self):
        return self.type.element

    @property
    def layout(self):
        return self.type.layout

    @property
    def block_type(self):
        return self.type.block_type

    @property
    def nbytes(self) -> int:
        return self.type.block_bytes

    def __repr__(self):
        return f"tensor_descriptor({self.type})"


VALUE_CLASSES[TensorDescriptorType] = tensor_descriptor
