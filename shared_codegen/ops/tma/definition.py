"""TMA (the Tensor Memory Accelerator, sm_90): bulk tensor copies between global memory and
shared memory, described by a host-encoded tensor map.

    ttng.async_tma_copy_global_to_local %desc, %smem, %bar, %c0, %c1[, %pred]
    ttng.async_tma_copy_local_to_global %desc, %smem, %c0, %c1
    ttng.async_tma_store_wait {pendings = 0}

`%desc` is a kernel parameter of type `TensorDescriptorType(block_shape, element, layout)`: the
global tensor's address, shape and strides live in its 128 bytes (host side:
`shared_codegen/runtime/tensor_descriptor.py`), the box it moves per copy in its type.
Coordinates are element indices of the box's first element, one i32 per dim, outermost first (as
the user writes them; PTX lists them innermost first).

- A load copies the box at `coord` into `%smem` (shape `block_shape`, the descriptor's NVMMA
  layout). Elements outside the tensor (any coordinate < 0 or >= the dim) read as zero (NaN
  for a descriptor made with padding="nan"). When the bytes land, the load performs
  `complete_tx` of the box's full byte count (out-of-bounds bytes included) on `%bar`; the
  kernel learns the data is there only from an `mbarrier.wait` that sees the phase complete
  (`mbarrier.expect(bar, bytes)` first).
- A store copies `%smem` to the box at `coord`, clipped to the tensor (out-of-bounds
  elements past the end are not written). A negative coordinate is an error: on the H100 it
  ends the kernel with an illegal instruction, for stores and reductions alike, where a load
  at a negative coordinate reads the fill (2026-12-07). Each store is one *bulk group*;
  `store_wait(n)` blocks until at most `n` groups still read their shared memory, after
  which it may be overwritten.

PTX ISA 9.7.9.27 (cp.async.bulk.tensor), 9.7.9.26.2 (cp.async.bulk.wait_group), and the
CUDA driver's cuTensorMapEncodeTiled for the descriptor.

Boxes. TMA's box is at most 256 per dim and, with a swizzled layout, exactly one swizzle
width (32/64/128 bytes) along the contiguous dim (`NVMMASharedLayout.tma_block_shape`). A
block larger than one box along any dim (a 512-row block, or one wider than the swizzle) is
moved as several boxes, one message each, as Triton does; each box starts at the shared
offset the NVMMA layout gives its first element (box starts are whole swizzle atoms, so the
box's own swizzle lines up). The interpreter moves the whole block at once: the bytes, the
out-of-bounds rule and the transaction count are the same.

Interpreter: a load reads global memory when issued and lands at a seeded random point
(`SC_INTERPRET_SEED`) no later than the wait that needs it; until a wait has observed the
phase it landed in, its destination bytes belong to it, and any access is a race report
(the cp.async machinery of `ops/async_copy/definition.py`). A store writes global memory when
issued and owns its source bytes (reads allowed, writes are races) until a `store_wait`
retires its group. Lowering (`lowering.py`): inline PTX issued by thread 0.
"""

from __future__ import annotations

from typing import List

import numpy as np

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import SharedMemoryType, TensorDescriptorType, TensorType, int1, int32
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.mbarrier.definition import (ENGINE_KEY, _where, barrier_state,
                                                    check_barrier)
from shared_codegen.ops.shared_memory.definition import offset_map

READ_GLOBAL = MemoryEffect.READ_GLOBAL
READ_SHARED = MemoryEffect.READ_SHARED
WRITE_GLOBAL = MemoryEffect.WRITE_GLOBAL
WRITE_SHARED = MemoryEffect.WRITE_SHARED

LOAD, STORE, STORE_WAIT = ("ttng.async_tma_copy_global_to_local",
                           "ttng.async_tma_copy_local_to_global", "ttng.async_tma_store_wait")
