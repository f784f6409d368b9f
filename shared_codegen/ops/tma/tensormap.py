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

Interpreter: `global_scratch_alloc` maps a fresh zeroed buffer per program and op (the
program's scratch slice), `tensormap_create` records the map it describes (base, shape,
byte strides, fill) under the scratch address, and `reinterpret_tensor_descriptor` hands
that record to the TMA ops as the descriptor value, so Gluon's `tma.make_tensor_descriptor`
runs with the semantics of a host descriptor. (The tile frontend gives the interpreter, and
targets below sm_90, plain masked loads and stores for its device-side descriptors instead.)
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


def _tensor_maps(frame) -> dict:
    """The interpreter's kernel-written tensor maps, by scratch address (one launch)."""
    memory = frame.memory
    maps = getattr(memory, "tensor_maps", None)
    if maps is None:
        maps = memory.tensor_maps = {}
    return maps


def _interpret_scratch(op, frame):
    # One buffer per program and op: the program's slice of the launch's scratch.
    import numpy as np
    memory = frame.memory
    slots = getattr(memory, "scratch_slots", None)
    if slots is None:
        slots = memory.scratch_slots = {}
    key = (tuple(frame.program_id), id(op))
    if key not in slots:
        slots[key] = memory.map(f"global scratch of program {tuple(frame.program_id)}",
                                np.zeros(int(op.attrs["nbytes"]), np.uint8))
    return [np.int64(slots[key])]


def _interpret_create(op, frame):
    from shared_codegen.ops.tma.definition import TensorMapValue
    desc_ptr, _staging, base, dims, strides = TensormapCreateOp.parts(op)
    itemsize = base.type.element.itemsize
    shape = [int(frame[d]) for d in reversed(dims)]
    strides_bytes = [int(frame[s]) for s in reversed(strides)] + [itemsize]
    for d, size in enumerate(shape):
        if size < 1:
            frame.error(op, f"make_tensor_descriptor: shape[{d}] must be >= 1, got {size}")
    for d, stride in enumerate(strides_bytes[:-1]):
        if stride % 16:
            frame.error(op, f"make_tensor_descriptor: strides[{d}] is {stride // itemsize} "
                            f"elements = {stride} bytes; TMA needs a multiple of 16 bytes")
    if int(frame[base]) % 16:
        frame.error(op, "make_tensor_descriptor: the base address is not 16-byte aligned")
    fill = float("nan") if op.attrs["fill_mode"] == FILL_MODES["nan"] else 0
    _tensor_maps(frame)[int(frame[desc_ptr])] = TensorMapValue(
        int(frame[base]), shape, strides_bytes, "make_tensor_descriptor", fill=fill)
    return []


def _interpret_reinterpret(op, frame):
    tmap = _tensor_maps(frame).get(int(frame[op.operands[0]]))
    if tmap is None:
        frame.error(op, "the descriptor reads a tensor map that no make_tensor_descriptor of "
                        "this program wrote")
    return [tmap]


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

    interpret = staticmethod(_interpret_scratch)


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

    interpret = staticmethod(_interpret_create)


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

    def interpret(self, op, frame):  # the map is visible as soon as it is recorded
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

    interpret = staticmethod(_interpret_reinterpret)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


__all__ = ["GlobalScratchAllocOp", "TensormapCreateOp", "TensormapFenceproxyAcquireOp",
           "ReinterpretTensorDescriptorOp", "ELEM_TYPES", "SWIZZLE_MODES", "FILL_MODES",
           "TENSOR_MAP_BYTES", "TENSOR_MAP_ALIGN", "TENSORMAP_PTX_VERSION"]
