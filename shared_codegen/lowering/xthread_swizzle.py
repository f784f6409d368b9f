"""The planner's shared-memory round trip: swizzled scratch, vector ld/st or stmatrix/ldmatrix.

`plan_conversion` picks a scratch layout (`SharedSwizzle`: offset bit -> flattened element,
dim0 minor) and an instruction per side. The layout is linear and bijective, so element ->
offset is linear too: one offset per element bit, and a register's offset is the XOR of its
constant part (register bits) and this thread's part (lane/warp bits, computed once).

Offsets past the scratch (`swizzle.reps` bits) are rounds: those bits are registers on both
sides, so each round stores and loads a subset of the registers through a buffer
`2**len(reps)` times smaller, with a barrier between rounds.

Per side, one of two instruction shapes (both checked against the plan's promise):

- plain: `st.shared.vN.b32` / `ld.shared.vN.b32` (PTX ISA 9.7.9.9 st, 9.7.9.8 ld) of the
  plan's vector width; the elements are packed into 32-bit words first, so the width in the
  PTX is exactly the plan's (LLVM may otherwise split odd element vectors).
- matrix: `stmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` (PTX ISA 9.7.14.5.16, sm_90)
  and `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` (9.7.14.5.15, sm_75): a warp moves
  up to four 8x8 b16 matrices; lane `8i + j` gives the address of row `j` of matrix `i`, and
  lane `T`'s word `i` holds matrix `i`'s elements `(T / 4, 2 (T % 4) + e)`, e in the low /
  high half. The plan's row (16 contiguous bytes) is (register 0, lane 0, lane 1) in the
  plain form and lanes (2, 3, 4) in `.trans`; the other three of those six bases pick the row.
  Planning and emission live in `smem_matrix.py` (shared with local_load / local_store).

`bar.sync` (PTX ISA 9.7.13.1) before each later round's stores (the one before may still be
reading the scratch; before the first, `claim_scratch` decides) and between its stores and
loads.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from llvmlite import ir

from shared_codegen.lowering.context import I32
from shared_codegen.lowering.scratch import claim_scratch
from shared_codegen.lowering.cross_thread import (LANE, REGISTER, WARP, _i32, bases, from_storage,
                                                  register_coords, storage_bytes, storage_type,
                                                  thread_coord_values, to_storage)
from shared_codegen.lowering.smem_matrix import (LDMATRIX_ARCH, STMATRIX_ARCH, Access, SidePlan,
                                                 address, arch_of, gather_registers, load_matrix,
                                                 matrix_side, store_matrix)


def _log2(n: int) -> int:
    return int(n).bit_length() - 1


def _element_to_offset(offset_bits, numel_log2: int) -> List[int]:
    """Offset of each flat element bit (the inverse of the swizzle's offset -> element)."""
    from shared_codegen.layouts.bank_conflicts import inverse_table

    table = inverse_table(offset_bits, numel_log2)
    return [int(table[1 << j]) for j in range(numel_log2)]


class _OffsetMap:
    """Element coordinates -> scratch offset (in elements), linear over GF(2)."""

    def __init__(self, shape, elem_off: List[int]):
        self.shifts = []
        shift = 0
        for s in shape:
            self.shifts.append(shift)
            shift += _log2(s)
        self.elem_off = elem_off

    def __call__(self, coords) -> int:
        flat = 0
        for c, s in zip(coords, self.shifts):
            flat |= int(c) << s
        out, j = 0, 0
        while flat:
            if flat & 1:
                out ^= self.elem_off[j]
            flat >>= 1
            j += 1
        return out


def _offset_layout(ll, offset_of, numel: int):
    """A 1-D layout giving each register/lane/warp bit's scratch offset."""
    from shared_codegen.layouts import LinearLayout

    new = {dim: [(offset_of(v),) for v in vecs] for dim, vecs in ll.bases.items()}
    return LinearLayout(new, [("dim0", numel)], require_surjective=False)


def _vector_bits(off_ll, want: int) -> List[int]:
    """Register bits whose offsets are 1, 2, 4, ... (up to `want` elements), shortened until
    every other bit keeps the vector aligned."""
    reg = bases(off_ll, REGISTER)
    chosen: List[int] = []
    while (1 << len(chosen)) < want:
        target = 1 << len(chosen)
        hit = [bit for bit, v in enumerate(reg) if v[0] == target]
        if not hit:
            break
        chosen.append(hit[0])
    while chosen:
        mask = (1 << len(chosen)) - 1
        others = [v[0] for bit, v in enumerate(reg) if bit not in chosen]
        others += [v[0] for dim in (LANE, WARP) for v in bases(off_ll, dim)]
        if all(not (o & mask) for o in others):
            break
        chosen.pop()
    return chosen


def _accesses(off_ll, vec_bits: List[int], skip_duplicates: bool):
    """[(base register, [registers of the vector, in offset order], constant offset)]."""
    reg = bases(off_ll, REGISTER)
    n = 1 << len(reg)
    vec_mask = sum(1 << b for b in vec_bits)
    seen = set()
    out = []
    for r in range(n):
        if r & vec_mask:
            continue
        members = []
        for k in range(1 << len(vec_bits)):
            rr = r
            for j, b in enumerate(vec_bits):
                if k >> j & 1:
                    rr |= 1 << b
            members.append(rr)
        off = 0
        for bit, v in enumerate(reg):
            if r >> bit & 1:
                off ^= v[0]
        if skip_duplicates and off in seen:
            continue
        seen.add(off)
        out.append((r, members, off))
    return out


def _thread_mask(off_ll) -> int:
    m = 0
    for dim in (LANE, WARP):
        for v in bases(off_ll, dim):
            m |= v[0]
    return m


# ---- one side of the round trip, planned in pure Python ------------------------------------

def _plain_side(off_ll, want: int, scratch_log2: int, skip_duplicates: bool
                ) -> Optional[SidePlan]:
    mask = _thread_mask(off_ll)
    if mask >> scratch_log2:
        return None   # a round would depend on the lane: not a layout this path runs
    # Never wider than planned; narrower only if the registers do not line up (tests check
    # that the plan's width is what comes out).
    vec_bits = _vector_bits(off_ll, want)
    low = (1 << scratch_log2) - 1
    accesses = tuple(Access(off >> scratch_log2, off & low, tuple(members), off)
                     for _, members, off in _accesses(off_ll, vec_bits, skip_duplicates))
    return SidePlan("plain", accesses, off_ll, mask, 1 << len(vec_bits))


def plan_sides(plan, src_ll, dst_ll, shape, arch: int = 90):
    """(store side, load side, offset map, scratch log2) for a `shared_memory` plan, or None
    when a side cannot run as planned here (the caller then takes the padded round trip)."""
    shared = plan.shared
    sw = shared.swizzle
    numel_log2 = sum(_log2(s) for s in shape)
    if len(sw.all_bits()) != numel_log2:
        return None
    offset_of = _OffsetMap(shape, _element_to_offset(sw.all_bits(), numel_log2))
    scratch_log2 = len(sw.offset_bits)
    numel = 1 << numel_log2
    src_off = _offset_layout(src_ll, offset_of, numel)
    dst_off = _offset_layout(dst_ll, offset_of, numel)
    sides = []
    for ll, off, name, vec, need in ((src_ll, src_off, shared.store_instruction,
                                      shared.store_vector, STMATRIX_ARCH),
                                     (dst_ll, dst_off, shared.load_instruction,
                                      shared.load_vector, LDMATRIX_ARCH)):
        if "matrix" in name:
            if plan.bits != 16 or arch < need:
                return None
            side = matrix_side(off, ".trans" in name, scratch_log2)
        else:
            side = _plain_side(off, vec, scratch_log2, skip_duplicates=True)
        if side is None:
            return None
        sides.append(side)
    return sides[0], sides[1], offset_of, scratch_log2


# ---- emission ------------------------------------------------------------------------------

def _word_type(st: ir.Type, count: int, nbytes: int) -> ir.Type:
    """What a plain access moves: whole 32-bit words when it is at least one, so the PTX is
    `st.shared.vN.b32` with N the plan's; else the element (or a 16-bit pair of bytes)."""
    total = count * nbytes * 8
    if total >= 32:
        return I32 if total == 32 else ir.VectorType(I32, total // 32)
    return st if count == 1 else ir.IntType(total)


def _store_plain(ctx, side: SidePlan, acc: Access, base, src_regs, st, nbytes, thread_off):
    b = ctx.builder
    addr = address(b, base, thread_off, acc.offset, side.thread_mask, st)
    if len(acc.regs) == 1:
        b.store(to_storage(b, src_regs[acc.regs[0]]), addr, align=nbytes)
        return
    vec = ir.Constant(ir.VectorType(st, len(acc.regs)), ir.Undefined)
    for k, r in enumerate(acc.regs):
        vec = b.insert_element(vec, to_storage(b, src_regs[r]), _i32(k))
    b.store(b.bitcast(vec, _word_type(st, len(acc.regs), nbytes)), addr,
            align=nbytes * len(acc.regs))


def _load_plain(ctx, side: SidePlan, acc: Access, base, st, nbytes, thread_off, lty
                ) -> Dict[int, ir.Value]:
    b = ctx.builder
    addr = address(b, base, thread_off, acc.offset, side.thread_mask, st)
    if len(acc.regs) == 1:
        return {acc.full_offset: from_storage(b, b.load(addr, typ=st, align=nbytes), lty)}
    wty = _word_type(st, len(acc.regs), nbytes)
    words = b.load(addr, typ=wty, align=nbytes * len(acc.regs))
    # (LLVM may respell a load of 32-bit words feeding 16-bit uses as `ld.shared.vN.b16`:
    # the same bytes per access.)
    vec = b.bitcast(words, ir.VectorType(st, len(acc.regs)))
    vals = [b.extract_element(vec, _i32(k)) for k in range(len(acc.regs))]
    return {acc.full_offset ^ k: from_storage(b, v, lty) for k, v in enumerate(vals)}


def swizzled_round_trip(ctx, plan, src_ll, src_regs, dst_ll, shape,
                        lty: ir.Type) -> Optional[List[ir.Value]]:
    """Run the planner's `shared_memory` plan; None when it is a form not handled here."""
    sides = plan_sides(plan, src_ll, dst_ll, shape, arch_of(ctx))
    if sides is None:
        return None
    store, load, offset_of, scratch_log2 = sides
    st = storage_type(lty)
    nbytes = storage_bytes(lty)
    if store.kind == "matrix" or load.kind == "matrix":
        if nbytes != 2:
            return None
    b = ctx.builder
    base = claim_scratch(ctx, (1 << scratch_log2) * nbytes)
    (src_thread,) = thread_coord_values(ctx, store.thread_ll)
    (dst_thread,) = thread_coord_values(ctx, load.thread_ll)
    by_offset: Dict[int, ir.Value] = {}
    by_register: Dict[int, ir.Value] = {}
    rounds = 1 << len(plan.shared.swizzle.reps)
    for rnd in range(rounds):
        if rnd:
            ctx.barrier()  # the previous round may still be reading the scratch
        for acc in store.accesses:
            if acc.round != rnd:
                continue
            if store.kind == "matrix":
                addr = address(b, base, src_thread, acc.offset, store.thread_mask, st)
                store_matrix(ctx, store, acc, addr, src_regs)
            else:
                _store_plain(ctx, store, acc, base, src_regs, st, nbytes, src_thread)
        ctx.barrier()
        for acc in load.accesses:
            if acc.round != rnd:
                continue
            if load.kind == "matrix":
                addr = address(b, base, dst_thread, acc.offset, load.thread_mask, st)
                by_register.update(load_matrix(ctx, load, acc, addr, lty))
            else:
                by_offset.update(_load_plain(ctx, load, acc, base, st, nbytes, dst_thread,
                                             lty))
    if load.kind == "matrix":
        return gather_registers(by_register, dst_ll)
    return [by_offset[offset_of(c)] for c in register_coords(dst_ll)]
