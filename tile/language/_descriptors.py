"""Tensor descriptors in the tile DSL, with Triton 3.6's names and semantics:

    desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1],
                                     block_shape=[BM, BN], padding_option="zero")
    tile = desc.load([m, n])            # [BM, BN]; outside the tensor: 0 (or NaN)
    desc.store([m, n], tile)            # clipped past the end; m, n >= 0 (the GPU traps)
    desc.atomic_add([m, n], tile)       # and atomic_min/max/and/or/xor

Two kinds of descriptor reach these methods:

- Built in the kernel (`tl.make_tensor_descriptor`): a frontend aggregate holding the base
  pointer, the shape (i32) and strides (i64) scalars. On sm_90a and other architecture- or
  family-specific targets from sm_90 (tensormap.replace needs them) it also holds a TMA
  descriptor the kernel writes into its global scratch (Triton's Hopper lowering,
  `shared_codegen/ops/tma/tensormap.py`; the launch gets the scratch from
  `tile.set_allocator`'s allocator), and loads, stores and the atomics TMA can reduce use it
  as below. Elsewhere (sm_80, the CPU interpreter), and for other atomics, accesses are
  address arithmetic with a bounds mask on every dim (`_block_access.py`), which means the
  same.
- Passed from the host (`tile.tools.tensor_descriptor.TensorDescriptor`): a kernel parameter
  of `TensorDescriptorType`, a CUtensorMap on the GPU. `load` is a TMA copy into a
  shared-memory buffer of the descriptor's NVMMA layout, completed on an mbarrier, then a
  `local_load` (whose register layout the layout passes pick); `store` is a `local_alloc` of
  the value, `fence.proxy.async`, a TMA store and `store_wait(0)`. Each access owns its buffer
  and barrier, so a software pipeliner can later ring-buffer them without changing meaning.
  `atomic_<op>` is a TMA reduction (`cp.reduce.async.bulk.tensor`) with Triton's dtype
  rules. The CPU interpreter runs the same TMA ops. TMA needs sm_90 or newer.
"""

from __future__ import annotations

from typing import List

from shared_codegen.frontend.aggregates import aggregate
from shared_codegen.frontend.descriptors import tensor_descriptor as descriptor_value
from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import SharedMemoryType, TensorDescriptorType, int32, int64
from shared_codegen.ops.fence.definition import FenceAsyncSharedOp
from shared_codegen.ops.mbarrier.definition import (BarrierExpectOp, InitBarrierOp,
                                                    InvalBarrierOp, MBarrierLayout,
                                                    WaitBarrierOp)
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, LocalDeallocOp,
                                                         LocalLoadOp)
from shared_codegen.layouts import NVMMASharedLayout
from shared_codegen.ops.tma.descriptor_dims import TensorDescriptorDimOp
from shared_codegen.ops.tma.definition import (REDUCE_KINDS, AsyncTMACopyGlobalToLocalOp,
                                               AsyncTMACopyLocalToGlobalOp, AsyncTMAReduceOp,
                                               AsyncTMAStoreWaitOp, box_shape, check_block)
from shared_codegen.ops.tma.tensormap import build_tensor_map
from tile.language import _block_access as B
from tile.language import _types as T

__all__ = ["tensor_descriptor", "device_tensor_descriptor", "make_tensor_descriptor",
           "is_host_descriptor", "host_descriptor_method", "DESCRIPTOR_METHODS"]

_ATOMICS = ("add", "min", "max", "and", "or", "xor")
DESCRIPTOR_METHODS = ("load", "store") + tuple(f"atomic_{op}" for op in _ATOMICS)


def _offsets(sem, offsets, rank: int, fn: str) -> List[tensor]:
    if not isinstance(offsets, (list, tuple)) or len(offsets) != rank:
        raise ValueError(f"{fn}: `offsets` must have {rank} entries (the descriptor's rank), "
                         f"got {offsets!r}")
    return B.scalars(sem, offsets, int32, fn, "offsets")


def _atomic_method(op: str):
    def method(self, offsets, value, _semantic=None):
        fn = f"desc.atomic_{op}"
        offs = _offsets(_semantic, offsets, self.rank, fn)
        value = B.block_value(_semantic, value, self.block_shape, self.dtype, fn)
        if self.tma is not None and self.dtype.name in REDUCE_KINDS[op]:
            return _tma_reduce(_semantic, op, self.tma, offs, value)
        addrs, inside = self._addresses(_semantic, offs)
        _semantic.atomic_rmw(op, addrs, value, inside, "relaxed", "gpu")

    method.__name__ = f"atomic_{op}"
    method.__doc__ = (f"Atomically {op} `value` into the block at `offsets` (elements outside "
                      f"the tensor are skipped).")
    return builtin(method)


