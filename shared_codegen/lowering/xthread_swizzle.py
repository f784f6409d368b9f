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

`bar.sync` (PTX ISA 9.7.13.1) before each round's stores (an earlier op or round may still be
reading the scratch) and between its stores and loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from llvmlite import ir

from .context import I32, VOID
from .cross_thread import (LANE, REGISTER, WARP, _i32, bases, from_storage, register_coords,
                           storage_bytes, storage_type, thread_coord_values, to_storage)
from .xthread_shuffle import from_bits, pack_words, to_bits, unpack_words

ROW_ELEMENTS = 8            # one 16-byte row of an 8x8 b16 matrix
STMATRIX_ARCH, LDMATRIX_ARCH = 90, 75


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


def _thread_mask(off_ll) -> int:
    m = 0
    for dim in (LANE, WARP):
        for v in bases(off_ll, dim):
            m |= v[0]
    return m


# ---- one side of the round trip, planned in pure Python ------------------------------------

@dataclass(frozen=True)
class Access:
    round: int                 # which scratch round (the reps bits of its offset)
    offset: int                # constant offset in the scratch, in elements
    regs: Tuple[int, ...]      # plain: the vector's registers in offset order; matrix:
    #                            2 per matrix (word i = regs[2i] low half, regs[2i+1] high)
    full_offset: int           # offset with the reps bits (names the registers on the dst)


@dataclass(frozen=True)
class SidePlan:
    kind: str                  # "plain" or "matrix"
    accesses: Tuple[Access, ...]
    thread_ll: object          # 1-D layout of this thread's offset part (lane, warp)
    thread_mask: int
    width: int                 # plain: elements per access; matrix: matrices (1, 2, 4)
    trans: bool = False

    def instruction(self, op: str, bits: int) -> str:
        """The PTX spelling this side emits (compare with the plan's)."""
        if self.kind == "matrix":
            return f"{op}matrix{'.trans' if self.trans else ''}.x{self.width}.b16"
        total = self.width * bits
        if total > 32:
            return f"{op}.shared.v{total // 32}.b32"
        return f"{op}.shared.b{total}"


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


def _matrix_side(ll, off_ll, trans: bool, scratch_log2: int) -> Optional[SidePlan]:
    """Accesses of stmatrix/ldmatrix (see the module docstring) for this side's layout."""
    from gluon.layouts import LinearLayout

    reg_vecs = bases(ll, REGISTER)
    lane_vecs = bases(ll, LANE)
    reg_off = [v[0] for v in bases(off_ll, REGISTER)]
    lane_off = [v[0] for v in bases(off_ll, LANE)]
    warp_off = [v[0] for v in bases(off_ll, WARP)]
    real = [i for i, v in enumerate(reg_vecs) if any(v)]
    if len(lane_vecs) != 5 or not all(any(v) for v in lane_vecs) or not real:
        return None
    r0 = real[0]
    if trans:
        row, addr = lane_off[2:5], [reg_off[r0]] + lane_off[0:2]
    else:
        row, addr = [reg_off[r0]] + lane_off[0:2], lane_off[2:5]
    if row != [1, 2, 4]:
        return None
    # The matrices of one instruction are told apart by two more registers. They must be in
    # the same round (no reps bits: the lane gives their address), so registers that are
    # rounds go to the outer loop even where the plan counted them as matrices.
    rest = real[1:]
    mats = [i for i in rest if not reg_off[i] >> scratch_log2][:2]
    outer = [i for i in rest if i not in mats]
    lane_addr = addr + [reg_off[m] for m in mats] + [0] * (2 - len(mats))
    low = (1 << scratch_log2) - 1
    # Every row must start on a 16-byte boundary, inside this round's buffer.
    thread_parts = lane_addr + warp_off
    if any(o % ROW_ELEMENTS for o in thread_parts + [reg_off[o] for o in outer]):
        return None
    if any(o >> scratch_log2 for o in thread_parts):
        return None
    thread_ll = LinearLayout({REGISTER: [], LANE: [(o,) for o in lane_addr],
                              WARP: [(o,) for o in warp_off]},
                             list(off_ll.out_dim_sizes.items()), require_surjective=False)
    mask = 0
    for o in thread_parts:
        mask |= o
    accesses = []
    for k in range(1 << len(outer)):
        reg, off = 0, 0
        for j, bit in enumerate(outer):
            if k >> j & 1:
                reg |= 1 << bit
                off ^= reg_off[bit]
        regs = []
        for i in range(1 << len(mats)):
            r = reg
            for j, bit in enumerate(mats):
                if i >> j & 1:
                    r |= 1 << bit
            regs += [r, r | 1 << r0]
        accesses.append(Access(off >> scratch_log2, off & low, tuple(regs), off))
    return SidePlan("matrix", tuple(accesses), thread_ll, mask, 1 << len(mats), trans)


def _arch(ctx) -> int:
    target = getattr(ctx, "target", "sm_90a")
    digits = "".join(ch for ch in target.split("_")[-1] if ch.isdigit())
    return int(digits) if digits else 0


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
            side = _matrix_side(ll, off, ".trans" in name, scratch_log2)
        else:
            side = _plain_side(off, vec, scratch_log2, skip_duplicates=True)
        if side is None:
            return None
        sides.append(side)
    return sides[0], sides[1], offset_of, scratch_log2


# ---- emission ------------------------------------------------------------------------------

