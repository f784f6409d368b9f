"""tt.scan lowering: an inclusive scan along one axis, read off the operand's linear layout.

Each axis coordinate bit comes from exactly one register, lane or warp bit (a basis that moves
only along the axis by a power of two). Listing those bits from the lowest axis bit up must
give the blocked-layout pattern

    register* (a chunk held by one thread)  lane*  warp*  register* (repetitions)

which is what blocked, slice and MMA layouts give. The scan then runs in four steps (the same
plan as Triton's ScanOpToLLVM, written against bits instead of layout parameters):

1. in the thread, sequentially over each chunk;
2. across lanes, a Hillis-Steele scan of chunk totals with `shfl.sync.idx` (PTX ISA 9.7.9.6),
   then each chunk is offset by the previous lanes' total (one more shuffle);
3. across warps, each warp's total goes to shared memory (st.shared, bar.sync, ld.shared:
   PTX ISA 9.7.9.9 / 9.7.13.1 / 9.7.9.8), every thread loads all warp totals of its rows and
   combines the ones before its warp;
4. across repetitions, a running carry of whole-block totals, in the thread.

`reverse` scans from the high end: the same steps with "before" meaning "after".
Lanes run every shuffle unconditionally (shfl.sync needs all lanes of the mask) and discard
what they must not use with a select.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import TensorType
from shared_codegen.lowering.context import LoweringError
from shared_codegen.lowering.scratch import claim_scratch
from shared_codegen.lowering.cross_thread import (LANE, REGISTER, WARP, _combine, _i32, bases,
                                                  check_axis_separable, element_coord_values,
                                                  linear_index, map_layout, register_coords,
                                                  smem_load, smem_store, storage_bytes,
                                                  thread_bits_value)
from shared_codegen.ops.reduction.definition import ScanOp


def _axis_bit_plan(ll, axis: int, size: int):
    """[(in_dim, bit)] per axis coordinate bit, lowest first; raises if a bit is missing or
    the layout is not a chunk/lane/warp/repetition stack."""
    n = size.bit_length() - 1
    owner: List = [None] * n
    for in_dim in (REGISTER, LANE, WARP):
        for bit, vec in enumerate(bases(ll, in_dim)):
            c = vec[axis]
            if not c or any(x for d, x in enumerate(vec) if d != axis):
                continue
            if c & (c - 1):
                raise LoweringError(f"tt.scan: {in_dim} bit {bit} moves {c} along the axis, "
                                    f"not a power of two; convert_layout to a blocked layout")
            owner[c.bit_length() - 1] = (in_dim, bit)
    if any(o is None for o in owner):
        raise LoweringError("tt.scan: the layout does not cover the scanned axis")
    order = [o[0] for o in owner]
    i = 0
    stages = {REGISTER: [], LANE: [], WARP: [], "rep": []}
    while i < n and order[i] == REGISTER:
        stages[REGISTER].append(owner[i])
        i += 1
    for name in (LANE, WARP):
        while i < n and order[i] == name:
            stages[name].append(owner[i])
            i += 1
    while i < n and order[i] == REGISTER:
        stages["rep"].append(owner[i])
        i += 1
    if i != n:
        raise LoweringError(f"tt.scan: axis bits come from {order} (lowest first); only "
                            f"registers, then lanes, then warps, then registers are supported")
    return stages


def _compress(value: int, positions: Sequence[int]) -> int:
    return sum(((value >> p) & 1) << j for j, p in enumerate(positions))


def _select(b: ir.IRBuilder, cond, a: Sequence[ir.Value], other: Sequence[ir.Value]):
    return [b.select(cond, x, y) for x, y in zip(a, other)]


@lowering_rule(ScanOp)
def lower_scan(op, ctx):
    """tt.scan: see the module docstring for the four steps."""
    axis = op.attrs["axis"]
    reverse = bool(op.attrs.get("reverse", False))
    ty: TensorType = op.operands[0].type
    ll = ctx.linear_layout(ty)
    check_axis_separable(ll, axis, "tt.scan")
    stages = _axis_bit_plan(ll, axis, ty.shape[axis])
    block = op.regions[0].block
    operands = [ctx.get(v) for v in op.operands]
    ltys = [ctx.llvm_type(v.type.element) for v in op.operands]

    def combine(acc, new):
        return _combine(ctx, block, acc, new)

    # Axis-coordinate bit positions of the chunk and repetition register bits.
    reg_bases = bases(ll, REGISTER)
    chunk_pos = [reg_bases[bit][axis].bit_length() - 1 for _, bit in stages[REGISTER]]
    rep_pos = [reg_bases[bit][axis].bit_length() - 1 for _, bit in stages["rep"]]
    n_chunk, n_rep = 1 << len(chunk_pos), 1 << len(rep_pos)

    # table[key][q][c] = register holding (row key, repetition q, chunk element c).
    coords = register_coords(ll)
    table: Dict[tuple, List[List]] = {}
    first: Dict[tuple, int] = {}
    for r, c in enumerate(coords):
        if c in first:
            continue
        first[c] = r
        key = c[:axis] + c[axis + 1:]
        rows = table.setdefault(key, [[None] * n_chunk for _ in range(n_rep)])
        rows[_compress(c[axis], rep_pos)][_compress(c[axis], chunk_pos)] = r
    if any(r is None for rows in table.values() for row in rows for r in row):
        raise LoweringError("tt.scan: registers do not tile the axis (unsupported layout)")
    chunk_order = list(range(n_chunk))[::-1] if reverse else list(range(n_chunk))
    rep_order = list(range(n_rep))[::-1] if reverse else list(range(n_rep))
    vals = {r: [regs[r] for regs in operands] for r in first.values()}

    # Step 1: sequential scan of each chunk.
    for rows in table.values():
        for row in rows:
            acc = None
            for c in chunk_order:
                r = row[c]
                acc = vals[r] if acc is None else combine(acc, vals[r])
                vals[r] = acc
    last_c = chunk_order[-1]
    # The (pre-carry) total of each (key, q) block over everything below the repetitions.
    totals = {(key, q): vals[rows[q][last_c]] for key, rows in table.items()
              for q in range(n_rep)}

    # Step 2: Hillis-Steele over the lanes along the axis.
    lane_bits = [bit for _, bit in stages[LANE]]
    if lane_bits:
        totals = _scan_lanes(ctx, ll, table, vals, totals, lane_bits, last_c, reverse,
                             combine)

    # Step 3: warp totals through shared memory.
    warp_bits = [bit for _, bit in stages[WARP]]
    if warp_bits:
        totals = _scan_warps(ctx, op, ll, axis, table, vals, totals, lane_bits, warp_bits,
                             n_rep, ltys, reverse, combine)

    # Step 4: carry whole-block totals across repetitions, in the thread.
    if n_rep > 1:
        for key, rows in table.items():
            carry = None
            for q in rep_order:
                if carry is not None:
                    for r in rows[q]:
                        vals[r] = combine(carry, vals[r])
                carry = totals[(key, q)] if carry is None else combine(carry, totals[(key, q)])

    out = [[None] * len(coords) for _ in operands]
    for r, c in enumerate(coords):
        v = vals[first[c]]
        for i in range(len(operands)):
            out[i][r] = v[i]
    return out


def _lane_of(b, ctx, lane_bits, index: ir.Value) -> ir.Value:
    """The lane id whose axis bits spell `index` and whose other bits are this lane's."""
    mask = 0
    for bit in lane_bits:
        mask |= 1 << bit
    keep = b.and_(ctx.lane_id(), _i32(~mask))
    n = len(lane_bits)
    if lane_bits == list(range(lane_bits[0], lane_bits[0] + n)):
        spread = b.and_(index, _i32((1 << n) - 1))
        if lane_bits[0]:
            spread = b.shl(spread, _i32(lane_bits[0]))
    else:
        spread = None
        for j, bit in enumerate(lane_bits):
            one = b.and_(b.lshr(index, _i32(j)), _i32(1)) if j else b.and_(index, _i32(1))
            piece = b.shl(one, _i32(bit)) if bit else one
            spread = piece if spread is None else b.or_(spread, piece)
    return b.or_(keep, spread)


