"""IR types: scalar dtypes, pointers, and tensors that may carry a layout.

The scalar dtype objects double as the languages' dtypes (`tl.float16 is
shared_codegen.ir.types.float16`), so there is one notion of a type from the frontend down
to lowering. Names follow Triton 3.6 (`fp16`, `bf16`, `fp8e4nv`, `i32`, `u8`, ...).
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

try:  # bf16 and fp8 numpy dtypes; a hard dependency, but keep the import error readable
    import ml_dtypes
except ImportError as exc:  # pragma: no cover
    raise ImportError("ml_dtypes is required for bfloat16/fp8 support: pip install ml_dtypes") from exc


class IRType:
    """Base of every IR type. Types are immutable and compare by value."""

    def is_tensor(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return False

    @property
    def scalar(self) -> "IRType":
        """The element type of a tensor, or the type itself."""
        return self


@dataclass(frozen=True, eq=True)
class ScalarType(IRType):
    """A scalar dtype. `kind` is 'int', 'uint' or 'float'."""

    name: str
    kind: str
    bits: int

    # ---- Triton-compatible queries ---------------------------------------------------
    @property
    def primitive_bitwidth(self) -> int:
        return self.bits

    def is_floating(self) -> bool:
        return self.kind == "float"

    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    def is_int_signed(self) -> bool:
        return self.kind == "int"

    def is_int_unsigned(self) -> bool:
        return self.kind == "uint"

    def is_bool(self) -> bool:
        return self.name == "i1"

    def is_fp8(self) -> bool:
        return self.name in ("fp8e4nv", "fp8e5")

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def is_void(self) -> bool:
        return self.name == "void"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def np(self) -> np.dtype:
        """The numpy dtype the interpreter stores this type in."""
        return _NUMPY[self.name]

    def to_ir(self, builder=None) -> "ScalarType":  # Triton API compatibility
        return self

    def __repr__(self) -> str:
        return _TRITON_NAME.get(self.name, self.name)

    def __str__(self) -> str:
        return self.name

    # Triton lets `tl.float16` be called like a cast in some code; we do not.


@dataclass(frozen=True, eq=True)
class VoidType(IRType):
    name: str = "void"

    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True, eq=True)
class PointerType(IRType):
    """A pointer to `element` in global memory (address space 1)."""

    element: ScalarType
    address_space: int = 1
    # Set for `tl.const` pointers; has no effect on codegen beyond allowing no stores.
    const: bool = False

    def is_ptr(self) -> bool:
        return True

    @property
    def element_ty(self) -> ScalarType:  # Triton's name
        return self.element

    @property
    def name(self) -> str:
        return f"ptr<{self.element.name}>"

    @property
    def bits(self) -> int:
        return 64

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"!ptr<{self.element}>" if self.address_space == 1 else \
            f"!ptr<{self.element}, {self.address_space}>"

    def __repr__(self) -> str:
        return f"pointer<{self.element!r}>"


@dataclass(frozen=True, eq=True)
class TensorType(IRType):
    """A distributed tensor: shape, element type and, once assigned, a layout.

    `layout` is None for tile-DSL tensors before layout assignment; afterwards it is a layout
    object from `gluon.layouts` (hashable, compared by its linear form).
    """

    shape: tuple
    element: IRType
    layout: Optional[Any] = None

    def is_tensor(self) -> bool:
        return True

    @property
    def scalar(self) -> IRType:
        return self.element

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_layout(self, layout) -> "TensorType":
        return TensorType(self.shape, self.element, layout)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.element, self.layout)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        lay = "" if self.layout is None else f", {layout_alias(self.layout)}"
        return f"tensor<{dims}x{self.element}{lay}>"


@dataclass(frozen=True, eq=True)
class MemoryDescriptorType(IRType):
    """A view of `shape` elements of `element` inside an allocation of `alloc_shape`, placed
    by `layout`. Views (index, slice, permute, reshape) keep the allocation's shape so the
    element -> address map stays computable from the type; the view's start is a value, not
    part of the type. The memories are the subclasses (equal fields in two memories are
    still different types)."""

    shape: tuple
    element: ScalarType
    layout: Any
    alloc_shape: tuple

    # Printed after the layout: which memory the descriptor points into ("" for shared).
    memory_space = ""

    @property
    def element_ty(self) -> ScalarType:  # Triton's name
        return self.element

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        text = f"!ttg.memdesc<{dims}x{self.element}, {layout_alias(self.layout)}"
        if self.memory_space:
            text += f", {self.memory_space}"
        if tuple(self.alloc_shape) != tuple(self.shape):
            text += ", alloc " + "x".join(str(s) for s in self.alloc_shape)
        return text + ">"


@dataclass(frozen=True, eq=True)
class SharedMemoryType(MemoryDescriptorType):
    """A shared-memory descriptor (Gluon's `shared_memory_descriptor_type`, TTG's memdesc),
    placed by a shared layout; see `shared_codegen.ops.shared_memory.definition.offset_map`."""


@dataclass(frozen=True, eq=True)
class TensorMemoryType(MemoryDescriptorType):
    """A tensor-memory descriptor (Blackwell; Gluon's `tensor_memory_descriptor_type`, TTG's
    memdesc in `#ttng.tensor_memory`), placed on TMEM lanes and 32-bit columns by a
    `TensorMemoryLayout`. Ops and rules: `shared_codegen/ops/tensor_memory/`."""

    memory_space = "#ttng.tensor_memory"


@dataclass(frozen=True, eq=True)
class TensorDescriptorType(IRType):
    """A TMA tensor descriptor (a `CUtensorMap`) passed as a kernel parameter: each copy
    moves one `block_shape` box of `element` between global memory and a shared-memory view
    placed by the `NVMMASharedLayout` `layout`. The global shape and strides live in the
    descriptor's bytes (encoded on the host), not in the type. Ops and rules:
    `shared_codegen/ops/tma/definition.py`; host side:
    `shared_codegen/runtime/tensor_descriptor.py`."""

    block_shape: tuple
    element: ScalarType
    layout: Any

    # As a kernel parameter, a descriptor is one struct passed by value
    # (`runtime/launcher.py` kind "tensordesc<rank>"): the 128-byte CUtensorMap, then what the
    # map encodes opaquely and kernels may read (Triton passes the same next to the map): the
    # base address (u64), the global shape and strides in elements (i64 each), and the
    # out-of-bounds fill of loads (i64: 0 zero, 1 NaN). Offsets:
    DESC_PARAM_BASE = 128
    DESC_PARAM_SHAPE = 136

    @property
    def param_kind(self) -> str:
        return f"tensordesc{self.rank}"

    @property
    def param_bytes(self) -> int:
        return self.DESC_PARAM_SHAPE + 16 * self.rank + 8

    def param_stride_offset(self, dim: int) -> int:
        return self.DESC_PARAM_SHAPE + 8 * (self.rank + dim)

    @property
    def param_fill_offset(self) -> int:
        return self.DESC_PARAM_SHAPE + 16 * self.rank

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @property
    def block_bytes(self) -> int:
        n = self.element.itemsize
        for s in self.block_shape:
            n *= s
        return n

    @property
    def block_type(self) -> "DescriptorBlockType":
        """The type of the box one copy moves (Triton's `desc.type.block_type`)."""
        return DescriptorBlockType(tuple(self.block_shape), self.element)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.block_shape)
        return f"!tt.tensordesc<{dims}x{self.element}, {layout_alias(self.layout)}>"


