"""The planner's shared-memory round trip: swizzled scratch, vectorized st.shared / ld.shared.

`plan_conversion` picks a scratch layout (`SharedSwizzle`: offset bit -> flattened element,
dim0 minor) that lets each thread move `store_vector` / `load_vector` consecutive elements per
instruction with the fewest bank conflicts. The layout is linear and bijective, so element ->
offset is linear too: one offset per element bit, and a register's offset is the XOR of its
constant part (register bits) and this thread's part (lane/warp bits, computed once).
PTX ISA 9.7.9.9 (st.shared.v2/.v4), 9.7.9.8 (ld), 9.7.13.1 (bar.sync).

Plans that need several rounds (`reps`) or stmatrix/ldmatrix are not handled here yet; the
caller then uses the padded round trip of `cross_thread.exchange_through_smem`.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from llvmlite import ir

from .cross_thread import (LANE, REGISTER, WARP, _i32, bases, from_storage, register_coords,
                           storage_bytes, storage_type, thread_coord_values, to_storage)


def _log2(n: int) -> int:
    return int(n).bit_length() - 1


def _element_to_offset(offset_bits, numel_log2: int) -> List[int]:
    """Offset of each flat element bit (the inverse of the swizzle's offset -> element)."""
    from gluon.layouts.bank_conflicts import inverse_table

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
    from gluon.layouts import LinearLayout

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


def _address(ctx, base, thread_off: ir.Value, const_off: int, thread_mask: int, st, b):
    if not const_off:
        idx = thread_off
    elif not thread_mask & const_off:
        idx = b.or_(thread_off, _i32(const_off))
    else:
        idx = b.xor(thread_off, _i32(const_off))
    return b.gep(base, [idx], source_etype=st)


def _thread_mask(off_ll) -> int:
    m = 0
    for dim in (LANE, WARP):
        for v in bases(off_ll, dim):
            m |= v[0]
    return m


def swizzled_round_trip(ctx, plan, src_ll, src_regs, dst_ll, shape,
                        lty: ir.Type) -> Optional[List[ir.Value]]:
    """Run the planner's `shared_memory` plan; None when it is a form not handled here."""
    shared = plan.shared
    sw = shared.swizzle
    if sw.reps or "matrix" in shared.store_instruction + shared.load_instruction:
        return None
    numel_log2 = sum(_log2(s) for s in shape)
    if len(sw.offset_bits) != numel_log2:
        return None
    offset_of = _OffsetMap(shape, _element_to_offset(sw.offset_bits, numel_log2))
    numel = 1 << numel_log2
    st = storage_type(lty)
    nbytes = storage_bytes(lty)
    b = ctx.builder
    base = ctx.request_shared(numel * nbytes)

    src_off = _offset_layout(src_ll, offset_of, numel)
    dst_off = _offset_layout(dst_ll, offset_of, numel)
    ctx.barrier()  # an earlier op may still be reading the scratch
    (src_thread,) = thread_coord_values(ctx, src_off)
    src_mask = _thread_mask(src_off)
    vec_bits = _vector_bits(src_off, shared.store_vector)
    for _, members, off in _accesses(src_off, vec_bits, skip_duplicates=True):
        addr = _address(ctx, base, src_thread, off, src_mask, st, b)
        if len(members) == 1:
            b.store(to_storage(b, src_regs[members[0]]), addr, align=nbytes)
            continue
        vty = ir.VectorType(st, len(members))
        v = ir.Constant(vty, ir.Undefined)
        for k, r in enumerate(members):
            v = b.insert_element(v, to_storage(b, src_regs[r]), _i32(k))
        b.store(v, addr, align=nbytes * len(members))
    ctx.barrier()

    (dst_thread,) = thread_coord_values(ctx, dst_off)
    dst_mask = _thread_mask(dst_off)
    vec_bits = _vector_bits(dst_off, shared.load_vector)
    by_offset: Dict[int, ir.Value] = {}
    for _, members, off in _accesses(dst_off, vec_bits, skip_duplicates=True):
        addr = _address(ctx, base, dst_thread, off, dst_mask, st, b)
        if len(members) == 1:
            by_offset[off] = from_storage(b, b.load(addr, typ=st, align=nbytes), lty)
            continue
        vty = ir.VectorType(st, len(members))
        v = b.load(addr, typ=vty, align=nbytes * len(members))
        for k in range(len(members)):
            by_offset[off ^ k] = from_storage(b, b.extract_element(v, _i32(k)), lty)
    reg_offsets = [offset_of(c) for c in register_coords(dst_ll)]
    return [by_offset[o] for o in reg_offsets]