@aggregate
class device_tensor_descriptor:
    """`tl.make_tensor_descriptor(...)`'s value. Runtime fields: `base`, `shape_<d>`,
    `stride_<d>`; compile-time: `block_shape`, `padding`."""

    def __init__(self, base, shape, strides, block_shape, padding, tma=None):
        self.base = base
        for d, (s, st) in enumerate(zip(shape, strides)):
            setattr(self, f"shape_{d}", s)
            setattr(self, f"stride_{d}", st)
        self.block_shape = list(block_shape)
        self.padding = padding
        # On sm_90+: the TMA descriptor the kernel wrote (a `TensorDescriptorType` value);
        # loads, stores and the atomics TMA can reduce go through it, other atomics through
        # addresses.
        self.tma = tma

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @property
    def shape(self) -> List[tensor]:
        return [getattr(self, f"shape_{d}") for d in range(self.rank)]

    @property
    def strides(self) -> List[tensor]:
        return [getattr(self, f"stride_{d}") for d in range(self.rank)]

    @property
    def dtype(self):
        return self.base.dtype.element

    @property
    def block_type(self):
        return TensorDescriptorType(tuple(self.block_shape), self.dtype, None).block_type

    def _addresses(self, sem, offsets):
        return B.block_addresses(sem, self.base, self.shape, self.strides, offsets,
                                 self.block_shape, range(self.rank))

    @builtin
    def load(self, offsets, _semantic=None):
        """The block at `offsets`; elements outside the tensor read as zero (NaN with
        padding_option="nan")."""
        offs = _offsets(_semantic, offsets, self.rank, "desc.load")
        if self.tma is not None:
            return _tma_load(_semantic, self.tma, offs)
        addrs, inside = self._addresses(_semantic, offs)
        return _semantic.load(addrs, inside, B.padding_value(_semantic, self.padding,
                                                             self.dtype))

    @builtin
    def store(self, offsets, value, _semantic=None):
        """Store `value` (the block's shape, or a scalar) at `offsets`, clipped to the
        tensor."""
        offs = _offsets(_semantic, offsets, self.rank, "desc.store")
        value = B.block_value(_semantic, value, self.block_shape, self.dtype, "desc.store")
        if self.tma is not None:
            return _tma_store(_semantic, self.tma, offs, value)
        addrs, inside = self._addresses(_semantic, offs)
        _semantic.store(addrs, value, inside)

    atomic_add = _atomic_method("add")
    atomic_min = _atomic_method("min")
    atomic_max = _atomic_method("max")
    atomic_and = _atomic_method("and")
    atomic_or = _atomic_method("or")
    atomic_xor = _atomic_method("xor")

    def __repr__(self):
        return f"device_tensor_descriptor(<{self.block_shape} x {T.type_name(self.dtype)}>)"


# `tl.tensor_descriptor`: the type of every descriptor a tile kernel holds (Triton 3.6's
# `tl.tensor_descriptor`), host arguments and `make_tensor_descriptor`'s values alike.
tensor_descriptor = descriptor_value
tensor_descriptor.register(device_tensor_descriptor)


def check_descriptor_args(fn: str, base, shape, strides, block_shape, max_rank: int):
    """The checks of an in-kernel `make_tensor_descriptor` (tile and Gluon alike) on its
    arguments: matching ranks up to `max_rank`, a contiguous innermost dim (stride the
    constant 1) and blocks whose rows span at least 16 bytes (TMA's minimum). Returns the
    block shape as ints."""
    block = B.check_block_args(fn, base, block_shape, (("shape", shape), ("strides", strides)),
                               max_rank=max_rank)
    if not (T.is_number(strides[-1]) and int(strides[-1]) == 1):
        raise ValueError(f"{fn}: the last stride must be the compile-time constant 1 (the "
                         f"innermost dim is contiguous), got {T.describe(strides[-1])}")
    element = base.dtype.element
    if block[-1] * element.itemsize < 16:
        raise ValueError(f"{fn}: the last block dim must span at least 16 bytes, got "
                         f"{block[-1]} x {T.type_name(element)} = "
                         f"{block[-1] * element.itemsize} bytes")
    return block


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero",
                           _semantic=None):
    """A descriptor of the tensor at `base` with global `shape` and `strides` (elements; the
    last stride must be 1) whose accesses move `block_shape` blocks."""
    fn = "tl.make_tensor_descriptor"
    sem = _semantic
    block = check_descriptor_args(fn, base, shape, strides, block_shape, B.MAX_RANK)
    element = base.dtype.element
    padding = B.check_padding(padding_option, element, fn) or "zero"
    shape = B.scalars(sem, shape, int32, fn, "shape")
    strides = B.scalars(sem, strides, int64, fn, "strides")
    tma = _write_tensor_map(sem, base, shape, strides, block, padding)
    return device_tensor_descriptor(base, shape, strides, block, padding, tma)


