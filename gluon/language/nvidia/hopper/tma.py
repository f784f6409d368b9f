"""`gluon.language.nvidia.hopper.tma`: TMA bulk tensor copies (sm_90), with the names and
parameters of `triton.experimental.gluon.language.nvidia.hopper.tma` 3.6.

    @gluon.jit
    def kernel(in_desc, out_desc):
        smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
        ...
        tma.async_copy_global_to_shared(in_desc, [m, n], bar, smem)
        mbarrier.wait(bar, 0)
        ...
        tma.async_copy_shared_to_global(out_desc, [m, n], smem)
        tma.store_wait(0)

Descriptors come from the host (`gluon.nvidia.hopper.TensorDescriptor`) or are built in the
kernel by `make_tensor_descriptor` (a CUtensorMap written into the program's global scratch,
which the launch takes from `tile.set_allocator`'s allocator, as Triton's
`triton.set_allocator`; `shared_codegen/ops/tma/tensormap.py`). In the kernel they are
`tensor_descriptor` values whose type fixes the block shape, dtype and layout, with the
global shape and strides as runtime scalars. Semantics and PTX:
`shared_codegen/ops/tma/definition.py`.
"""

from __future__ import annotations

from gluon.language._newer_names import async_load, async_store  # noqa: F401 (3.7 names)
from gluon.language._smem import _checked
from gluon.language.nvidia.hopper._common import i32_arg, int_arg, pred_arg, smem_arg
from gluon.language.nvidia.hopper.mbarrier import _barrier
from shared_codegen.frontend.descriptors import tensor_descriptor, write_tensor_map
from shared_codegen.frontend.values import builtin, constexpr, tensor
from shared_codegen.ir.types import PointerType, TensorDescriptorType, int32, int64
from shared_codegen.layouts import NVMMASharedLayout  # noqa: F401 (upstream's namespace)
from shared_codegen.ops.tma.definition import (AsyncTMACopyGlobalToLocalOp,
                                               AsyncTMACopyLocalToGlobalOp, AsyncTMAStoreWaitOp,
                                               check_block, check_smem)

__all__ = ["async_copy_global_to_shared", "async_copy_shared_to_global", "store_wait",
           "tensor_descriptor", "tensor_descriptor_type", "make_tensor_descriptor", "async_load",
           "async_store"]

# The type of a descriptor value (`desc.type`): our IR's TensorDescriptorType (block shape,
# dtype, layout, block_type), which Triton 3.6 calls tensor_descriptor_type.
tensor_descriptor_type = TensorDescriptorType


def _desc(value, name):
    if not isinstance(value, tensor) or not isinstance(value.type, TensorDescriptorType):
        raise TypeError(f"{name}: tensor_desc must be a tensor descriptor kernel argument "
                        f"(gluon.nvidia.hopper.TensorDescriptor), got {value!r}")
    return value


def _coords(coord, desc, semantic, name):
    if not isinstance(coord, (list, tuple)):
        raise TypeError(f"{name}: coord must be a list of {desc.type.rank} ints, got {coord!r}")
    if len(coord) != desc.type.rank:
        raise ValueError(f"{name}: the descriptor has rank {desc.type.rank} but coord has "
                         f"{len(coord)} entries")
    return [i32_arg(c, semantic, name, "each coordinate") for c in coord]


def _check(desc, smem, name, what):
    try:
        check_smem(desc.type, smem.type, what)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


@builtin
def async_copy_global_to_shared(tensor_desc, coord, barrier, result, pred=True,
                                _semantic=None):
    """Start copying the block at `coord` into `result`; when it lands it completes its byte
    count on `barrier` (pair it with `mbarrier.expect(barrier, nbytes)`). Elements outside
    the tensor are zero."""
    name = "tma.async_copy_global_to_shared"
    desc = _desc(tensor_desc, name)
    smem = smem_arg(result, name, "result")
    bar = _barrier(barrier, name)
    _check(desc, smem, name, "result")
    coords = _coords(coord, desc, _semantic, name)
    _checked(AsyncTMACopyGlobalToLocalOp.build(_semantic.builder, desc.handle, coords,
                                               bar.handle, smem.handle,
                                               pred_arg(pred, _semantic, name)))


