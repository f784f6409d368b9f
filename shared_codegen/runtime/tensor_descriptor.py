"""`TensorDescriptor`: a host-side TMA tensor descriptor, passed to kernels as an argument.
Gluon exports it as Triton 3.6's `triton.experimental.gluon.nvidia.hopper.TensorDescriptor`
(`gluon.nvidia.hopper`); the tile DSL's `tile.tools.tensor_descriptor.TensorDescriptor` is
this class with the layout the tile compiler picks.

    desc = TensorDescriptor.from_tensor(x, [64, 64], gl.NVMMASharedLayout.get_default_for(...))
    kernel[grid](desc, ...)

`base` is a CUDA tensor (torch, or anything with `data_ptr()`), or, for the CPU interpreter,
a numpy array or CPU torch tensor. `shape` and `strides` are in elements (the last stride
must be 1); `block_shape` is the box one copy moves; `layout` the `NVMMASharedLayout` of the
shared memory it lands in.

Every limit of `cuTensorMapEncodeTiled` that bad input commonly hits is checked here first,
so the error names the value and the limit instead of a bare CUDA_ERROR_INVALID_VALUE:
rank 1 to 5, a supported dtype, a 16-byte aligned base, strides that are multiples of 16
bytes (and below 2**40), dims in [1, 2**32], a block whose contiguous dim is at least 16
bytes and at least the layout's swizzle width. Block dims above 256 (TMA's box limit) are
split into several boxes, as in Triton: the map encodes one box, and each copy issues one
message per box (`ops/tma/lowering._boxes`). For a GPU tensor the 128-byte CUtensorMap is
encoded here, once for every descriptor over the same memory, block, layout and padding
(`_ENCODED`); kernels receive it as a `__grid_constant__` parameter.

`padding="nan"` (floating-point tensors) makes out-of-bounds elements of a load read NaN.
"""

from __future__ import annotations

import copy
import ctypes
import struct
import sys
from typing import Any, Dict, List

from shared_codegen.ir.types import TensorDescriptorType, from_host_dtype
from shared_codegen.ops.tma.definition import TMA_DTYPES, TensorMapValue, box_shape, check_block
from shared_codegen.runtime.specialize import register_handler

__all__ = ["TensorDescriptor"]

MAX_STRIDE_BYTES = 1 << 40
MAX_DIM = 1 << 32

# Checked and encoded states of GPU descriptors, shared by every descriptor over the same
# address, dtype, shape, strides, block, layout, padding and launch box: Triton's tutorials
# build fresh descriptors on every call (tutorial 06's forward makes four per launch), and
# checking and encoding them again cost more host time than a short attention kernel takes on
# the GPU. The map depends on nothing else (the address fixes the device), so a hit is exact; a
# new tensor (a new address) encodes anew. Oldest dropped first.
_ENCODED: Dict[tuple, dict] = {}
_MAX_ENCODED = 1024


def _is_host(base) -> bool:
    import numpy as np
    if isinstance(base, np.ndarray):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(base, torch.Tensor) and base.device.type == "cpu"


def _address(base) -> int:
    import numpy as np
    if isinstance(base, np.ndarray):
        return int(base.__array_interface__["data"][0])
    if callable(getattr(base, "data_ptr", None)):
        return int(base.data_ptr())
    if hasattr(base, "__cuda_array_interface__"):
        return int(base.__cuda_array_interface__["data"][0])
    raise TypeError(f"TensorDescriptor: base must be a tensor or array, got "
                    f"{type(base).__name__}")