def _scan_lanes(ctx, ll, table, vals, totals, lane_bits, last_c, reverse, combine):
    """Step 2 of `lower_scan`; returns the per-(key, q) totals over the lanes."""
    b = ctx.builder
    n_lanes = 1 << len(lane_bits)
    idx = thread_bits_value(b, ctx, ll, [(LANE, bit) for bit in lane_bits])
    new_totals = {}
    for (key, q), total in totals.items():
        acc = total
        for k in range(len(lane_bits)):
            step = 1 << k
            if reverse:
                src = b.add(idx, _i32(step))
                valid = b.icmp_unsigned("<", src, _i32(n_lanes))
            else:
                src = b.sub(idx, _i32(step))
                valid = b.icmp_unsigned(">=", idx, _i32(step))
            lane = _lane_of(b, ctx, lane_bits, src)
            other = [ctx.shuffle_idx(v, lane) for v in acc]
            acc = _select(b, valid, combine(other, acc), acc)
        # Exclusive prefix: the inclusive result of the previous lane along the scan.
        prev = b.add(idx, _i32(1)) if reverse else b.sub(idx, _i32(1))
        prev_lane = _lane_of(b, ctx, lane_bits, prev)
        excl = [ctx.shuffle_idx(v, prev_lane) for v in acc]
        has_prev = b.icmp_unsigned("!=", idx, _i32(n_lanes - 1 if reverse else 0))
        for r in table[key][q]:
            vals[r] = _select(b, has_prev, combine(excl, vals[r]), vals[r])
        end_lane = _lane_of(b, ctx, lane_bits, _i32(0 if reverse else n_lanes - 1))
        new_totals[(key, q)] = [ctx.shuffle_idx(v, end_lane) for v in acc]
    return new_totals