@dataclass(frozen=True, eq=True)
class DescriptorBlockType:
    """A tensor descriptor's block (Triton's `block_type` without a layout): `shape`,
    `element_ty`, `numel`, `nbytes` (what `mbarrier.expect` waits for). Equal when shape and
    element are, so kernels can `static_assert(a.block_type == b.block_type)`."""

    dims: tuple
    element_ty: ScalarType

    @property
    def shape(self) -> list:
        # A list, as Triton's: kernels write `[STAGES] + desc.block_type.shape`.
        return list(self.dims)

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.numel * self.element_ty.itemsize

    def __repr__(self) -> str:
        return f"block_type({self.shape}, {self.element_ty!r})"


@dataclass(frozen=True, eq=True)
class FunctionType(IRType):
    inputs: tuple
    outputs: tuple

    def __str__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        outs = ", ".join(str(t) for t in self.outputs)
        return f"({ins}) -> ({outs})"


def layout_alias(layout) -> str:
    """How a layout prints inside a type. The printer swaps in `#name` aliases."""
    return str(layout)


# ---- the scalar dtypes ----------------------------------------------------------------
int1 = ScalarType("i1", "int", 1)
int8 = ScalarType("i8", "int", 8)
int16 = ScalarType("i16", "int", 16)
int32 = ScalarType("i32", "int", 32)
int64 = ScalarType("i64", "int", 64)
uint8 = ScalarType("u8", "uint", 8)
uint16 = ScalarType("u16", "uint", 16)
uint32 = ScalarType("u32", "uint", 32)
uint64 = ScalarType("u64", "uint", 64)
float8e4nv = ScalarType("fp8e4nv", "float", 8)
float8e5 = ScalarType("fp8e5", "float", 8)
float16 = ScalarType("fp16", "float", 16)
bfloat16 = ScalarType("bf16", "float", 16)
float32 = ScalarType("fp32", "float", 32)
float64 = ScalarType("fp64", "float", 64)
void = VoidType()

