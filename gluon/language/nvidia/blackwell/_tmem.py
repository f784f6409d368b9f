"""Gluon's tensor memory: `allocate_tensor_memory` and `tensor_memory_descriptor`, with the
names and arguments of `triton.experimental.gluon.language.nvidia.blackwell` 3.6.

    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(128, N), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [128, N], tmem_layout)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, N], tmem_layout, gl.num_warps())
    x = acc.load(reg)

The ops are in `shared_codegen/ops/tensor_memory/`; the columns are planned by the
`tensor_memory_allocation` stage.
"""

from __future__ import annotations

from gluon.language._smem import _checked, memory_descriptor
from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.frontend.values import VALUE_CLASSES, builtin, tensor, unwrap
from shared_codegen.ir.types import ScalarType, TensorMemoryType, TensorType, int32
from shared_codegen.layouts import TensorMemoryLayout, TensorMemoryScalesLayout
from shared_codegen.layouts.tmem import get_tmem_reg_layout as _get_tmem_reg_layout
from shared_codegen.ops.tensor_memory.definition import (TmemAllocOp, TmemIndexOp, TmemLoadOp,
                                                         TmemReinterpretOp, TmemStoreOp,
                                                         TmemSubsliceOp)

__all__ = ["allocate_tensor_memory", "tensor_memory_descriptor",
           "tensor_memory_descriptor_type", "get_tmem_reg_layout"]


@constexpr_function
def get_tmem_reg_layout(element_ty, shape, layout, num_warps, instr_variant="32x32b",
                        cga_layout=()):
    """The register layout `tcgen05.ld/st` with `instr_variant` moves a `shape` tensor of
    `element_ty` held in tensor memory with `layout` (see `shared_codegen.layouts.tmem`)."""
    return _get_tmem_reg_layout(unwrap(element_ty), [unwrap(s) for s in unwrap(shape)],
                                unwrap(layout), unwrap(num_warps), unwrap(instr_variant),
                                unwrap(cga_layout))


@constexpr_function
def tensor_memory_descriptor_type(element_ty, shape, layout, alloc_shape):
    """Gluon's constructor order for the IR's descriptor type (`desc.type`)."""
    return TensorMemoryType(tuple(shape), unwrap(element_ty), unwrap(layout), tuple(alloc_shape))


class tensor_memory_descriptor(memory_descriptor):
    """A handle to (a view of) a tensor-memory allocation (a `TensorMemoryType`)."""

    @builtin
    def get_reg_layout(self, num_warps=None, instr_variant="32x32b", _semantic=None):
        """The register layout `load` / `store` move this view with (one tcgen05.ld/st
        `instr_variant` atom per warp, no data exchange)."""
        warps = _semantic.num_warps if num_warps is None else unwrap(num_warps)
        return _get_tmem_reg_layout(self.dtype, self.shape, self.layout, warps,
                                    unwrap(instr_variant))

    @builtin
    def load(self, layout=None, _semantic=None) -> tensor:
        """The view's elements as a register tensor in `layout` (tcgen05.ld); by default the
        32x32b layout of `get_reg_layout()`."""
        layout = unwrap(layout)
        if layout is None:
            layout = _get_tmem_reg_layout(self.dtype, self.shape, self.layout,
                                          _semantic.num_warps, "32x32b")
        op = TmemLoadOp.build(_semantic.builder, self.handle, layout).owner
        return tensor(_checked(op).result, op.result.type)

    @builtin
    def store(self, value, pred=True, _semantic=None) -> None:
        """Write a register tensor of the view's shape and dtype into it (tcgen05.st)."""
        if not isinstance(value, tensor) or not isinstance(value.type, TensorType):
            raise TypeError(f"expected 'value' to be a tensor, but got a {type(value).__name__}")
        from gluon.language.nvidia.hopper._common import pred_arg
        p = pred_arg(pred, _semantic, "tensor_memory_descriptor.store")
        _checked(TmemStoreOp.build(_semantic.builder, self.handle, value.handle, p))

    @builtin
    def slice(self, start, length, _semantic=None) -> "tensor_memory_descriptor":
        """Columns [start, start + length) of N (a power-of-two length, start a multiple)."""
        start, length = unwrap(start), unwrap(length)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (start, length)):
            raise TypeError(f"slice takes compile-time ints, got {start!r}, {length!r}")
        handle = TmemSubsliceOp.build(_semantic.builder, self.handle, start, length)
        return tensor_memory_descriptor(_checked(handle.owner).result)

    @builtin
    def index(self, index, _semantic=None) -> "tensor_memory_descriptor":
        """Buffer `index` of a [buffers, M, N] view; `index` may be a runtime int32."""
        index = _semantic.to_tensor(index)
        if index.type != int32:
            raise TypeError(f"expected 'index' to be int32 but got {index.type}")
        handle = TmemIndexOp.build(_semantic.builder, self.handle, index.handle)
        return tensor_memory_descriptor(_checked(handle.owner).result)

    @builtin
    def _reinterpret(self, dtype, shape, layout, _semantic=None) -> "tensor_memory_descriptor":
        """The same tensor memory (from the view's first column) as another dtype, shape and
        layout: FlashAttention writes P (fp16) over S (fp32) this way."""
        ty = TensorMemoryType(tuple(unwrap(s) for s in unwrap(shape)), unwrap(dtype),
                              unwrap(layout), tuple(unwrap(s) for s in unwrap(shape)))
        handle = TmemReinterpretOp.build(_semantic.builder, self.handle, ty)
        return tensor_memory_descriptor(_checked(handle.owner).result)


@builtin
def allocate_tensor_memory(element_ty, shape, layout, value=None, _semantic=None):
    """A tensor-memory allocation of `shape` ([M, N] or [buffers, M, N]) placed by the
    `TensorMemoryLayout` `layout` (or MX scale factors, [M, K // VEC] 8-bit, placed by a
    `TensorMemoryScalesLayout`), filled from the register tensor `value` if given."""
    element_ty, layout = unwrap(element_ty), unwrap(layout)
    shape = [unwrap(s) for s in unwrap(shape)]
    if not isinstance(element_ty, ScalarType):
        raise TypeError(f"expected 'element_ty' to be a dtype but got {element_ty!r}")
    if not isinstance(layout, (TensorMemoryLayout, TensorMemoryScalesLayout)):
        raise TypeError(f"expected 'layout' to be a TensorMemoryLayout or a "
                        f"TensorMemoryScalesLayout but got {layout!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"all elements of 'shape' must be integers but got {shape}")
    ty = TensorMemoryType(tuple(shape), element_ty, layout, tuple(shape))
    init = None
    if value is not None:
        if not isinstance(value, tensor) or not isinstance(value.type, TensorType):
            raise TypeError(f"expected 'value' to be a tensor, got {value!r}")
        init = value.handle
    handle = TmemAllocOp.build(_semantic.builder, ty, init)
    return tensor_memory_descriptor(_checked(handle.owner).result)


# Tensor-memory values rebuilt by the code generator (loop-carried, branch results, aggregate
# fields inside loops) come back as descriptors, with their methods.
VALUE_CLASSES[TensorMemoryType] = tensor_memory_descriptor