REDUCE = "ttng.async_tma_reduce"
MAX_RANK = 5
MAX_BOX = 256  # per dim of one TMA message; larger blocks are split (box_shape)
# cuTensorMapEncodeTiled data types, by IR dtype name (fp8 moves as bytes).
TMA_DTYPES = {"u8": "UINT8", "i8": "UINT8", "fp8e4nv": "UINT8", "fp8e5": "UINT8",
              "u16": "UINT16", "i16": "UINT16", "u32": "UINT32", "i32": "INT32",
              "u64": "UINT64", "i64": "INT64", "fp16": "FLOAT16", "bf16": "BFLOAT16",
              "fp32": "FLOAT32", "fp64": "FLOAT64"}


# ---- checks (host and device share them) -----------------------------------------------------

def check_block(block_shape, element, layout) -> None:
    """ValueError, naming the value and the limit, unless TMA can move `block_shape` boxes of
    `element` into shared memory with `layout`."""
    from shared_codegen.layouts import NVMMASharedLayout
    block = list(block_shape)
    if not 1 <= len(block) <= MAX_RANK:
        raise ValueError(f"TMA descriptors have rank 1 to {MAX_RANK}, got block_shape {block} "
                         f"(rank {len(block)})")
    if getattr(element, "name", None) not in TMA_DTYPES:
        raise ValueError(f"TMA does not support dtype {element!r}; supported: "
                         f"{', '.join(sorted(TMA_DTYPES))}")
    for d, size in enumerate(block):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"block_shape[{d}] must be a positive int, got {size!r}")
        if size & (size - 1):
            raise ValueError(f"block_shape[{d}] = {size} must be a power of two (shared "
                             f"memory layouts tile powers of two)")
    if not isinstance(layout, NVMMASharedLayout):
        raise ValueError(f"a TMA descriptor's layout must be an NVMMASharedLayout, got "
                         f"{layout!r}")
    if layout.transposed or layout.cga_layout:
        raise ValueError(f"transposed and multi-CTA NVMMASharedLayouts are not supported for "
                         f"TMA descriptors yet, got {layout!r}")
    if layout.fp4_padded:
        # Packed e2m1 pairs in global memory, each 8 bytes padded to 16 in shared memory
        # (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B: boxes of 128 elements, 128-byte swizzle).
        if element.kind not in ("int", "uint") or element.bits != 8:
            raise ValueError(f"an fp4_padded TMA descriptor moves e2m1 pairs packed in uint8, "
                             f"got dtype {element!r}")
        if layout.swizzle_byte_width != 128:
            raise ValueError(f"an fp4_padded TMA descriptor needs swizzle_byte_width=128, got "
                             f"{layout!r}")
    if layout.rank != len(block):
        raise ValueError(f"the layout has rank {layout.rank} but block_shape {block} has "
                         f"rank {len(block)}")
    if layout.element_bitwidth != element.bits:
        raise ValueError(f"the layout's element_bitwidth {layout.element_bitwidth} does not "
                         f"match the dtype {element!r} ({element.bits} bits)")
    # An fp4-padded box lands twice its packed bytes in shared memory.
    inner = block[-1] * element.itemsize * (2 if layout.fp4_padded else 1)
    if inner < 16:
        raise ValueError(f"the innermost block dim moves {block[-1]} x {element.itemsize} = "
                         f"{inner} bytes; TMA needs at least 16")
    swizzle = layout.swizzle_byte_width
    if swizzle and inner < swizzle:
        raise ValueError(f"the innermost block dim moves {block[-1]} x {element.itemsize} = "
                         f"{inner} bytes, less than the layout's {swizzle}-byte swizzle "
                         f"width; use an NVMMASharedLayout with swizzle_byte_width <= {inner}")


def box_shape(ty: TensorDescriptorType) -> List[int]:
    """The box one TMA message moves (what the host encodes as boxDim)."""
    return list(ty.layout.tma_block_shape(list(ty.block_shape)))