def _scan_warps(ctx, op, ll, axis, table, vals, totals, lane_bits, warp_bits, n_rep, ltys,
                reverse, combine):
    """Step 3 of `lower_scan`; returns the per-(key, q) totals over the warps."""
    b = ctx.builder
    n_warps = 1 << len(warp_bits)
    shape = op.operands[0].type.shape
    out_shape = tuple(s for d, s in enumerate(shape) if d != axis)
    n_out = 1
    for s in out_shape:
        n_out *= s
    offsets, total_bytes = [], 0
    for lty in ltys:
        offsets.append(total_bytes)
        total_bytes += -(-n_warps * n_rep * n_out * storage_bytes(lty) // 16) * 16
    widx = thread_bits_value(b, ctx, ll, [(WARP, bit) for bit in warp_bits])
    row_ll = map_layout(ll, lambda c: c[:axis] + c[axis + 1:], out_shape)

    def slot(warp: ir.Value, q: int, key) -> ir.Value:
        row = linear_index(b, element_coord_values(ctx, row_ll, key), out_shape)
        block = b.add(b.mul(warp, _i32(n_rep)), _i32(q)) if n_rep > 1 else warp
        return b.add(b.mul(block, _i32(n_out)), row) if n_out > 1 else block

    # One lane per group of lanes holding the same total stores it.
    lane_mask = ll.get_free_variable_masks().get(LANE, 0)
    for bit in lane_bits:
        lane_mask |= 1 << bit
    base = claim_scratch(ctx, total_bytes)
    pred = b.icmp_unsigned("==", b.and_(ctx.lane_id(), _i32(lane_mask)), _i32(0)) \
        if lane_mask else None

    def store():
        for (key, q), total in totals.items():
            s = slot(widx, q, key)
            for v, off in zip(total, offsets):
                smem_store(ctx, base, s, v, off)

    if pred is not None:
        with b.if_then(pred):
            store()
    else:
        store()
    ctx.barrier()

    warp_order = list(range(n_warps))[::-1] if reverse else list(range(n_warps))
    new_totals = {}
    for (key, q) in totals:
        loaded = [[smem_load(ctx, base, slot(_i32(w), q, key), lty, off)
                   for lty, off in zip(ltys, offsets)] for w in range(n_warps)]
        # prefix[w]: combination of the warps before w in scan order (None for the first).
        prefix: Dict[int, List] = {}
        acc = None
        for w in warp_order:
            prefix[w] = acc
            acc = loaded[w] if acc is None else combine(acc, loaded[w])
        new_totals[(key, q)] = acc
        # Pick this warp's prefix (warp index is uniform, so the selects do not diverge).
        chosen = None
        for w in warp_order[1:]:
            if chosen is None:
                chosen = prefix[w]
                continue
            is_w = b.icmp_unsigned("==", widx, _i32(w))
            chosen = _select(b, is_w, prefix[w], chosen)
        is_first = b.icmp_unsigned("==", widx, _i32(warp_order[0]))
        for r in table[key][q]:
            vals[r] = _select(b, is_first, vals[r], combine(chosen, vals[r]))
    return new_totals
