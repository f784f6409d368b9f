"""Tensor maps written by the kernel (sm_90a): what `tl.make_tensor_descriptor` becomes on
Hopper, as in Triton 3.6's TMA lowering.

    %p = ttg.global_scratch_alloc {nbytes = 128, alignment = 128, offset = 0} : !tt.ptr<i8>
    %s = ttg.local_alloc : !ttg.memdesc<32xi32, ...>          128 bytes of staging
    ttng.tensormap_create %p, %s, %base, %dim1, %dim0, %stride0 {box_dim = [64, 64], ...}
    ttng.tensormap_fenceproxy_acquire %p
    %d = ttng.reinterpret_tensor_descriptor %p : !tt.tensordesc<64x64xfp16, ...>

- `global_scratch_alloc` is this program's slice of the launch's global scratch: the launcher
  allocates `grid size x module.attrs["global_scratch_bytes"]` bytes with the allocator of
  `tile.set_allocator` and passes it as a hidden last kernel parameter; each alloc has a fixed
  offset in the program's slice.
- `tensormap_create` builds the 128-byte CUtensorMap in shared memory (zeroed by warp 0, each
  field set by thread 0 with `tensormap.replace`, PTX ISA 9.7.9.28), then warp 0 copies it to
  `%p` with `tensormap.cp_fenceproxy` (release at gpu scope, PTX ISA 9.7.13.4.19). Dims are
  listed innermost first, as PTX orders them: `global_dim` (i32 elements), `global_stride`
  (i64 bytes, without the innermost), `box_dim` (the TMA box, `box_shape`). `elem_type`,
  `swizzle_mode` and `fill_mode` use the PTX tensor-map encodings (fill 1: NaN).
- `tensormap_fenceproxy_acquire` makes the new map visible to the TMA unit before thread 0
  issues copies through it (`fence.proxy.tensormap::generic.acquire.gpu`).
- `reinterpret_tensor_descriptor` views the map as a descriptor the TMA ops take.

In the CPU interpreter (Gluon's `tma.make_tensor_descriptor`; the tile frontend gives the
interpreter plain masked loads and stores instead) `global_scratch_alloc` is a slot for one
map, `tensormap_create` fills it with the descriptor's base, shape and strides, and
`reinterpret_tensor_descriptor` reads it back for the TMA ops.
"""

from __future__ import annotations

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import (PointerType, SharedMemoryType, TensorDescriptorType,
                                     TensorType, int8, int32, int64)
from shared_codegen.layouts.relations import NO_RELATION

SCRATCH, CREATE, ACQUIRE, REINTERPRET = ("ttg.global_scratch_alloc", "ttng.tensormap_create",
                                         "ttng.tensormap_fenceproxy_acquire",
                                         "ttng.reinterpret_tensor_descriptor")
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 128
# PTX's tensor-map `elemtype` encoding (it differs from CUtensorMapDataType past FLOAT32).
ELEM_TYPES = {"u8": 0, "i8": 0, "fp8e4nv": 0, "fp8e5": 0, "u16": 1, "i16": 1, "u32": 2,
              "i32": 3, "u64": 4, "i64": 5, "fp16": 6, "fp32": 7, "fp64": 9, "bf16": 10}
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
FILL_MODES = {"zero": 0, "nan": 1}
# tensormap.replace and the tensormap proxy fences need PTX ISA 8.3; 8.6 is asked for
# because older versions read `global_stride` differently (Triton shifts it for <= 8.5).
TENSORMAP_PTX_VERSION = (8, 6)


class TensorMapSlot:
    """What `global_scratch_alloc` yields in the interpreter: room for one tensor map."""

    def __init__(self, where: str):
        self.where = where
        self.tensor_map = None

    def filled(self, op, frame):
        if self.tensor_map is None:
            frame.error(op, f"the tensor map in the global scratch allocated at {self.where} "
                            f"is used before ttng.tensormap_create wrote it")
        return self.tensor_map


def _slot(op, frame, value) -> TensorMapSlot:
    if not isinstance(value, TensorMapSlot):
        frame.error(op, "expects the global scratch of a tensor map")
    return value


def _where(op) -> str:
    loc = op.loc
    return f"{loc.file}:{loc.line}" if loc is not None and loc.file else "an unknown line"