def check_smem(desc_ty, smem_ty, what: str = "smem", whole_boxes: bool = False) -> None:
    """ValueError unless `smem_ty` is a view the descriptor's boxes can fill. With
    `whole_boxes` (a store: upstream's tutorial 08 stores [128, 64] subtiles through a
    [128, 256] descriptor), `smem_ty` may be smaller than the block as long as it is a whole
    number of the descriptor's boxes: the messages the kernel issues then move exactly the
    box the host encoded."""
    if not isinstance(desc_ty, TensorDescriptorType):
        raise ValueError(f"expected a tensor descriptor, got {desc_ty}")
    if not isinstance(smem_ty, SharedMemoryType):
        raise ValueError(f"{what} must be a shared memory descriptor, got {smem_ty}")
    shape, block = list(smem_ty.shape), list(desc_ty.block_shape)
    if (shape != block or smem_ty.element != desc_ty.element) and not (
            whole_boxes and smem_ty.element == desc_ty.element
            and _whole_boxes(desc_ty, shape)):
        boxes = (f" (or a whole number of its {box_shape(desc_ty)} boxes, no larger)"
                 if whole_boxes else "")
        raise ValueError(f"{what} is {shape} x {smem_ty.element!r} but the "
                         f"descriptor moves {block} x {desc_ty.element!r} blocks{boxes}")
    want = SharedMemoryType(tuple(shape), desc_ty.element, desc_ty.layout, tuple(shape))
    if offset_map(smem_ty).dims != offset_map(want).dims:
        raise ValueError(f"{what} has layout {smem_ty.layout!r}, which places elements "
                         f"differently from the descriptor's {desc_ty.layout!r}")


def _whole_boxes(desc_ty, shape) -> bool:
    """`shape` fits in the block and is tiled by the descriptor's box, and the layout would
    cut it into that same box (so lowering issues messages of the encoded size)."""
    box, block = box_shape(desc_ty), list(desc_ty.block_shape)
    if len(shape) != len(block) or desc_ty.layout.fp4_padded:
        return False
    if any(s > b or s % x for s, b, x in zip(shape, block, box)):
        return False
    try:
        return list(desc_ty.layout.tma_block_shape(list(shape))) == box
    except ValueError:
        return False


def _verify(op, desc, smem, coords, bar=None, pred=None, whole_boxes=False):
    try:
        check_smem(desc.type, smem.type, whole_boxes=whole_boxes)
        if bar is not None:
            check_barrier(bar.type)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None
    if len(coords) != desc.type.rank:
        raise VerificationError(f"expected {desc.type.rank} coordinates, got {len(coords)}",
                                op)
    for c in coords:
        if isinstance(c.type, TensorType) or c.type != int32:
            raise VerificationError(f"coordinates must be i32 scalars, got {c.type}", op)
    if pred is not None and pred.type != int1:
        raise VerificationError(f"pred must be an i1 scalar, got {pred.type}", op)


# ---- interpreter -----------------------------------------------------------------------------

class TensorMapValue:
    """What a descriptor parameter holds in the interpreter: the mapped base address, the
    global shape and byte strides, the argument's name for messages, and what out-of-bounds
    elements of a load read (`fill`: 0, or NaN for padding="nan")."""

    def __init__(self, address: int, shape, strides_bytes, name: str, fill=0):
        self.address = int(address)
        self.shape = [int(s) for s in shape]
        self.strides = [int(s) for s in strides_bytes]
        self.name = name
        self.fill = fill

    def box(self, coords, block_shape):
        """(addresses, in-bounds mask) of the box whose first element is at `coords`."""
        rank = len(block_shape)
        addr = np.full(tuple(block_shape), self.address, dtype=np.int64)
        inside = np.ones(tuple(block_shape), dtype=bool)
        for d, (c, size) in enumerate(zip(coords, block_shape)):
            idx = int(c) + np.arange(size, dtype=np.int64)
            shape = [1] * rank
            shape[d] = size
            addr = addr + (idx * self.strides[d]).reshape(shape)
            inside = inside & ((idx >= 0) & (idx < self.shape[d])).reshape(shape)
        return addr, inside