def _strides_of(tensor) -> List[int]:
    import numpy as np
    if isinstance(tensor, np.ndarray):
        return [s // tensor.itemsize for s in tensor.strides]
    return list(tensor.stride())


def dataclass_fields(*names: str) -> dict:
    """`__dataclass_fields__` naming a class's constructor parameters: Triton's descriptors
    are dataclasses, so kernels' host code calls `dataclasses.replace(desc, layout=...)`
    (tutorial 11 does), which re-runs the constructor (and its checks) with the fields."""
    import dataclasses
    return dataclasses.make_dataclass("_Fields", [(n, Any) for n in names]).__dataclass_fields__


class TensorDescriptor:
    """See the module docstring. Attributes: `base`, `shape`, `strides`, `block_shape`,
    `layout`, `padding`; `type` (the kernel parameter's IR type); `tensor_map` (the
    encoded 128 bytes, GPU tensors only).

    As in Triton (whose descriptors are dataclasses), `block_shape` may be assigned after
    construction: the checks, the type and the map follow the current block."""

    __dataclass_fields__ = dataclass_fields("base", "shape", "strides", "block_shape", "layout",
                                            "padding")
    _box = None  # the launch's box when it is not the block's own (`with_box`)

    def __init__(self, base: Any, shape, strides, block_shape, layout, padding: str = "zero"):
        self.base = base
        self.shape = [int(s) for s in shape]
        self.strides = [int(s) for s in strides]
        self.layout = layout
        self.padding = padding
        self.on_host = _is_host(base)
        self._prepared = {}
        self.block_shape = block_shape
        self._state()  # bad input fails here, where the descriptor is made

    @property
    def block_shape(self) -> List[int]:
        return list(self._block_shape)

    @block_shape.setter
    def block_shape(self, value) -> None:
        block = [int(b) if not isinstance(b, bool) else b for b in value]
        if len(block) != len(self.shape):
            raise ValueError(f"TensorDescriptor: block_shape {block} must have the rank of "
                             f"shape {self.shape} ({len(self.shape)})")
        self._block_shape = block

    # ---- the checked (and, for a GPU tensor, encoded) state ----------------------------------
    def _layout_identity(self):
        """What of the layout the encoded map depends on beyond the other fields (the swizzle,
        fp4 padding): the layout itself. None when it cannot be a cache key (not an NVMMA
        layout: the checks refuse it)."""
        from shared_codegen.layouts import NVMMASharedLayout
        return self.layout if isinstance(self.layout, NVMMASharedLayout) else None

    def _state(self) -> dict:
        """The element type, IR type and (GPU) encoded map of the current block shape, checked
        once per descriptor, and for a GPU tensor shared with every descriptor over the same
        memory, block, layout and padding (`_ENCODED`)."""
        key = tuple(self._block_shape)
        state = self._prepared.get(key)
        if state is not None:
            return state
        identity = None
        if not self.on_host:
            layout = self._layout_identity()
            if layout is not None:
                identity = (_address(self.base), getattr(self.base, "dtype", None),
                            tuple(self.shape), tuple(self.strides), key, self.padding, layout,
                            self._box)
                state = _ENCODED.get(identity)
        if state is None:
            element = self._check()  # reads self.layout and self.block_shape
            state = {"element": element, "type": TensorDescriptorType(key, element, self.layout),
                     "tensor_map": None, "param": None}
            state["key"] = (state["type"], "")
            self._prepared = {key: state}  # the encoding reads self.type
            if not self.on_host:
                try:
                    state["tensor_map"] = self._encode_for_device()
                except BaseException:
                    self._prepared = {}
                    raise
                if identity is not None:
                    if len(_ENCODED) >= _MAX_ENCODED:
                        _ENCODED.pop(next(iter(_ENCODED)))  # the oldest
                    _ENCODED[identity] = state
        self._prepared = {key: state}
        return state

    element = property(lambda self: self._state()["element"])
    type = property(lambda self: self._state()["type"])
    _key = property(lambda self: self._state()["key"])
    tensor_map = property(lambda self: self._state()["tensor_map"])

    @staticmethod
    def from_tensor(tensor: Any, block_shape, layout, padding: str = "zero"):
        """A descriptor over all of `tensor` (its shape and strides)."""
        return TensorDescriptor(tensor, list(tensor.shape), _strides_of(tensor), block_shape,
                                layout, padding)

    def __repr__(self):
        return (f"TensorDescriptor(shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}, layout={self.layout!r})")

    # ---- checks ------------------------------------------------------------------------------
    def _check(self):
        rank = len(self.shape)
        if not 1 <= rank <= 5:
            raise ValueError(f"TensorDescriptor: rank must be 1 to 5, got shape {self.shape} "
                             f"(rank {rank})")
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"TensorDescriptor: shape {self.shape}, strides {self.strides} "
                             f"and block_shape {self.block_shape} must have the same rank")
        element = from_host_dtype(getattr(self.base, "dtype", None))
        if element is None or element.name not in TMA_DTYPES:
            raise ValueError(f"TensorDescriptor: dtype {getattr(self.base, 'dtype', None)} is "
                             f"not supported by TMA; supported: {', '.join(sorted(TMA_DTYPES))}")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan' (what "
                             f"out-of-bounds elements read as), got {self.padding!r}")
        if self.padding == "nan" and not element.is_floating():
            raise ValueError(f"TensorDescriptor: padding='nan' needs a floating-point tensor, "
                             f"got {getattr(self.base, 'dtype', None)}")
        address = _address(self.base)
        if getattr(self.layout, "fp4_padded", False):
            # 16U4_ALIGN16B: 32-byte aligned base and strides, 128-element rows.
            if address % 32 or any(s * element.itemsize % 32 for s in self.strides[:-1]):
                raise ValueError(f"TensorDescriptor: with fp4_padded=True the base address "
                                 f"({address:#x}) and the strides ({self.strides}) must be "
                                 f"32-byte aligned")
            if self.shape[-1] * 2 % 128:
                raise ValueError(f"TensorDescriptor: with fp4_padded=True the innermost dim "
                                 f"must hold a multiple of 128 e2m1 values (64 bytes), got "
                                 f"{self.shape[-1]} bytes")
        if address % 16:
            raise ValueError(f"TensorDescriptor: the base address {address:#x} is not 16-byte "
                             f"aligned (TMA needs the tensor to start on a 16-byte boundary; "
                             f"it is {address % 16} bytes past one)")
        for d, size in enumerate(self.shape):
            if not 1 <= size <= MAX_DIM:
                raise ValueError(f"TensorDescriptor: shape[{d}] = {size} must be in [1, 2**32]")
        if self.strides[-1] != 1:
            raise ValueError(f"TensorDescriptor: the last dim must be contiguous (stride 1), "
                             f"got strides {self.strides}")
        itemsize = element.itemsize
        for d, stride in enumerate(self.strides[:-1]):
            nbytes = stride * itemsize
            if nbytes <= 0 or nbytes % 16:
                raise ValueError(f"TensorDescriptor: strides[{d}] = {stride} elements = "
                                 f"{nbytes} bytes is not a positive multiple of 16 bytes "
                                 f"(TMA's stride granularity)")
            if nbytes >= MAX_STRIDE_BYTES:
                raise ValueError(f"TensorDescriptor: strides[{d}] = {nbytes} bytes exceeds "
                                 f"TMA's limit of 2**40 bytes")
        try:
            check_block(self.block_shape, element, self.layout)
        except ValueError as exc:
            raise ValueError(f"TensorDescriptor: {exc}") from None
        return element

    def param_bytes(self) -> bytes:
        """The kernel parameter (`TensorDescriptorType.param_bytes`): the map, then the base
        address, shape and strides (elements) and the fill (1: NaN) as 64-bit ints. Kept with
        the shared state: they hold nothing its identity does not fix."""
        state = self._state()
        packed = state["param"]
        if packed is None:
            tmap = state["tensor_map"]
            fields = struct.pack(f"<Q{2 * len(self.shape) + 1}q", _address(self.base),
                                 *self.shape, *self.strides, int(self.padding == "nan"))
            packed = state["param"] = (tmap if tmap is not None else bytes(128)) + fields
        return packed

    # ---- GPU: the CUtensorMap ---------------------------------------------------------------
    def _encode_for_device(self) -> bytes:
        """The encoded map; before sm_90 (no TMA: kernels read only the fields after the
        map) 128 zero bytes."""
        from shared_codegen.runtime import driver
        device = driver.get_device(driver.current_device_index())
        if device.compute_capability[0] < 9:
            return bytes(128)
        return self._encode()

    def with_box(self, box) -> "TensorDescriptor":
        """This descriptor with its map encoded for `box` instead of the block's own boxes:
        what a kernel whose multicast loads fetch slices of the block is launched with
        (`metadata["tma_boxes"]`, ops/tma/multicast.py). Its state is shared like any other
        (`_ENCODED`, keyed by the box too)."""
        box = tuple(int(b) for b in box)
        cached = self.__dict__.get("_boxed")
        if cached is not None and cached[0] == box and cached[1] is self._state():
            return cached[2]
        other = copy.copy(self)
        other._box, other._prepared = box, {}
        self._boxed = (box, self._state(), other)
        return other

    def _encode(self) -> bytes:
        from cuda.bindings import driver as cu

        from shared_codegen.runtime import driver
        driver._initialize()
        rank = len(self.shape)
        itemsize = self.element.itemsize
        swizzle = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}[self.layout.swizzle_byte_width]
        box = box_shape(self.type) if self._box is None else list(self._box)
        dtype, shape = TMA_DTYPES[self.element.name], list(self.shape)
        if self.layout.fp4_padded:  # the map counts e2m1 values, two per byte
            dtype, shape[-1], box[-1] = "16U4_ALIGN16B", shape[-1] * 2, box[-1] * 2
        # The driver lists dims innermost first and omits the innermost stride (it is the
        # element size).
        args = (getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{dtype}"),
                rank, _address(self.base),
                [cu.cuuint64_t(s) for s in reversed(shape)],
                # A rank-1 map has no stride to list, but an empty list reaches the driver as
                # a null pointer, which it refuses: pass the extent in bytes, as a one-entry
                # array it never reads.
                [cu.cuuint64_t(s * itemsize) for s in reversed(self.strides[:-1])]
                or [cu.cuuint64_t(self.shape[0] * itemsize)],
                [cu.cuuint32_t(b) for b in reversed(box)],
                [cu.cuuint32_t(1)] * rank,
                cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzle}"),
                cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                # NaN fill: out-of-bounds elements of a load read NaN instead of zero.
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                if self.padding == "nan" else
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        tmap = driver.check(cu.cuTensorMapEncodeTiled(*args),
                            f"cuTensorMapEncodeTiled(shape={self.shape}, strides="
                            f"{self.strides}, box={box}, swizzle={swizzle})")
        return ctypes.string_at(tmap.getPtr(), 128)  # a copy: the struct may go

    # ---- CPU interpreter ---------------------------------------------------------------------
    def interpreter_value(self, memory, name: str) -> TensorMapValue:
        """Map `base` into the interpreter's memory and describe it to the TMA ops."""
        from shared_codegen.interpreter.memory import host_array
        arr = host_array(self.base)
        if arr is None:
            raise TypeError(f"argument `{name}`: the descriptor's base lives on the GPU; the CPU "
                            f"interpreter needs a numpy array or a CPU torch tensor")
        address = memory.map(name, arr)
        return TensorMapValue(address, self.shape,
                              [s * self.element.itemsize for s in self.strides], name,
                              fill=float("nan") if self.padding == "nan" else 0)


def _key(desc: TensorDescriptor) -> tuple:
    return desc._key


register_handler(TensorDescriptor, _key, fast_key=True)
