"""Gluon's shared memory: `gl.allocate_shared_memory` and `shared_memory_descriptor`, with
`triton.experimental.gluon.language` 3.6's names and arguments.

    smem = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_K], nvmma_layout)
    smem.index(i).store(x)
    y = smem.index(i).permute([1, 0]).load(blocked)

A descriptor is a view of an allocation (`ttg.local_alloc`); views build `ttg.memdesc_*`
ops and never move data. `desc.type` is the IR's `SharedMemoryType` (shape, element,
layout, alloc_shape). Barriers between shared-memory accesses are inserted by the compiler
where threads could race (as Triton's membar pass does); `gl.thread_barrier()` is still
accepted.
"""

from __future__ import annotations

from shared_codegen.frontend.values import VALUE_CLASSES, builtin, tensor, unwrap
from shared_codegen.ir.core import VerificationError
from shared_codegen.ir.types import ScalarType, SharedMemoryType, TensorType, int32
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, LocalDeallocOp, LocalLoadOp,
                                                         LocalStoreOp, MemDescIndexOp,
                                                         MemDescReinterpretOp, MemDescReshapeOp,
                                                         MemDescSubsliceOp, MemDescTransOp,
                                                         is_shared_layout)

__all__ = ["allocate_shared_memory", "shared_memory_descriptor",
           "shared_memory_descriptor_type"]


def shared_memory_descriptor_type(element_ty, shape, layout, alloc_shape) -> SharedMemoryType:
    """Gluon's constructor order for the IR's descriptor type (`desc.type`)."""
    return SharedMemoryType(tuple(shape), unwrap(element_ty), unwrap(layout), tuple(alloc_shape))


def _checked(op):
    """Verify a freshly built op now, so a mistake is reported at the user's line (the code
    generator turns a ValueError into a CompilationError that shows it)."""
    try:
        op.opdef.verify(op)
    except VerificationError as exc:
        message = str(exc)
        prefix = f"{op.loc}: {op.name}: "
        raise ValueError(message[len(prefix):] if message.startswith(prefix) else message) \
            from None
    return op


def _ints(what, values):
    values = list(values)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TypeError(f"all elements of '{what}' must be integers but got {values}")
    return values


def _check_layout(layout):
    if not is_shared_layout(layout):
        raise TypeError(f"expected 'layout' to be a SharedLayout but got {layout!r}")


def _check_dtype(element_ty):
    if not isinstance(element_ty, ScalarType):
        raise TypeError(f"expected 'element_ty' to be a dtype but got {element_ty!r}")


def _is_auto(layout) -> bool:
    return type(layout).__name__ == "AutoLayout"


class memory_descriptor(tensor):
    """A handle to (a view of) an allocation in shared or tensor memory: `dtype`, `shape`,
    `layout`, `type` (a `MemoryDescriptorType`: shape, element, layout, alloc_shape)."""

    def __init__(self, handle, type=None):
        super().__init__(handle, handle.type if type is None else type)

    @property
    def dtype(self):
        return self.type.element

    @property
    def shape(self):
        return list(self.type.shape)

    @property
    def rank(self) -> int:
        return len(self.type.shape)

    @property
    def numel(self) -> int:
        return self.type.numel

    @property
    def layout(self):
        return self.type.layout

    def __str__(self):
        return str(self.type)

    def __repr__(self):
        return f"{type(self).__name__}({self.type})"


