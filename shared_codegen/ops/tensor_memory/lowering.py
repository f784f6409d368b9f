"""Lowering of tensor memory (sm_100a): allocation at entry and exit, views, tcgen05.ld/st.

A lowered tensor-memory descriptor is one i32 *TMEM address* (PTX ISA "Tensor
Memory Addressing"): lane in bits 16-31, column in bits 0-15. Allocations add their
`col_offset` (from the `tensor_memory_allocation` stage) to the kernel's base address;
`index` and `slice` add whole columns.

Entry and exit (`TensorMemoryLowering`, PTX ISA "tcgen05.alloc, tcgen05.dealloc,
tcgen05.relinquish_alloc_permit"): warp 0 allocates the kernel's columns, which writes the
base address to a shared-memory slot, and gives up the permit to allocate again (nothing
else allocates, and a co-resident CTA may then); after a barrier every thread reads the
address. At exit every thread passes a barrier, then warp 0 deallocates.

Loads and stores (PTX ISA "tcgen05.ld", "tcgen05.st",
"tcgen05.wait") use the shape the register layout is (`plan_any`): the 16-lane shapes
`16x64b`, `16x128b`, `16x256b` are planned in `messages.py`; the `32x32b` shape here: thread t of warp w moves TMEM lane 32*(w%4) + t, one
32-bit column per register (16- and 8-bit elements packed into it), `.x{n}` consecutive
columns per instruction. `plan_access` finds,
from the register layout composed with the TMEM layout, each register's column (and the
column each warp beyond the first warpgroup adds); a layout that is not this shape's (lane i
on row i, warps 1 and 2 on rows 32 and 64) is an error here. M = 64 buffers leave lanes 16-31
of each quadrant empty; their layouts put lanes 16-31 on further columns, which the
`16x32bx2` shape moves (its immediate half-split offset is that column distance).
`tcgen05.wait::ld` takes the loaded registers as tied operands, so nothing reads them before
the wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import I32, VOID, LoweringError
from shared_codegen.layouts import to_linear_layout
from shared_codegen.ops.tensor_memory.definition import (COL_OFFSET, TmemAllocOp, TmemIndexOp,
                                                         TmemLoadOp, TmemReinterpretOp,
                                                         TmemStoreOp, TmemSubsliceOp,
                                                         buffer_columns, cell_map,
                                                         lane_copies, subslice_columns)
from shared_codegen.ops.tensor_memory.messages import (SHAPES, Message, MessagePlan,
                                                       plan_messages)

MAX_X = 32  # registers per tcgen05.ld/st: .x1 .. .x128 exist; 32 keeps the asm small


def _asm(ctx, text, constraints="", ret=None, args=()):
    return ctx.inline_asm(text, constraints, ret or VOID, list(args), side_effects=True)


def require_tcgen05(ctx, op, what: str) -> None:
    """LoweringError unless the target has tensor memory and the tcgen05 instructions
    (sm_100a / sm_103a and their family targets; PTX ISA 9.7.16 target notes)."""
    target = str(getattr(ctx, "target", ""))
    arch = target.split("_")[-1]
    digits = "".join(ch for ch in arch if ch.isdigit())
    if not (digits in ("100", "101", "103", "110") and arch[-1:] in ("a", "f")):
        raise LoweringError(f"{what} needs tensor memory and tcgen05 (sm_100a); the target "
                            f"is {target}", op)


class TensorMemoryLowering:
    """The kernel's tensor-memory allocation (`columns`, a power of two in [32, 512])."""

    SLOT_BYTES = 16

    def __init__(self, columns: int, first_alloc=None, cta_group: int = 1):
        self.columns = columns
        self.first_alloc = first_alloc  # the op errors about the whole allocation name
        # 2 in a kernel of two-CTA MMAs (ops/tcgen05/pair.py): PTX wants one cta_group for
        # all of a kernel's tcgen05 instructions; each CTA of a pair allocates the same.
        self.cta_group = cta_group

    def _warp0(self, ctx):
        return ctx.builder.icmp_unsigned("==", ctx.warp_id(), ctx.i32(0))

    def enter(self, ctx) -> None:
        """Before the kernel body: allocate, relinquish, publish the base address."""
        require_tcgen05(ctx, self.first_alloc, "allocate_tensor_memory")
        b = ctx.builder
        at = -(-ctx.static_shared_bytes // 16) * 16
        ctx.static_shared_bytes = at + self.SLOT_BYTES
        ctx.shared_bytes = max(ctx.shared_bytes, ctx.static_shared_bytes)
        slot = b.gep(ctx.shared_base(), [ctx.i32(at)], source_etype=ir.IntType(8))
        group = self.cta_group
        _asm(ctx, f"@$0 tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [$1], "
                  f"{self.columns};\n"
                  f"@$0 tcgen05.relinquish_alloc_permit.cta_group::{group}.sync.aligned;",
             "b,l,~{memory}", args=[self._warp0(ctx), slot])
        _asm(ctx, "tcgen05.fence::before_thread_sync;", "~{memory}")
        ctx.barrier()
        _asm(ctx, "tcgen05.fence::after_thread_sync;", "~{memory}")
        ctx.tmem_base = b.load(slot, name="tmem_base", typ=I32)

    def exit(self, ctx) -> None:
        """At the end of the kernel: every thread is done with tensor memory, warp 0 frees."""
        _asm(ctx, "tcgen05.fence::before_thread_sync;", "~{memory}")
        ctx.barrier()
        _asm(ctx, "tcgen05.fence::after_thread_sync;", "~{memory}")
        _asm(ctx, f"@$0 tcgen05.dealloc.cta_group::{self.cta_group}.sync.aligned.b32 $1, "
                  f"{self.columns};",
             "b,r,~{memory}", args=[self._warp0(ctx), ctx.tmem_base])


def _base(ctx, op):
    base = getattr(ctx, "tmem_base", None)
    if base is None:
        raise LoweringError("tensor memory used without the tensor_memory_allocation stage", op)
    return base


@lowering_rule(TmemAllocOp)
def lower_tmem_alloc(op, ctx):
    col = op.attrs.get(COL_OFFSET)
    if col is None:
        raise LoweringError("ttng.tmem_alloc has no col_offset: run the "
                            "tensor_memory_allocation stage", op)
    addr = ctx.builder.add(_base(ctx, op), ctx.i32(col))
    if op.operands:
        _store(ctx, op, addr, op.result.type, op.operands[0])
    return [addr]


@lowering_rule(TmemIndexOp)
def lower_tmem_index(op, ctx):
    src, idx = op.operands
    b = ctx.builder
    step = b.mul(ctx.get(idx), ctx.i32(buffer_columns(src.type)))
    return [b.add(ctx.get(src), step)]


@lowering_rule(TmemSubsliceOp)
def lower_tmem_subslice(op, ctx):
    cols = subslice_columns(op.operands[0].type, op.attrs["start"])
    return [ctx.builder.add(ctx.get(op.operands[0]), ctx.i32(cols))]


@lowering_rule(TmemReinterpretOp)
def lower_tmem_reinterpret(op, ctx):
    return [ctx.get(op.operands[0])]


# ---- tcgen05.ld / tcgen05.st ------------------------------------------------------------------

@dataclass(frozen=True)
class AccessPlan:
    reg_cols: Tuple[int, ...]    # per register index: its TMEM column (from the view start)
    reg_parts: Tuple[int, ...]   # ... and which 16- or 8-bit part of the column (0 for 32-bit)
    warp_cols: Tuple[int, ...]   # per warp bit past the first two: columns it adds
    split: int = 0               # 16x32bx2: lanes 16-31 read TMEM lanes 0-15, `split` on
    bits: int = 32

    @property
    def shape(self) -> str:
        return "16x32bx2" if self.split else "32x32b"

    def operand(self) -> str:
        """The immediate half-split offset 16x32bx2 takes after the address."""
        return f", {self.split}" if self.split else ""


def plan_access(reg_layout, mem_ty) -> AccessPlan:
    """The 32x32b (or 16x32bx2) access of a [M, N] view by `reg_layout` (ValueError when the
    layout is not one the shape moves without data exchange). Narrow elements travel packed
    in 32-bit registers, element `part` in bits [part * bits, (part + 1) * bits)."""
    shape, bits = tuple(mem_ty.shape), mem_ty.element.bits
    per = 32 // bits
    ll = to_linear_layout(reg_layout, list(shape))
    lanes, units, _ = cell_map(mem_ty.layout, shape, bits)

    def cell(v):
        return int(lanes[v[0], v[1]]), int(units[v[0], v[1]])

    def coords(in_dim):
        return [cell(v) for v in ll.bases.get(in_dim, [])]

    lanes_seen = coords("lane")
    split = 0
    if lanes_seen[:4] == [(1, 0), (2, 0), (4, 0), (8, 0)] and len(lanes_seen) == 5 and \
            lanes_seen[4][0] == 0 and lanes_seen[4][1] % per == 0 and lanes_seen[4][1]:
        # M = 64 data leaves TMEM lanes 16-31 empty: lanes 16-31 take the next columns.
        split = lanes_seen[4][1] // per
        lanes_seen = lanes_seen[:4] + [(16, 0)]
    want_lanes = [(1 << i, 0) for i in range(5)]
    # Warps 1 and 2 move lanes 32 and 64 on; MX scale factors have a copy in every quadrant,
    # so a warpgroup's four warps carry the same elements, each to its own copy.
    want_warps = [(0, 0), (0, 0)] if len(lane_copies(mem_ty.layout)) == 4 else \
        [(32, 0), (64, 0)]
    warps = coords("warp")
    if lanes_seen != want_lanes or warps[:2] != want_warps or \
            any(r or u % per for r, u in warps[2:]) or any(r for r, _ in coords("register")):
        raise ValueError(f"the register layout {reg_layout!r} is not the tcgen05.ld/st "
                         f"32x32b layout of this tensor memory (lane i on TMEM lane i, warps "
                         f"on lanes 32 and 64, registers along columns); use "
                         f"get_tmem_reg_layout(..., instr_variant='32x32b')")
    reg_units = [0]
    for _, u in coords("register"):
        reg_units += [x ^ u for x in reg_units]
    return AccessPlan(tuple(u // per for u in reg_units), tuple(u % per for u in reg_units),
                      tuple(u // per for _, u in warps[2:]), split, bits)


def _chunks(plan: AccessPlan) -> List[Tuple[int, List[Dict[int, int]]]]:
    """(first column, per column {part: register}) per instruction: runs of consecutive
    columns, a power of two long (at most MAX_X); replicated registers move once."""
    parts: Dict[int, Dict[int, int]] = {}
    for reg, (col, part) in enumerate(zip(plan.reg_cols, plan.reg_parts)):
        parts.setdefault(col, {}).setdefault(part, reg)
    cols = sorted(parts)
    out, i = [], 0
    while i < len(cols):
        n = 1
        while i + n < len(cols) and cols[i + n] == cols[i] + n and n < MAX_X:
            n += 1
        n = 1 << (n.bit_length() - 1)
        out.append((cols[i], [parts[c] for c in cols[i:i + n]]))
        i += n
    return out


def _from_access(plan: AccessPlan) -> MessagePlan:
    """The 32x32b / 16x32bx2 plan as messages."""
    messages = tuple(Message(plan.shape, 0, col, len(columns),
                             tuple(tuple(sorted(word.items())) for word in columns),
                             plan.split)
                     for col, columns in _chunks(plan))
    cells = tuple((0, c, p) for c, p in zip(plan.reg_cols, plan.reg_parts))
    return MessagePlan(messages, tuple((0, c) for c in plan.warp_cols), cells, plan.bits)


def plan_any(reg_layout, mem_ty) -> MessagePlan:
    """The messages of whichever tcgen05.ld/st shape `reg_layout` is (32x32b first)."""
    try:
        return _from_access(plan_access(reg_layout, mem_ty))
    except ValueError as exc:
        first = exc
    for shape in SHAPES:
        try:
            return plan_messages(reg_layout, mem_ty, shape)
        except ValueError:
            continue
    raise first


def _thread_addr(ctx, op, addr, plan: MessagePlan):
    """The view address plus this warp's lanes (32*(w%4) << 16) and extra warps' rows and
    columns."""
    b = ctx.builder
    warp = ctx.warp_id()
    first = ctx.partition_first_warp
    if first % 4:
        # The layout places the partition's warp 0 on lanes 0-31, but the hardware gives
        # warp `first` lanes 32*(first%4) on: the data would land on other rows.
        raise LoweringError(f"tensor memory is loaded or stored by a warp-specialized "
                            f"partition that starts at warp {first}; warp w reaches TMEM "
                            f"lanes 32*(w%4)..., so such a partition must start on a "
                            f"warpgroup (a multiple of 4 warps)", op)
    if first:  # a worker partition: the lane quadrant is the absolute warp's
        warp = b.add(warp, ctx.i32(first))
    lane_part = b.shl(b.and_(warp, ctx.i32(3)), ctx.i32(21))  # 32 * (w % 4) << 16
    addr = b.add(addr, lane_part)
    for j, (row, col) in enumerate(plan.warp_offsets):
        step = (row << 16) + col
        if step:
            bit = b.and_(b.lshr(warp, ctx.i32(2 + j)), ctx.i32(1))
            addr = b.add(addr, b.mul(bit, ctx.i32(step)))
    return addr


def _plan(ctx, op, reg_ty, mem_ty) -> MessagePlan:
    try:
        return plan_any(reg_ty.layout, mem_ty)
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None


def _message_addr(ctx, addr, msg: Message):
    return ctx.builder.add(addr, ctx.i32((msg.row0 << 16) + msg.col0))


def _split(msg: Message) -> str:
    """The immediate half-split offset 16x32bx2 takes after the address."""
    return f", {msg.split}" if msg.split else ""


@lowering_rule(TmemLoadOp)
def lower_tmem_load(op, ctx):
    from shared_codegen.ops.wgmma.lowering import _tie
    mem = op.operands[0]
    reg_ty = op.result.type
    plan = _plan(ctx, op, reg_ty, mem.type)
    b = ctx.builder
    # After the mbarrier wait that observed the MMA's completion (PTX ISA "tcgen05.fence").
    _asm(ctx, "tcgen05.fence::after_thread_sync;", "~{memory}")
    addr = _thread_addr(ctx, op, ctx.get(mem), plan)
    words, owners = [], []
    for msg in plan.messages:
        n = len(msg.words)
        outs = ",".join(f"${i}" for i in range(n))
        # One output comes back as the value itself (LLVM rejects a one-field struct).
        ret = I32 if n == 1 else ir.LiteralStructType([I32] * n)
        res = _asm(ctx, f"tcgen05.ld.sync.aligned.{msg.shape}.x{msg.reps}.b32 {{{outs}}}, "
                        f"[${n}]{_split(msg)};",
                   ",".join(["=r"] * n + ["r"]), ret, [_message_addr(ctx, addr, msg)])
        for i, parts in enumerate(msg.words):
            words.append(res if n == 1 else b.extract_value(res, i))
            owners.append(parts)
    words = _tie(ctx, words, "tcgen05.wait::ld.sync.aligned;")
    elem = ctx.llvm_type(reg_ty.element)
    narrow = ir.IntType(plan.bits)
    found = {}
    for word, parts in zip(words, owners):
        for part, reg in parts:
            x = word
            if plan.bits != 32:
                x = b.trunc(b.lshr(word, ctx.i32(part * plan.bits)), narrow)
            found[plan.reg_cells[reg]] = x if x.type == elem else b.bitcast(x, elem)
    return [[found[cell] for cell in plan.reg_cells]]


def _pack_word(ctx, regs, parts, bits: int):
    """One 32-bit TMEM word from the registers `parts` [(part, register)] of `bits` each.
    Packed lanes are built as a vector and bitcast (`mov.b32 {lo, hi}` in PTX), which lets
    ptxas fuse two fp32 -> fp16 conversions into one F2FP.PACK_AB; parts no element holds
    stay 0."""
    b = ctx.builder
    narrow = ir.IntType(bits)
    if not parts:
        return ctx.i32(0)
    if bits == 32:
        (_, reg), = parts
        x = regs[reg]
        return x if x.type == narrow else b.bitcast(x, narrow)
    lanes = 32 // bits
    vec = ir.Constant(ir.VectorType(narrow, lanes), [ir.Constant(narrow, 0)] * lanes)
    for part, reg in parts:
        x = regs[reg]
        x = x if x.type == narrow else b.bitcast(x, narrow)
        vec = b.insert_element(vec, x, ctx.i32(part))
    return b.bitcast(vec, I32)


def _store(ctx, op, addr, mem_ty, value, pred=None):
    plan = _plan(ctx, op, value.type, mem_ty)
    b = ctx.builder
    regs = ctx.get(value)
    addr = _thread_addr(ctx, op, addr, plan)
    for msg in plan.messages:
        n = len(msg.words)
        vals = []
        for parts in msg.words:  # pack the word's elements; parts no element holds stay 0
            vals.append(_pack_word(ctx, regs, parts, plan.bits))
        ins = ",".join(f"${i + 2}" for i in range(n))
        _asm(ctx, f"@$0 tcgen05.st.sync.aligned.{msg.shape}.x{msg.reps}.b32 "
                  f"[$1]{_split(msg)}, {{{ins}}};",
             ",".join(["b", "r"] + ["r"] * n) + ",~{memory}",
             args=[pred if pred is not None else ir.Constant(ir.IntType(1), 1),
                   _message_addr(ctx, addr, msg)] + vals)
    _asm(ctx, "tcgen05.wait::st.sync.aligned;", "~{memory}")


@lowering_rule(TmemStoreOp)
def lower_tmem_store(op, ctx):
    mem, value = op.operands[:2]
    pred = ctx.get(op.operands[2]) if len(op.operands) == 3 else None
    _store(ctx, op, ctx.get(mem), mem.type, value, pred)
    return []


__all__ = ["TensorMemoryLowering", "plan_access", "plan_any", "AccessPlan", "require_tcgen05"]