@builtin
def async_copy_shared_to_global(tensor_desc, coord, src, _semantic=None):
    """Start copying `src` to the block at `coord` (clipped to the tensor). `src` must not be
    overwritten before `store_wait` retires the copy; write it with `fence_async_shared()`
    between the stores and this call."""
    name = "tma.async_copy_shared_to_global"
    desc = _desc(tensor_desc, name)
    smem = smem_arg(src, name, "src")
    _check(desc, smem, name, "src")
    coords = _coords(coord, desc, _semantic, name)
    _checked(AsyncTMACopyLocalToGlobalOp.build(_semantic.builder, desc.handle, coords,
                                               smem.handle))


@builtin
def store_wait(pendings, read_only=True, _semantic=None):
    """Wait until at most `pendings` TMA stores still read their shared memory; with
    `read_only=False` (Triton 3.8), until their writes to global memory are done too."""
    n = int_arg(pendings, "tma.store_wait", "pendings")
    _checked(AsyncTMAStoreWaitOp.build(_semantic.builder, n, bool(read_only)))


def _unwrap(x):
    return x.value if isinstance(x, constexpr) else x


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, layout, padding_option="zero",
                           _semantic=None):
    """A TMA descriptor over `base` built in the kernel (Triton 3.6's
    `tma.make_tensor_descriptor`): `shape` and `strides` in elements (runtime or constant;
    the last stride must be 1), `block_shape` the block one copy moves, `layout` its
    `NVMMASharedLayout`, `padding_option` "zero" or "nan" for out-of-bounds loads. Needs an
    sm_90a-style target (`tensormap.replace`) and `tile.set_allocator` for the global scratch
    the map lives in, as in Triton."""
    from tile.language import _block_access as B

    name = "tma.make_tensor_descriptor"
    shape, strides = _unwrap(shape), _unwrap(strides)
    block = [_unwrap(b) for b in _unwrap(block_shape)]
    layout, padding = _unwrap(layout), _unwrap(padding_option)
    ndim = len(shape)
    if not 1 <= ndim <= 5:
        raise ValueError(f"{name}: expected 1 <= ndim <= 5 but got {ndim} dimensions")
    if len(strides) != ndim:
        raise ValueError(f"{name}: expected {ndim} strides but got {len(strides)}")
    if len(block) != ndim:
        raise ValueError(f"{name}: expected block_shape to have {ndim} dimensions but got "
                         f"{len(block)}")
    if not isinstance(base, tensor) or base.is_block() or \
            not isinstance(base.type, PointerType):
        raise TypeError(f"{name}: base must be a pointer, got {base!r}")
    element = base.type.element
    if block[-1] * element.itemsize < 16:
        raise ValueError(f"{name}: descriptor block shape must have at least 16 bytes in the "
                         f"last dimension, but got {block[-1]} * {element.itemsize} = "
                         f"{block[-1] * element.itemsize} bytes")
    last = _unwrap(strides[-1])
    if isinstance(last, int) and last != 1:
        raise ValueError(f"{name}: tensor descriptor last dim must be 1 but got {last}")
    try:
        check_block(block, element, layout)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    padding = B.check_padding(padding, element, name) or "zero"
    target = _semantic.builder.module.attrs.get("target") or "interpreter"
    if target != "interpreter":
        from shared_codegen.lowering.backend import parse_target
        arch, suffix = parse_target(target)
        if arch < 90 or suffix not in ("a", "f"):
            raise ValueError(f"{name}: descriptors built in the kernel need an sm_90a-style "
                             f"target (tensormap.replace), not {target}")
    shape = B.scalars(_semantic, list(shape), int32, name, "shape")
    strides = B.scalars(_semantic, list(strides), int64, name, "strides")
    ty = TensorDescriptorType(tuple(block), element, layout)
    return write_tensor_map(_semantic, base, shape, strides, ty, padding)