class GlobalScratchAllocOp(OpDef):
    """`ttg.global_scratch_alloc {nbytes, alignment, offset}`: this program's bytes at
    `offset` of its slice of the launch's global scratch."""

    name = SCRATCH
    layout_rule = NO_RELATION
    user_name = "global scratch"

    @staticmethod
    def build(b, nbytes: int, alignment: int):
        module = b.module
        used = int(module.attrs.get("global_scratch_bytes", 0))
        offset = -(-used // alignment) * alignment
        module.attrs["global_scratch_bytes"] = offset + int(nbytes)
        module.attrs["global_scratch_align"] = max(
            int(module.attrs.get("global_scratch_align", 1)), int(alignment))
        return b.create(SCRATCH, [], [PointerType(int8)],
                        {"nbytes": int(nbytes), "alignment": int(alignment),
                         "offset": offset}).result

    def print_attrs(self, op):
        return format_attrs({k: op.attrs[k] for k in ("nbytes", "alignment", "offset")})

    def verify(self, op):
        if op.attrs.get("offset", -1) % max(1, op.attrs.get("alignment", 1)):
            raise VerificationError("offset must be a multiple of alignment", op)

    def interpret(self, op, frame):
        return [TensorMapSlot(_where(op))]


class TensormapCreateOp(OpDef):
    """`ttng.tensormap_create [desc_ptr, staging, base, *global_dim, *global_stride]
    {box_dim, elem_type, swizzle_mode, fill_mode}`; see the module docstring."""

    name = CREATE
    layout_rule = NO_RELATION
    user_name = "tl.make_tensor_descriptor"
    memory_effects = frozenset({MemoryEffect.WRITE_GLOBAL, MemoryEffect.WRITE_SHARED,
                                MemoryEffect.READ_SHARED})

    @staticmethod
    def build(b, desc_ptr, staging, base, global_dim, global_stride, box_dim, elem_type: int,
              swizzle_mode: int, fill_mode: int):
        module = b.module
        if module is not None:
            have = tuple(module.attrs.get("min_ptx_version") or (0, 0))
            module.attrs["min_ptx_version"] = max(have, TENSORMAP_PTX_VERSION)
        return b.create(CREATE, [desc_ptr, staging, base] + list(global_dim) +
                        list(global_stride), [],
                        {"box_dim": [int(x) for x in box_dim], "elem_type": int(elem_type),
                         "swizzle_mode": int(swizzle_mode), "fill_mode": int(fill_mode)})

    @staticmethod
    def parts(op):
        rank = len(op.attrs["box_dim"])
        ops = op.operands
        return ops[0], ops[1], ops[2], ops[3:3 + rank], ops[3 + rank:3 + 2 * rank - 1]

    def print_attrs(self, op):
        return format_attrs({k: op.attrs[k] for k in ("box_dim", "elem_type", "swizzle_mode",
                                                     "fill_mode")})

    def verify(self, op):
        rank = len(op.attrs.get("box_dim", ()))
        if not 1 <= rank <= 5 or len(op.operands) != 3 + 2 * rank - 1:
            raise VerificationError("expected operands [desc_ptr, staging, base, global_dim x "
                                    "rank, global_stride x (rank - 1)] for rank 1 to 5", op)
        desc_ptr, staging, base, dims, strides = self.parts(op)
        for what, v in (("desc_ptr", desc_ptr), ("base", base)):
            if not isinstance(v.type, PointerType):
                raise VerificationError(f"{what} must be a pointer, got {v.type}", op)
        from shared_codegen.ops.shared_memory.definition import alloc_alignment
        if not isinstance(staging.type, SharedMemoryType) or \
                staging.type.element.itemsize * _numel(staging.type.shape) != TENSOR_MAP_BYTES \
                or alloc_alignment(staging.type.layout) % TENSOR_MAP_ALIGN:
            raise VerificationError(f"staging must be {TENSOR_MAP_BYTES} bytes of shared "
                                    f"memory aligned to {TENSOR_MAP_ALIGN}, got "
                                    f"{staging.type}", op)
        for what, values, ty in (("global_dim", dims, int32), ("global_stride", strides, int64)):
            for v in values:
                if isinstance(v.type, TensorType) or v.type != ty:
                    raise VerificationError(f"{what} entries must be {ty} scalars, got {v.type}",
                                            op)
        if not all(1 <= b <= 256 for b in op.attrs["box_dim"]):
            raise VerificationError(f"box_dim entries must be in [1, 256], got "
                                    f"{op.attrs['box_dim']}", op)

    def interpret(self, op, frame):
        from shared_codegen.ops.tma.definition import TensorMapValue

        desc_ptr, _staging, base, dims, strides = self.parts(op)
        itemsize = base.type.element.itemsize
        slot = _slot(op, frame, frame[desc_ptr])
        # What the GPU would take silently and get wrong (PTX ISA, tensor-map fields): the
        # global address and every stride but the innermost are multiples of 16 bytes.
        outer_first = [int(frame[s]) for s in reversed(strides)]
        for d, nbytes in enumerate(outer_first):
            if nbytes <= 0 or nbytes % 16:
                frame.error(op, f"tensor descriptor: strides[{d}] = {nbytes // itemsize} "
                                f"elements = {nbytes} bytes is not a positive multiple of 16 "
                                f"bytes (TMA's stride granularity)")
        if int(frame[base]) % 16:
            frame.error(op, f"tensor descriptor: the base address is {int(frame[base]) % 16} "
                            f"bytes past a 16-byte boundary (TMA needs 16-byte alignment)")
        # Dims and strides come innermost first (PTX order); the innermost stride is the
        # element size.
        slot.tensor_map = TensorMapValue(
            int(frame[base]), [int(frame[d]) for d in reversed(dims)],
            outer_first + [itemsize],
            f"the descriptor made at {_where(op)}",
            fill=float("nan") if op.attrs["fill_mode"] == FILL_MODES["nan"] else 0)
        return []


class TensormapFenceproxyAcquireOp(OpDef):
    """`ttng.tensormap_fenceproxy_acquire [desc_ptr]`."""

    name = ACQUIRE
    layout_rule = NO_RELATION
    user_name = "tl.make_tensor_descriptor"
    memory_effects = frozenset({MemoryEffect.READ_GLOBAL})

    @staticmethod
    def build(b, desc_ptr):
        return b.create(ACQUIRE, [desc_ptr], [])

    def verify(self, op):
        if len(op.operands) != 1 or not isinstance(op.operands[0].type, PointerType):
            raise VerificationError("expects one pointer operand", op)

    def interpret(self, op, frame):
        _slot(op, frame, frame[op.operands[0]]).filled(op, frame)
        return []


class ReinterpretTensorDescriptorOp(OpDef):
    """`ttng.reinterpret_tensor_descriptor [ptr] -> !tt.tensordesc`."""

    name = REINTERPRET
    layout_rule = NO_RELATION
    pure = True
    user_name = "tl.make_tensor_descriptor"

    @staticmethod
    def build(b, ptr, ty: TensorDescriptorType):
        return b.create(REINTERPRET, [ptr], [ty]).result

    def verify(self, op):
        if len(op.operands) != 1 or not isinstance(op.operands[0].type, PointerType) or \
                not isinstance(op.result.type, TensorDescriptorType):
            raise VerificationError("expects a pointer operand and a tensor descriptor result",
                                    op)

    def interpret(self, op, frame):
        return [_slot(op, frame, frame[op.operands[0]]).filled(op, frame)]


def build_tensor_map(b, base, dims, byte_strides, ty: TensorDescriptorType, padding: str):
    """The ops of a kernel-written descriptor of type `ty` (block, element, NVMMA layout) over
    the tensor at `base`: `dims` (i32 values) and `byte_strides` (i64 values, without the
    innermost) outermost first. Returns the descriptor value. Shared by the tile DSL's
    `tl.make_tensor_descriptor` and Gluon's `tma.make_tensor_descriptor`."""
    from shared_codegen.layouts import NVMMASharedLayout
    from shared_codegen.ops.shared_memory.definition import LocalAllocOp, LocalDeallocOp
    from shared_codegen.ops.tma.definition import box_shape

    scratch = GlobalScratchAllocOp.build(b, TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN)
    # An unswizzled NVMMA layout: the allocator places it on a 128-byte boundary, which the
    # tensor map's staging copy needs.
    words = TENSOR_MAP_BYTES // 4
    staging = LocalAllocOp.build(b, SharedMemoryType(
        (words,), int32, NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1),
        (words,)))
    TensormapCreateOp.build(
        b, scratch, staging, base, list(reversed(dims)), list(reversed(byte_strides)),
        list(reversed(box_shape(ty))), ELEM_TYPES[ty.element.name],
        SWIZZLE_MODES[ty.layout.swizzle_byte_width], FILL_MODES[padding])
    LocalDeallocOp.build(b, staging)
    TensormapFenceproxyAcquireOp.build(b, scratch)
    return ReinterpretTensorDescriptorOp.build(b, scratch, ty)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


__all__ = ["GlobalScratchAllocOp", "TensormapCreateOp", "TensormapFenceproxyAcquireOp",
           "ReinterpretTensorDescriptorOp", "build_tensor_map", "ELEM_TYPES", "SWIZZLE_MODES", "FILL_MODES",
           "TENSOR_MAP_BYTES", "TENSOR_MAP_ALIGN", "TENSORMAP_PTX_VERSION"]