class _Engine:
    """One program's in-flight async ops: TMA loads (each also listed on its barrier) and
    TMA store groups, plus the seeded generator that picks when loads land."""

    _KEY = ENGINE_KEY

    def __init__(self, frame):
        from shared_codegen import config
        self.rng = np.random.default_rng([int(config.get("SC_INTERPRET_SEED")) & 0xFFFFFFFF]
                                         + [int(p) for p in frame.program_id])
        self.loads: List["_Load"] = []
        self.stores: List["_Store"] = []
        self.next_id = -1  # negative: cp.async owns the positive ids of the same buffers

    @classmethod
    def of(cls, frame) -> "_Engine":
        engine = frame.values.get(cls._KEY)
        if engine is None:
            engine = frame.values[cls._KEY] = cls(frame)
        return engine

    def new_id(self) -> int:
        self.next_id -= 1
        return self.next_id + 1

    def progress(self) -> None:
        """Land each in-flight load with probability 1/2: a random point of completion."""
        for load in list(self.loads):
            if self.rng.random() < 0.5:
                load.land()


def _pending(buf):
    from shared_codegen.ops.async_copy.definition import _PendingBytes
    pending = getattr(buf, "async_pending", None)
    if pending is None:
        pending = buf.async_pending = _PendingBytes(buf.data.size)
    return pending


def _byte_index(view, itemsize: int) -> np.ndarray:
    return (view.offsets[..., None] + np.arange(itemsize, dtype=np.int64)).reshape(-1)


class _Load:
    def __init__(self, engine, state, view, idx, raw, op_id, where):
        self.engine, self.state, self.view = engine, state, view
        self.idx, self.raw, self.id, self.where = idx, raw, op_id, where
        self.phase_landed = None
        self.hb = None  # (detector, issuing partition, its clock) inside gl.warp_specialize

    def land(self) -> None:
        buf = self.view.buffer
        buf.data[self.idx] = self.raw
        buf.written[self.idx] = True
        self.engine.loads.remove(self)
        self.state.in_flight.remove(self)
        self.state.landed.append(self)
        self.phase_landed = self.state.complete_tx(int(self.raw.size))
        if self.hb is not None:  # the landing releases the write to the phase's waiters
            hb, agent, clock, op = self.hb
            hb.release_write(agent, clock, self.state, self.phase_landed, op)

    def retire(self) -> None:
        pending = self.view.buffer.async_pending
        mine = pending.owner[self.idx] == self.id
        pending.owner[self.idx[mine]] = 0


class _Store:
    def __init__(self, view, idx, op_id):
        self.view, self.idx, self.id = view, idx, op_id

    def retire(self) -> None:
        pending = self.view.buffer.async_pending
        mine = pending.owner[self.idx] == self.id
        pending.owner[self.idx[mine]] = 0


def _coords(op, frame, coords):
    return [int(frame[c]) for c in coords]


def _store_coords(op, frame, coords, what: str):
    """A store's or reduction's coordinates. Loads take negative ones (the box's rows before
    0 read the fill), but on the H100 a TMA store or reduce-add at a negative coordinate ends
    the kernel with an illegal instruction (benchmarks/tma_negative_probe.py, 2026-12-07),
    so the interpreter reports it instead of clipping."""
    values = _coords(op, frame, coords)
    negative = [d for d, c in enumerate(values) if c < 0]
    if negative:
        frame.error(op, f"{what} at coordinates {values}: coordinate {negative[0]} is negative; "
                        f"the GPU raises an illegal instruction for TMA stores and reductions "
                        f"that start before 0 (loads read zeros there), so keep the box's start "
                        f">= 0 and mask or skip rows before it")
    return values