def _address(b, base, thread_off: ir.Value, const_off: int, thread_mask: int, st):
    if not const_off:
        idx = thread_off
    elif not thread_mask & const_off:
        idx = b.or_(thread_off, _i32(const_off))
    else:
        idx = b.xor(thread_off, _i32(const_off))
    return b.gep(base, [idx], source_etype=st)


def _word_type(st: ir.Type, count: int, nbytes: int) -> ir.Type:
    """What a plain access moves: whole 32-bit words when it is at least one, so the PTX is
    `st.shared.vN.b32` with N the plan's; else the element (or a 16-bit pair of bytes)."""
    total = count * nbytes * 8
    if total >= 32:
        return I32 if total == 32 else ir.VectorType(I32, total // 32)
    return st if count == 1 else ir.IntType(total)


def _store_plain(ctx, side: SidePlan, acc: Access, base, src_regs, st, nbytes, thread_off):
    b = ctx.builder
    addr = _address(b, base, thread_off, acc.offset, side.thread_mask, st)
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
    addr = _address(b, base, thread_off, acc.offset, side.thread_mask, st)
    if len(acc.regs) == 1:
        return {acc.full_offset: from_storage(b, b.load(addr, typ=st, align=nbytes), lty)}
    wty = _word_type(st, len(acc.regs), nbytes)
    words = b.load(addr, typ=wty, align=nbytes * len(acc.regs))
    # (LLVM may respell a load of 32-bit words feeding 16-bit uses as `ld.shared.vN.b16`:
    # the same bytes per access.)
    vec = b.bitcast(words, ir.VectorType(st, len(acc.regs)))
    vals = [b.extract_element(vec, _i32(k)) for k in range(len(acc.regs))]
    return {acc.full_offset ^ k: from_storage(b, v, lty) for k, v in enumerate(vals)}


def _matrix_name(op: str, side: SidePlan) -> str:
    return (f"llvm.nvvm.{op}matrix.sync.aligned.m8n8.x{side.width}"
            f"{'.trans' if side.trans else ''}.b16.p3")


def _store_matrix(ctx, side: SidePlan, acc: Access, base, src_regs, st, thread_off):
    b = ctx.builder
    addr = _address(b, base, thread_off, acc.offset, side.thread_mask, st)
    words = []
    for i in range(side.width):
        pair = [to_bits(b, src_regs[r], 16) for r in acc.regs[2 * i: 2 * i + 2]]
        words += pack_words(b, pair, 16)
    ctx.intrinsic(_matrix_name("st", side), VOID, [addr] + words)


def _load_matrix(ctx, side: SidePlan, acc: Access, base, st, thread_off, lty
                 ) -> Dict[int, ir.Value]:
    """ldmatrix; returns {register: value} (registers, not offsets, name matrix results)."""
    b = ctx.builder
    addr = _address(b, base, thread_off, acc.offset, side.thread_mask, st)
    n = side.width
    ret = I32 if n == 1 else ir.LiteralStructType([I32] * n)
    got = ctx.intrinsic(_matrix_name("ld", side), ret, [addr])
    out = {}
    for i in range(n):
        word = got if n == 1 else b.extract_value(got, i)
        lo, hi = unpack_words(b, [word], 16, 2)
        out[acc.regs[2 * i]] = from_bits(b, lo, lty)
        out[acc.regs[2 * i + 1]] = from_bits(b, hi, lty)
    return out


def swizzled_round_trip(ctx, plan, src_ll, src_regs, dst_ll, shape,
                        lty: ir.Type) -> Optional[List[ir.Value]]:
    """Run the planner's `shared_memory` plan; None when it is a form not handled here."""
    sides = plan_sides(plan, src_ll, dst_ll, shape, _arch(ctx))
    if sides is None:
        return None
    store, load, offset_of, scratch_log2 = sides
    st = storage_type(lty)
    nbytes = storage_bytes(lty)
    if store.kind == "matrix" or load.kind == "matrix":
        if nbytes != 2:
            return None
    b = ctx.builder
    base = ctx.request_shared((1 << scratch_log2) * nbytes)
    (src_thread,) = thread_coord_values(ctx, store.thread_ll)
    (dst_thread,) = thread_coord_values(ctx, load.thread_ll)
    by_offset: Dict[int, ir.Value] = {}
    by_register: Dict[int, ir.Value] = {}
    rounds = 1 << len(plan.shared.swizzle.reps)
    for rnd in range(rounds):
        ctx.barrier()  # an earlier op (or round) may still be reading the scratch
        for acc in store.accesses:
            if acc.round != rnd:
                continue
            if store.kind == "matrix":
                _store_matrix(ctx, store, acc, base, src_regs, st, src_thread)
            else:
                _store_plain(ctx, store, acc, base, src_regs, st, nbytes, src_thread)
        ctx.barrier()
        for acc in load.accesses:
            if acc.round != rnd:
                continue
            if load.kind == "matrix":
                by_register.update(_load_matrix(ctx, load, acc, base, st, dst_thread, lty))
            else:
                by_offset.update(_load_plain(ctx, load, acc, base, st, nbytes, dst_thread,
                                             lty))
    if load.kind == "matrix":
        # Broadcast registers (zero bases) copy the register with those bits cleared.
        bmask = 0
        for bit, v in enumerate(bases(dst_ll, REGISTER)):
            if not any(v):
                bmask |= 1 << bit
        return [by_register[r & ~bmask] for r in range(len(register_coords(dst_ll)))]
    return [by_offset[offset_of(c)] for c in register_coords(dst_ll)]