ALL_SCALARS = (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
               float8e4nv, float8e5, float16, bfloat16, float32, float64)
BY_NAME = {t.name: t for t in ALL_SCALARS}

_TRITON_NAME = {
    "i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "fp16": "float16", "bf16": "bfloat16",
    "fp32": "float32", "fp64": "float64",
}

_NUMPY = {
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "fp8e4nv": np.dtype(ml_dtypes.float8_e4m3fn), "fp8e5": np.dtype(ml_dtypes.float8_e5m2),
    "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp32": np.dtype(np.float32), "fp64": np.dtype(np.float64),
}

# How host arrays' dtypes map to IR dtypes (numpy names and torch's str(dtype) tails).
_FROM_HOST = {
    "bool": int1, "int8": int8, "int16": int16, "int32": int32, "int64": int64,
    "uint8": uint8, "uint16": uint16, "uint32": uint32, "uint64": uint64,
    "float16": float16, "half": float16, "bfloat16": bfloat16, "float32": float32,
    "float": float32, "float64": float64, "double": float64,
    "float8_e4m3fn": float8e4nv, "float8_e5m2": float8e5,
}


def from_host_dtype(dtype) -> Optional[ScalarType]:
    """Map a numpy/torch/ml_dtypes dtype to an IR dtype, or None if unsupported."""
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    try:
        name = np.dtype(dtype).name if not str(dtype).startswith("torch.") else name
    except TypeError:
        pass
    return _FROM_HOST.get(name)


def pointer_type(element: ScalarType, address_space: int = 1) -> PointerType:
    return PointerType(element, address_space)


def scalar_of(ty: IRType) -> IRType:
    return ty.element if isinstance(ty, TensorType) else ty


def block_type(element: IRType, shape, layout=None) -> TensorType:
    return TensorType(tuple(int(s) for s in shape), element, layout)


def same_shape_type(ty: IRType, element: IRType) -> IRType:
    """`element`, made a tensor of `ty`'s shape and layout when `ty` is a tensor."""
    if isinstance(ty, TensorType):
        return TensorType(ty.shape, element, ty.layout)
    return element