def _tma_layout(sem, element, block):
    """The NVMMA layout of a TMA descriptor for these blocks on this target, or None where
    TMA does not apply (before sm_90, in the interpreter, dtypes or blocks TMA cannot move):
    then accesses are address arithmetic, which means the same."""
    from shared_codegen.lowering.backend import parse_target
    target = compile_target(sem)
    if target == "interpreter":
        return None
    arch, suffix = parse_target(target)
    # tensormap.replace exists only on architecture- or family-specific targets (sm_90a,
    # sm_100a, sm_100f, ...), not on plain sm_90 or sm_120.
    if arch < 90 or suffix not in ("a", "f"):
        return None
    try:
        layout = NVMMASharedLayout.get_default_for(list(block), element)
        check_block(block, element, layout)
    except ValueError:
        return None
    return layout


def _write_tensor_map(sem, base, shape, strides, block, padding):
    """Triton's device-side descriptor on Hopper: a CUtensorMap written into this program's
    global scratch (`ops/tma/tensormap.py`), fenced for the TMA unit."""
    element = base.dtype.element
    layout = _tma_layout(sem, element, block)
    if layout is None:
        return None
    ty = TensorDescriptorType(tuple(block), element, layout)
    itemsize = sem.to_tensor(element.itemsize, int64)
    strides_bytes = [sem.binary("mul", s, itemsize).handle for s in strides[:-1]]
    return sem.make_tensor(build_tensor_map(sem.builder, base.handle, [d.handle for d in shape],
                                            strides_bytes, ty, padding))


# ---- descriptors passed from the host: TMA ---------------------------------------------------

def is_host_descriptor(x) -> bool:
    return isinstance(x, tensor) and isinstance(x.type, TensorDescriptorType)


def _buffer_type(ty: TensorDescriptorType) -> SharedMemoryType:
    block = tuple(ty.block_shape)
    return SharedMemoryType(block, ty.element, ty.layout, block)


def _tma_load(sem, desc: tensor, coords: List[tensor]) -> tensor:
    """TMA into a fresh buffer, completed on a fresh mbarrier (PTX ISA 9.7.9.27 and 9.7.13.15:
    one expected arrival, the expect-tx, plus the box's bytes), then a register copy."""
    b, ty = sem.builder, desc.type
    buffer = LocalAllocOp.build(b, _buffer_type(ty))
    bar = LocalAllocOp.build(b, SharedMemoryType((1,), int64, MBarrierLayout(), (1,)))
    InitBarrierOp.build(b, bar, 1)
    BarrierExpectOp.build(b, bar, ty.block_bytes)
    AsyncTMACopyGlobalToLocalOp.build(b, desc.handle, [c.handle for c in coords], bar, buffer)
    WaitBarrierOp.build(b, bar, sem.to_tensor(0, int32).handle)
    InvalBarrierOp.build(b, bar)
    value = sem.make_tensor(LocalLoadOp.build(b, buffer, None))
    LocalDeallocOp.build(b, bar)
    LocalDeallocOp.build(b, buffer)
    return value


def _tma_store(sem, desc: tensor, coords: List[tensor], value: tensor) -> None:
    """The value into a fresh buffer; the generic-proxy writes made visible to the async
    proxy (`fence.proxy.async.shared::cta`, PTX ISA 9.7.13.4.18) before the TMA store reads
    them; `store_wait(0)` before the buffer is released."""
    b, ty = sem.builder, desc.type
    buffer = LocalAllocOp.build(b, _buffer_type(ty), value.handle)
    FenceAsyncSharedOp.build(b)
    AsyncTMACopyLocalToGlobalOp.build(b, desc.handle, [c.handle for c in coords], buffer)
    AsyncTMAStoreWaitOp.build(b, 0)
    LocalDeallocOp.build(b, buffer)


