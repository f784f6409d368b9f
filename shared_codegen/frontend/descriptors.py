"""`tensor_descriptor`: how kernels of both languages see a value of `TensorDescriptorType`
(a descriptor kernel argument, or one the kernel wrote): `block_shape`, `dtype`, `layout`,
`block_type` and `nbytes` from the type, and the global `shape` / `strides` as runtime
scalars (`tt.descriptor_dim`, see `shared_codegen/ops/tma/descriptor_dims.py`). Registered in `VALUE_CLASSES`, so values the
code generator rebuilds (loop-carried, branch results) keep these attributes."""

from __future__ import annotations

from abc import ABCMeta

from shared_codegen.frontend.values import VALUE_CLASSES, tensor
from shared_codegen.ir.types import TensorDescriptorType
from shared_codegen.ops.tma.descriptor_dims import TensorDescriptorDimOp

__all__ = ["tensor_descriptor"]


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