def issue_load(op, frame, ty, tmap, addr, inside, smem, bar) -> None:
    """Start a TMA load of the global elements at `addr` (`inside`: in bounds, else the
    map's fill) into the view `smem`, completing its bytes on `bar` when it lands (at a
    seeded random point, `_Engine.progress`). Shared by the tile copy and gather4."""
    engine = _Engine.of(frame)
    values = frame.memory.load(addr, inside, tmap.fill, ty.element, frame, op)
    view = frame[smem]
    buf = view.buffer
    if buf.freed_at is not None:
        frame.error(op, f"TMA load into shared memory allocated at {buf.where} after "
                        f"ttg.local_dealloc at {buf.freed_at}")
    state = barrier_state(frame, op, frame[bar])
    state._require_valid(frame, op)
    dtype = np.dtype(ty.element.np)
    idx = _byte_index(view, dtype.itemsize)
    pending = _pending(buf)
    pending.check(idx, frame, op, "this TMA load targets")
    raw = np.ascontiguousarray(np.asarray(values, dtype=dtype)).view(np.uint8).reshape(-1)
    load = _Load(engine, state, view, idx, raw, engine.new_id(), _where(op))
    hb = current_hb(frame)
    if hb is not None:  # the issuer writes the destination (interpreter/happens_before.py)
        hb.access(frame, op, buf, idx, write=True, what="this TMA load writes",
                  noun="TMA write", engine="TMA load")
        load.hb = (hb, *hb.now(frame), op)
    pending.owner[idx] = load.id
    pending.describe(load.id, load.where, "TMA load", "writing",
                     f"wait on {state.describe()} until it observes the phase the load "
                     f"completes (mbarrier.expect(bar, nbytes) before the load, "
                     f"mbarrier.wait(bar, phase) before reading)")
    engine.loads.append(load)
    state.in_flight.append(load)


def issue_store(op, frame, ty, addr, inside, smem) -> None:
    """A TMA store of the view `smem` to the global elements at `addr` (only those
    `inside`), one bulk group that reads `smem` until a store_wait retires it. Shared by
    the tile copy and scatter4."""
    engine = _Engine.of(frame)
    view = frame[smem]
    buf = view.buffer
    if buf.freed_at is not None:
        frame.error(op, f"TMA store from shared memory allocated at {buf.where} after "
                        f"ttg.local_dealloc at {buf.freed_at}")
    dtype = np.dtype(ty.element.np)
    idx = _byte_index(view, dtype.itemsize)
    pending = _pending(buf)
    pending.check(idx, frame, op, "this TMA store reads", reading=True)
    hb = current_hb(frame)
    if hb is not None:
        hb.access(frame, op, buf, idx, write=False, what="this TMA store reads",
                  noun="TMA read", engine="TMA store")
    ok = buf.written[idx].reshape(*view.offsets.shape, dtype.itemsize).all(axis=-1)
    if not ok.all():
        first = [int(c) for c in np.argwhere(~ok)[0]]
        frame.error(op, f"TMA store reads uninitialized shared memory: element {first} of "
                        f"the {list(view.offsets.shape)} block was never written (allocation "
                        f"at {buf.where})")
    values = np.ascontiguousarray(buf.data[idx]).view(dtype).reshape(view.offsets.shape)
    frame.memory.store(addr, values, inside, ty.element, frame, op)
    store = _Store(view, idx, engine.new_id())
    pending.owner[idx] = store.id
    pending.describe(store.id, _where(op), "TMA store", "reading",
                     "tma.store_wait(n) must retire its group first (n smaller than the "
                     "number of stores issued after it)", reads_only=True)
    engine.stores.append(store)


# ---- ops -------------------------------------------------------------------------------------

