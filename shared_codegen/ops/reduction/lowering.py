"""Lowering of `tt.reduce`: in the thread, across lanes with butterfly shuffles (PTX ISA
9.7.9.6, shfl.sync.bfly), across warps through shared memory (st.shared / bar.sync /
ld.shared, PTX ISA 9.7.9.9, 9.7.9.8, 9.7.13.1), all read off the operand's linear layout
(`shared_codegen/lowering/cross_thread.py` holds the bit arithmetic). Scans are in
`scan_lowering.py`.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import TensorType
from shared_codegen.lowering.scratch import claim_scratch
from shared_codegen.lowering.cross_thread import (LANE, WARP, _combine, _i32, check_axis_separable,
                                                  element_coord_values, exchange_through_smem,
                                                  linear_index, map_layout, pure_axis_bits,
                                                  register_coords, smem_load, smem_store,
                                                  storage_bytes, thread_bases_equal,
                                                  thread_bits_value, unique_registers)
from shared_codegen.ops.reduction.definition import ReduceOp


# Combines whose result does not depend on how a run of operands is grouped, bit for bit
# (max/min of floats included: they pick an operand, whatever order they are taken in).
# The in-thread stage combines these as a balanced tree: the same result as the left-to-right
# fold, with log2(n) dependent combines instead of n - 1. A softmax row max over 32 registers
# is then 5 FMNMX deep instead of 31, and that chain sits in front of every exp2. Float
# addition is not associative, so sums keep the fold (Triton's order, and the interpreter's).
EXACTLY_ASSOCIATIVE = frozenset({
    "arith.maxnumf", "arith.minnumf", "arith.maximumf", "arith.minimumf",
    "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
    "arith.addi", "arith.muli", "arith.andi", "arith.ori", "arith.xori"})


def _regroupable(block) -> bool:
    """Whether the combine region is one exactly associative op on (accumulator, next),
    returned as is, so that any grouping of an ordered run gives the same bits."""
    if len(block.args) != 2 or len(block.ops) != 2:
        return False
    combine, ret = block.ops
    return (combine.name in EXACTLY_ASSOCIATIVE
            and list(combine.operands) == list(block.args)
            and list(ret.operands) == [combine.results[0]])


def _combine_run(ctx, block, run: List[List[ir.Value]], tree: bool) -> List[ir.Value]:
    """Combine the operand tuples of `run` in order: a left fold, or (tree) pairs of
    neighbours level by level, which keeps the order and only regroups."""
    if not tree:
        acc = run[0]
        for item in run[1:]:
            acc = _combine(ctx, block, acc, item)
        return acc
    while len(run) > 1:
        paired = [_combine(ctx, block, run[i], run[i + 1]) for i in range(0, len(run) - 1, 2)]
        run = paired + run[len(run) - len(run) % 2:]
    return run[0]


@lowering_rule(ReduceOp)
def lower_reduce(op, ctx):
    """tt.reduce along `axis`, in three stages derived from the operand's linear layout.

    1. In the thread: registers whose coordinates differ only along the axis are combined
       in ascending axis order (duplicate registers, from zero register bases, are skipped);
       as a balanced tree when the combine is exactly associative (EXACTLY_ASSOCIATIVE).
    2. Across lanes: for each lane bit whose basis moves only along the axis, one
       `shfl.sync.bfly` (PTX ISA 9.7.9.6) with that bit as the lane mask; afterwards every
       lane of the group holds the group's result. Broadcast lane bits are skipped.
    3. Across warps (only if a warp bit moves along the axis): each warp's partial of each
       output element goes to shared memory at `[warp index along the axis][output element]`,
       `bar.sync`, and every thread combines, in warp order, the partials of the output
       elements its result registers hold. Same values in the same order, so duplicate
       holders (and, for a scalar result, all threads) agree bit for bit.
    Without stage 3 the accumulators are the result registers when the slice layout keeps the
    operand's lane/warp placement (it does for SliceLayout(axis, operand layout)); otherwise
    they go through a shared-memory round trip.
    """
    axis = op.attrs["axis"]
    src_ty: TensorType = op.operands[0].type
    ll = ctx.linear_layout(src_ty)
    check_axis_separable(ll, axis, "tt.reduce")
    block = op.regions[0].block
    operands = [ctx.get(v) for v in op.operands]
    ltys = [ctx.llvm_type(v.type.element) for v in op.operands]

    def drop_axis(c):
        return tuple(x for d, x in enumerate(c) if d != axis)

    # Stage 1: in-thread, grouped by the register part of the output coordinates.
    groups: Dict[tuple, List[Tuple[int, int]]] = {}
    reg_coords = register_coords(ll)
    for r in unique_registers(ll):
        c = reg_coords[r]
        groups.setdefault(drop_axis(c), []).append((c[axis], r))
    accs: Dict[tuple, List[ir.Value]] = {}
    tree = _regroupable(block)
    for key, members in groups.items():
        members.sort()
        accs[key] = _combine_run(ctx, block, [[regs[r] for regs in operands]
                                              for _, r in members], tree)

    # Stage 2: butterflies over the lane bits that move along the axis.
    for bit in pure_axis_bits(ll, LANE, axis):
        for key, acc in accs.items():
            other = [ctx.shuffle_xor(v, 1 << bit) for v in acc]
            accs[key] = _combine(ctx, block, acc, other)

    out_shape = drop_axis(tuple(src_ty.shape))
    warp_bits = pure_axis_bits(ll, WARP, axis)
    if warp_bits:
        return _reduce_across_warps(ctx, op, ll, axis, accs, warp_bits, ltys, out_shape)

    if not out_shape:  # scalar result: every thread holds the one accumulator
        (acc,) = accs.values()
        return acc
    res_ty: TensorType = op.results[0].type
    res_ll = ctx.linear_layout(res_ty)
    partial_ll = map_layout(ll, drop_axis, out_shape)
    if thread_bases_equal(res_ll, partial_ll):
        picked = [accs.get(c) for c in register_coords(res_ll)]
        if all(p is not None for p in picked):
            return [[p[i] for p in picked] for i in range(len(operands))]
    # The result layout places output elements elsewhere: round trip the accumulators, seen
    # as a layout whose registers are the groups (register bases zeroed along the axis).
    out = []
    for i, lty in enumerate(ltys):
        regs = [accs[drop_axis(c)][i] for c in reg_coords]
        out.append(exchange_through_smem(ctx, partial_ll, regs, res_ll, out_shape, lty))
    return out


def _reduce_across_warps(ctx, op, ll, axis, accs, warp_bits, ltys, out_shape):
    """Stage 3 of `lower_reduce`; returns the lowered results."""
    b = ctx.builder
    block = op.regions[0].block
    n_warps_axis = 1 << len(warp_bits)
    n_out = 1
    for s in out_shape:
        n_out *= s
    # One array [warp along axis][output element] per operand, 16-byte aligned.
    offsets, total = [], 0
    for lty in ltys:
        offsets.append(total)
        total += -(-n_out * n_warps_axis * storage_bytes(lty) // 16) * 16
    warp_index = thread_bits_value(b, ctx, ll, [(WARP, bit) for bit in warp_bits])

    def drop_axis(c):
        return tuple(x for d, x in enumerate(c) if d != axis)

    # Only one lane of each group of lanes holding the same partial needs to store it:
    # the one whose axis-lane bits and broadcast lane bits are zero.
    free = ll.get_free_variable_masks()
    lane_mask = free.get(LANE, 0)
    for bit in pure_axis_bits(ll, LANE, axis):
        lane_mask |= 1 << bit
    base = claim_scratch(ctx, total)
    partial_ll = map_layout(ll, drop_axis, out_shape)
    pred = None
    if lane_mask:
        pred = b.icmp_unsigned("==", b.and_(ctx.lane_id(), _i32(lane_mask)), _i32(0))
    slot_base = b.mul(warp_index, _i32(n_out)) if n_out > 1 else warp_index

    def store_partials():
        for key, acc in accs.items():
            coords = element_coord_values(ctx, partial_ll, key)
            idx = b.add(slot_base, linear_index(b, coords, out_shape))
            for v, off in zip(acc, offsets):
                smem_store(ctx, base, idx, v, off)

    if pred is not None:
        with b.if_then(pred):
            store_partials()
    else:
        store_partials()
    ctx.barrier()

    if not out_shape and n_warps_axis <= ctx.threads_per_warp:
        # A scalar result: lane l reads warp (l mod W)'s partial, then butterflies over the
        # low log2(W) lane bits leave the total in every lane. One shared load and a few
        # shuffles per thread, instead of W loads that keep W values live (register pressure
        # there cost softmax a quarter of its occupancy on the H100).
        slot = b.and_(ctx.lane_id(), _i32(n_warps_axis - 1))
        acc = [smem_load(ctx, base, slot, lty, off) for lty, off in zip(ltys, offsets)]
        for bit in range(len(warp_bits)):
            other = [ctx.shuffle_xor(v, 1 << bit) for v in acc]
            acc = _combine(ctx, block, acc, other)
        return acc
    if out_shape:
        res_ll = ctx.linear_layout(op.results[0].type)
        want = register_coords(res_ll)
    else:
        res_ll, want = None, [()]
    loaded: Dict[tuple, List[ir.Value]] = {}
    per_reg = []
    for c in want:
        if c not in loaded:
            idx = linear_index(b, element_coord_values(ctx, res_ll, c), out_shape) \
                if out_shape else _i32(0)
            acc = None
            for w in range(n_warps_axis):
                slot = b.add(idx, _i32(w * n_out)) if w else idx
                vals = [smem_load(ctx, base, slot, lty, off) for lty, off in zip(ltys, offsets)]
                acc = vals if acc is None else _combine(ctx, block, acc, vals)
            loaded[c] = acc
        per_reg.append(loaded[c])
    if not out_shape:
        return per_reg[0]
    return [[regs[i] for regs in per_reg] for i in range(len(ltys))]


# ---- ttg.convert_layout ------------------------------------------------------------------------