class shared_memory_descriptor(memory_descriptor):
    """A handle to (a view of) a shared-memory allocation (a `SharedMemoryType`)."""

    # ---- data ----------------------------------------------------------------------------
    @builtin
    def load(self, layout, _semantic=None) -> tensor:
        """The view's elements as a register tensor in the distributed `layout`, or in
        `AutoLayout()`, resolved from the tensor's uses (tutorial 11 anchors it with
        `set_auto_layout` after a reshape and permute)."""
        if layout is None or is_shared_layout(layout):
            raise TypeError(f"expected 'layout' to be a DistributedLayout or AutoLayout() but "
                            f"got {layout!r}")
        op = LocalLoadOp.build(_semantic.builder, self.handle, layout).owner
        return tensor(_checked(op).result, op.result.type)

    @builtin
    def store(self, value, _semantic=None) -> None:
        """Write a register tensor of the view's shape and dtype into it."""
        if not isinstance(value, tensor) or not isinstance(value.type, TensorType):
            raise TypeError(f"expected 'value' to be a tensor, but got a {type(value).__name__}")
        if list(value.shape) != self.shape:
            raise ValueError(f"source shape {list(value.shape)} and destination shape "
                             f"{self.shape} must match")
        if value.dtype != self.dtype:
            raise ValueError(f"source dtype {value.dtype!r} and destination dtype "
                             f"{self.dtype!r} must match")
        if _is_auto(value.layout):
            raise ValueError("the stored tensor has AutoLayout(); give it a layout first "
                             "(gl.set_auto_layout or gl.convert_layout)")
        _checked(LocalStoreOp.build(_semantic.builder, value.handle, self.handle))

    # ---- views ---------------------------------------------------------------------------
    @builtin
    def slice(self, start, length, dim=0, _semantic=None) -> "shared_memory_descriptor":
        """The subview [start, start + length) along `dim` (inside the layout: `length` a
        power of two and `start` a multiple of it)."""
        start, length, dim = _ints("slice arguments", [start, length, dim])
        if not -self.rank <= dim < self.rank:
            raise ValueError(f"dim {dim} is out of range for a rank-{self.rank} descriptor")
        dim %= self.rank
        offsets = [0] * self.rank
        offsets[dim] = start
        shape = self.shape
        shape[dim] = length
        op = MemDescSubsliceOp.build(_semantic.builder, self.handle, offsets, shape).owner
        return shared_memory_descriptor(_checked(op).result)

    @builtin
    def index(self, index, _semantic=None) -> "shared_memory_descriptor":
        """The subview `self[index]` (dim 0 dropped); `index` may be a runtime int32."""
        index = _semantic.to_tensor(index)
        if index.type != int32:
            raise TypeError(f"expected 'index' to be int32 but got {index.type}")
        op = MemDescIndexOp.build(_semantic.builder, self.handle, index.handle).owner
        return shared_memory_descriptor(_checked(op).result)

    @builtin
    def permute(self, order, _semantic=None) -> "shared_memory_descriptor":
        """The same elements with dims permuted (result dim i is dim order[i])."""
        order = _ints("order", order)
        if len(order) != self.rank:
            raise ValueError(f"source rank ({self.rank}) and order length ({len(order)}) "
                             "must match")
        op = MemDescTransOp.build(_semantic.builder, self.handle, order).owner
        return shared_memory_descriptor(_checked(op).result)

    @builtin
    def reshape(self, shape, _semantic=None) -> "shared_memory_descriptor":
        """The same elements, row-major, in another shape."""
        shape = _ints("shape", shape)
        n = 1
        for s in shape:
            n *= s
        if n != self.numel:
            raise ValueError(f"memdesc_reshape total elements mismatch: {self.shape} -> "
                             f"{shape}")
        op = MemDescReshapeOp.build(_semantic.builder, self.handle, shape).owner
        return shared_memory_descriptor(_checked(op).result)

    @builtin
    def _reinterpret(self, dtype, shape, layout, _semantic=None) -> "shared_memory_descriptor":
        """The view's bytes as another dtype, shape and shared layout."""
        _check_dtype(dtype)
        _check_layout(layout)
        shape = _ints("shape", shape)
        op = MemDescReinterpretOp.build(_semantic.builder, self.handle, dtype, shape,
                                        layout).owner
        return shared_memory_descriptor(_checked(op).result)

    @builtin
    def _keep_alive(self, _semantic=None) -> None:
        """A last use: the allocation stays live until here (`ttg.local_dealloc`)."""
        _checked(LocalDeallocOp.build(_semantic.builder, self.handle))


@builtin
def allocate_shared_memory(element_ty, shape, layout, value=None,
                           _semantic=None) -> shared_memory_descriptor:
    """A new shared-memory allocation of `shape` elements of `element_ty`, placed by the
    shared `layout`, initialized from the register tensor `value` when given."""
    _check_dtype(element_ty)
    shape = _ints("shape", shape)
    _check_layout(layout)
    init = None
    if value is not None:
        if not isinstance(value, tensor) or not isinstance(value.type, TensorType):
            raise TypeError(f"expected 'value' to be a tensor, but got a {type(value).__name__}")
        if _is_auto(value.layout):
            raise ValueError("the initial value has AutoLayout(); give it a layout first "
                             "(gl.set_auto_layout or gl.convert_layout)")
        init = value.handle
    ty = SharedMemoryType(tuple(shape), element_ty, layout, tuple(shape))
    op = LocalAllocOp.build(_semantic.builder, ty, init).owner
    return shared_memory_descriptor(_checked(op).result)


# Values of descriptor type rebuilt by the code generator (loop-carried, branch results) come
# back as descriptors, with their methods.
VALUE_CLASSES[SharedMemoryType] = shared_memory_descriptor