class AsyncTMACopyGlobalToLocalOp(OpDef):
    """`ttng.async_tma_copy_global_to_local [desc, smem, bar, *coords, pred?]`."""

    name = LOAD
    layout_rule = OWN_LAYOUTS
    user_name = "tma.async_copy_global_to_shared"
    memory_effects = frozenset({READ_GLOBAL, WRITE_SHARED})

    @staticmethod
    def build(b, desc, coords, bar, smem, pred=None, multicast: bool = False):
        operands = [desc, smem, bar] + list(coords) + ([pred] if pred is not None else [])
        attrs = {"has_pred": pred is not None}
        if multicast:  # each CTA of the cluster loads a slice for all (ops/tma/multicast.py)
            attrs["multicast"] = True
        return b.create(LOAD, operands, [], attrs)

    @staticmethod
    def parts(op):
        rank = op.operands[0].type.rank
        pred = op.operands[3 + rank] if op.attrs.get("has_pred") else None
        return op.operands[0], op.operands[1], op.operands[2], op.operands[3:3 + rank], pred

    def print_attrs(self, op):
        return format_attrs({"multicast": True}) if op.attrs.get("multicast") else ""

    def verify(self, op):
        if not isinstance(op.operands[0].type, TensorDescriptorType):
            raise VerificationError(f"operand #0 must be a tensor descriptor, got "
                                    f"{op.operands[0].type}", op)
        desc, smem, bar, coords, pred = self.parts(op)
        if len(op.operands) != 3 + desc.type.rank + bool(pred is not None):
            raise VerificationError("expected operands [desc, smem, bar, coords..., pred?]", op)
        _verify(op, desc, smem, coords, bar, pred)

    def interpret(self, op, frame):
        desc, smem, bar, coords, pred = self.parts(op)
        _Engine.of(frame).progress()
        if pred is not None and not bool(frame[pred]):
            return []
        tmap = frame[desc]
        if op.attrs.get("multicast"):  # each CTA loads a slice for all (ops/tma/multicast.py)
            from shared_codegen.ops.tma.multicast import interpret_multicast
            view = frame[smem]
            if view.buffer.freed_at is not None:
                frame.error(op, f"TMA load into shared memory allocated at {view.buffer.where} "
                                f"after ttg.local_dealloc at {view.buffer.freed_at}")
            interpret_multicast(op, frame, _Engine.of(frame), tmap, desc.type,
                                _coords(op, frame, coords), view, frame[bar])
            return []
        addr, inside = tmap.box(_coords(op, frame, coords), desc.type.block_shape)
        issue_load(op, frame, desc.type, tmap, addr, inside, smem, bar)
        return []


class AsyncTMACopyLocalToGlobalOp(OpDef):
    """`ttng.async_tma_copy_local_to_global [desc, smem, *coords]`."""

    name = STORE
    layout_rule = OWN_LAYOUTS
    memory_effects = frozenset({READ_SHARED, WRITE_GLOBAL})

    @staticmethod
    def build(b, desc, coords, smem):
        return b.create(STORE, [desc, smem] + list(coords), [])

    def verify(self, op):
        if not isinstance(op.operands[0].type, TensorDescriptorType):
            raise VerificationError(f"operand #0 must be a tensor descriptor, got "
                                    f"{op.operands[0].type}", op)
        _verify(op, op.operands[0], op.operands[1], op.operands[2:], whole_boxes=True)

    def interpret(self, op, frame):
        desc, smem, coords = op.operands[0], op.operands[1], op.operands[2:]
        _Engine.of(frame).progress()
        # The source may be a whole number of boxes smaller than the block (check_smem).
        addr, inside = frame[desc].box(_store_coords(op, frame, coords, "TMA store"),
                                       smem.type.shape)
        issue_store(op, frame, desc.type, addr, inside, smem)
        return []


# cp.reduce.async.bulk.tensor's reductions and the element types each takes (PTX ISA
# 9.7.9.27.2), by IR dtype name, as Triton 3.6 checks descriptor atomics.
REDUCE_KINDS = {
    "add": ("u32", "i32", "u64", "fp32", "fp16", "bf16"),
    "min": ("u32", "i32", "u64", "i64", "fp16", "bf16"),
    "max": ("u32", "i32", "u64", "i64", "fp16", "bf16"),
    "and": ("u32", "i32", "u64", "i64"),
    "or": ("u32", "i32", "u64", "i64"),
    "xor": ("u32", "i32", "u64", "i64"),
}


def _combine(kind: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    if kind == "add":
        return old + new
    if kind in ("min", "max"):
        return (np.minimum if kind == "min" else np.maximum)(old, new)
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind](old, new)