def compile_target(sem) -> str:
    """The target the kernel is traced for ('sm_90a', ..., or 'interpreter')."""
    module = getattr(sem.builder, "module", None)
    return (module.attrs.get("target") if module is not None else None) or "interpreter"


def _uses_tma(sem) -> bool:
    """Descriptor arguments are TMA descriptors on sm_90+ (and in the interpreter, which
    models TMA); before sm_90 their accesses go through the base, shape and strides the
    launcher passes after the map."""
    from shared_codegen.lowering.backend import parse_target
    target = compile_target(sem)
    return target == "interpreter" or parse_target(target)[0] >= 90


def _argument_fields(sem, desc: tensor):
    """(base pointer, shape, strides, fill flag) of a descriptor argument, as scalars."""
    def field(kind, index=0):
        return sem.make_tensor(TensorDescriptorDimOp.build(sem.builder, desc.handle, kind,
                                                           index))
    rank = desc.type.rank
    return (field("base"), [field("shape", d) for d in range(rank)],
            [field("stride", d) for d in range(rank)], field("fill"))


def _fallback(sem, name: str, desc: tensor, coords, value):
    """Before sm_90: the access as masked pointer arithmetic (zero, or NaN, padding)."""
    base, shape, strides, fill = _argument_fields(sem, desc)
    ty = desc.type
    addrs, inside = B.block_addresses(sem, base, shape, strides, coords, list(ty.block_shape),
                                      range(ty.rank))
    if name == "load":
        other = sem.to_tensor(0, ty.element)
        if ty.element.is_floating():
            # The host chose the padding: NaN where the descriptor says so.
            nan = sem.compare("ne", fill, sem.to_tensor(0, int64))
            other = sem.where(nan, sem.to_tensor(float("nan"), ty.element), other)
        return sem.load(addrs, inside, other)
    if name == "store":
        return sem.store(addrs, value, inside)
    sem.atomic_rmw(name[len("atomic_"):], addrs, value, inside, "relaxed", "gpu")
    return None


def host_descriptor_method(sem, name: str, desc: tensor, *args, **kwargs):
    """`desc.<name>(...)` on a descriptor kernel argument."""
    ty = desc.type
    fn = f"desc.{name}"
    tma = _uses_tma(sem)
    if name == "load":
        offsets, = _only(args, kwargs, ("offsets",), fn)
        coords = _offsets(sem, offsets, ty.rank, fn)
        return _tma_load(sem, desc, coords) if tma else _fallback(sem, name, desc, coords, None)
    offsets, value = _only(args, kwargs, ("offsets", "value"), fn)
    coords = _offsets(sem, offsets, ty.rank, fn)
    if name != "store":
        _check_reduce(name, ty.element, fn)
    value = B.block_value(sem, value, list(ty.block_shape), ty.element, fn)
    if not tma:
        return _fallback(sem, name, desc, coords, value)
    if name == "store":
        return _tma_store(sem, desc, coords, value)
    return _tma_reduce(sem, name[len("atomic_"):], desc, coords, value)


def _check_reduce(name: str, element, fn: str) -> None:
    kind = name[len("atomic_"):]
    if element.name not in REDUCE_KINDS[kind]:
        allowed = ", ".join(REDUCE_KINDS[kind])
        raise TypeError(f"{fn} through a TMA descriptor supports {allowed}, got "
                        f"{T.type_name(element)}")


def _tma_reduce(sem, kind: str, desc: tensor, coords: List[tensor], value: tensor) -> None:
    """Like `_tma_store`, with `cp.reduce.async.bulk.tensor` combining into global memory."""
    b, ty = sem.builder, desc.type
    buffer = LocalAllocOp.build(b, _buffer_type(ty), value.handle)
    FenceAsyncSharedOp.build(b)
    AsyncTMAReduceOp.build(b, kind, desc.handle, [c.handle for c in coords], buffer)
    AsyncTMAStoreWaitOp.build(b, 0)
    LocalDeallocOp.build(b, buffer)


def _only(args, kwargs, names, fn):
    values = list(args)
    for name in names[len(values):]:
        if name not in kwargs:
            raise TypeError(f"{fn}() missing argument `{name}`")
        values.append(kwargs.pop(name))
    if kwargs or len(values) != len(names):
        raise TypeError(f"{fn}() takes ({', '.join(names)}), got {len(args)} positional and "
                        f"{sorted(kwargs)} keyword arguments")
    return values
