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

Descriptors come from the host (`gluon.nvidia.hopper.TensorDescriptor`); in the kernel they
are `tensor_descriptor` values whose type fixes the block shape, dtype and layout (the global
shape and strides are in the descriptor's bytes only). `async_atomic_add` and its siblings
(newer Gluon's names for `cp.reduce.async.bulk.tensor`) are in `_tma_reduce.py`. A kernel
can also write a descriptor itself: `tma.make_tensor_descriptor(base, shape, strides,
block_shape, layout)` (_tma_descriptor.py). Semantics and PTX:
`shared_codegen/ops/tma/definition.py`.
"""

from __future__ import annotations

from gluon.language._newer_names import async_load, async_store  # noqa: F401 (3.7 names)
from gluon.language._smem import _checked
from gluon.language.nvidia.hopper._tma_reduce import (  # noqa: F401 (re-exported)
    async_atomic_add, async_atomic_and, async_atomic_max, async_atomic_min, async_atomic_or,
    async_atomic_xor)
from gluon.language.nvidia.hopper._common import i32_arg, int_arg, pred_arg, smem_arg
from gluon.language.nvidia.hopper._tma_descriptor import make_tensor_descriptor
from gluon.language.nvidia.hopper.mbarrier import _barrier
from shared_codegen.frontend.descriptors import tensor_descriptor
from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import TensorDescriptorType
from shared_codegen.layouts import NVMMASharedLayout  # noqa: F401 (upstream's namespace)
from shared_codegen.ops.tma.definition import (AsyncTMACopyGlobalToLocalOp,
                                               AsyncTMACopyLocalToGlobalOp, AsyncTMAStoreWaitOp,
                                               check_smem)
from shared_codegen.ops.tma.prefetch import AsyncTMAPrefetchOp

__all__ = ["async_copy_global_to_shared", "async_copy_shared_to_global", "store_wait",
           "async_prefetch",
           "tensor_descriptor", "tensor_descriptor_type", "make_tensor_descriptor",
           "async_load", "async_store", "async_atomic_add", "async_atomic_min",
           "async_atomic_max", "async_atomic_and", "async_atomic_or", "async_atomic_xor"]

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


def _check(desc, smem, name, what, whole_boxes=False):
    try:
        check_smem(desc.type, smem.type, what, whole_boxes)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


@builtin
def async_copy_global_to_shared(tensor_desc, coord, barrier, result, pred=True,
                                _semantic=None):
    """Start copying the block at `coord` into `result`; when it lands it completes its byte
    count on `barrier` (pair it with `mbarrier.expect(barrier, nbytes)`). Elements outside
    the tensor are zero."""
    load(tensor_desc, coord, barrier, result, pred, False, _semantic,
         "tma.async_copy_global_to_shared")


def load(tensor_desc, coord, barrier, result, pred, multicast, semantic, name):
    """The TMA load both spellings make; `multicast` (Triton 3.7's `async_load`) splits the
    block among the cluster's CTAs, each loading its slice for all (ops/tma/multicast.py)."""
    from gluon.language._core import cluster_size
    from shared_codegen.frontend.values import unwrap
    from shared_codegen.ops.tma.multicast import check_multicast

    desc = _desc(tensor_desc, name)
    smem = smem_arg(result, name, "result")
    bar = _barrier(barrier, name)
    _check(desc, smem, name, "result")
    multicast = unwrap(multicast)
    if not isinstance(multicast, bool):
        raise TypeError(f"{name}: multicast must be a compile-time bool, got {multicast!r}")
    if multicast:
        try:
            check_multicast(desc.type, smem.type, cluster_size(semantic))
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    coords = _coords(coord, desc, semantic, name)
    _checked(AsyncTMACopyGlobalToLocalOp.build(semantic.builder, desc.handle, coords,
                                               bar.handle, smem.handle,
                                               pred_arg(pred, semantic, name), multicast))


@builtin
def async_copy_shared_to_global(tensor_desc, coord, src, _semantic=None):
    """Start copying `src` to the block at `coord` (clipped where it runs past the tensor's
    end; every coordinate must be >= 0: on the H100 a store that starts before 0 is an
    illegal instruction, and the interpreter reports it). `src` must not be overwritten
    before `store_wait` retires the copy; write it with `fence_async_shared()` between the
    stores and this call."""
    name = "tma.async_copy_shared_to_global"
    desc = _desc(tensor_desc, name)
    smem = smem_arg(src, name, "src")
    _check(desc, smem, name, "src", whole_boxes=True)
    coords = _coords(coord, desc, _semantic, name)
    _checked(AsyncTMACopyLocalToGlobalOp.build(_semantic.builder, desc.handle, coords,
                                               smem.handle))


@builtin
def async_prefetch(tensor_desc, coord, pred=True, _semantic=None):
    """Ask the TMA unit to bring the block at `coord` into L2 (`cp.async.bulk.prefetch.tensor`),
    so that a later `async_copy_global_to_shared` of it waits for L2 instead of DRAM. A hint:
    nothing to wait for, nothing written (JAX Mosaic GPU's `async_prefetch`)."""
    name = "tma.async_prefetch"
    desc = _desc(tensor_desc, name)
    coords = _coords(coord, desc, _semantic, name)
    _checked(AsyncTMAPrefetchOp.build(_semantic.builder, desc.handle, coords,
                                      pred_arg(pred, _semantic, name)))


@builtin
def store_wait(pendings, read_only=True, _semantic=None):
    """Wait until at most `pendings` TMA stores still read their shared memory; with
    `read_only=False` (Triton 3.8), until their writes to global memory are done too."""
    n = int_arg(pendings, "tma.store_wait", "pendings")
    _checked(AsyncTMAStoreWaitOp.build(_semantic.builder, n, bool(read_only)))