class AsyncTMAReduceOp(OpDef):
    """`ttng.async_tma_reduce [desc, smem, *coords] {kind}`: combine `smem` into the block at
    `coord` (`kind` in add, min, max, and, or, xor), clipped to the tensor, element by element
    atomically (relaxed). Like a store it is one bulk group that reads its source until a
    `store_wait` retires it."""

    name = REDUCE
    layout_rule = OWN_LAYOUTS
    memory_effects = frozenset({READ_SHARED, READ_GLOBAL, WRITE_GLOBAL})

    @staticmethod
    def build(b, kind: str, desc, coords, smem):
        return b.create(REDUCE, [desc, smem] + list(coords), [], {"kind": kind})

    def print_attrs(self, op):
        return format_attrs({"kind": op.attrs["kind"]})

    def verify(self, op):
        if not isinstance(op.operands[0].type, TensorDescriptorType):
            raise VerificationError(f"operand #0 must be a tensor descriptor, got "
                                    f"{op.operands[0].type}", op)
        kind, element = op.attrs.get("kind"), op.operands[0].type.element
        if kind not in REDUCE_KINDS or element.name not in REDUCE_KINDS[kind]:
            raise VerificationError(f"TMA reduction {kind!r} does not take {element!r}", op)
        _verify(op, op.operands[0], op.operands[1], op.operands[2:])

    def interpret(self, op, frame):
        desc, smem, coords = op.operands[0], op.operands[1], op.operands[2:]
        engine = _Engine.of(frame)
        engine.progress()
        ty = desc.type
        view = frame[smem]
        buf = view.buffer
        dtype = np.dtype(ty.element.np)
        idx = _byte_index(view, dtype.itemsize)
        pending = _pending(buf)
        pending.check(idx, frame, op, "this TMA reduction reads", reading=True)
        values = np.ascontiguousarray(buf.data[idx]).view(dtype).reshape(view.offsets.shape)
        addr, inside = frame[desc].box(_store_coords(op, frame, coords, "TMA reduction"),
                                       ty.block_shape)
        old = frame.memory.load(addr, inside, 0, ty.element, frame, op)
        frame.memory.store(addr, _combine(op.attrs["kind"], np.asarray(old, dtype), values),
                           inside, ty.element, frame, op)
        store = _Store(view, idx, engine.new_id())
        pending.owner[idx] = store.id
        pending.describe(store.id, _where(op), "TMA reduction", "reading",
                         "tma.store_wait(n) must retire its group first", reads_only=True)
        engine.stores.append(store)
        return []


class AsyncTMAStoreWaitOp(OpDef):
    """`ttng.async_tma_store_wait {pendings}`: wait until at most `pendings` TMA store
    groups still read their shared memory (`cp.async.bulk.wait_group.read`)."""

    name = STORE_WAIT
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, pendings: int, read_only: bool = True):
        attrs = {"pendings": int(pendings)}
        if not read_only:
            # Triton 3.8's `read_only=False`: wait until the stores' writes are done, not
            # only their reads of shared memory (`wait_group` without `.read`).
            attrs["read_only"] = False
        return b.create(STORE_WAIT, [], [], attrs)

    def print_attrs(self, op):
        return format_attrs({k: op.attrs[k] for k in ("pendings", "read_only")
                             if k in op.attrs})

    def verify(self, op):
        n = op.attrs.get("pendings")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 63:
            # wait_group takes an immediate, and PTX keeps at most 63 groups apart.
            raise VerificationError(f"pendings must be a compile-time int in [0, 63], got "
                                    f"{n!r}", op)

    def interpret(self, op, frame):
        engine = _Engine.of(frame)
        while len(engine.stores) > op.attrs["pendings"]:
            engine.stores.pop(0).retire()
        return []


__all__ = ["AsyncTMACopyGlobalToLocalOp", "AsyncTMACopyLocalToGlobalOp", "AsyncTMAStoreWaitOp",
           "AsyncTMAReduceOp", "REDUCE_KINDS", "issue_load", "issue_store",
           "TensorMapValue", "check_block", "check_smem", "box_shape", "TMA_DTYPES",
           "MAX_BOX", "MAX_RANK"]
