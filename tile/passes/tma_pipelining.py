"""Software pipelining of tensor-descriptor (TMA) loads that feed wgmma.

`desc.load` traces to a TMA copy into a fresh buffer completed on a fresh mbarrier, waited on
at once (tile/language/_descriptors.py), and dot_acceleration lets the wgmma read that buffer
in place. In a loop nothing overlaps; this pass gives each such load a ring of `num_stages`
buffers and each slot one mbarrier (all the loop's TMA loads of an iteration complete on it):

    ring_j = local_alloc [S, *box];  bars = local_alloc [S, 1] i64;  init_barrier bars[s], 1
    prologue, p = 0 .. S-2:  barrier_expect bars[p], bytes, (iv_p < ub)
                             async_tma_copy desc_j, ring_j[p], bars[p], coords_j(iv_p), (iv_p < ub)
    for iv (carried: ..., read_slot = 0, write_slot = S-1, phase = 0):
        wait_barrier bars[read_slot], phase             iteration iv's boxes have landed
        wgmma reads ring_j[read_slot]                    (as it read the fresh buffer)
        async wgmma: warp_group_dot_wait(pendings=1), then the copies for iv + (S-1)*step
                     into write_slot (the retired wgmma's slot)
        otherwise:   the copies first, after the wait (last iteration's wgmma is done)
        read_slot, write_slot advance modulo S; phase flips when read_slot wraps
    warp_group_dot_wait(pendings=0); inval_barrier bars[s]

Attention's loop (Triton's schedule for it): S = Q K^T, softmax, O = P V + alpha O. Its last
wgmma (P V) reads registers (P), so it cannot stay in flight under `wait(1)`; but its result
only goes back into the loop, and the loop's first wgmma (Q K^T) comes before anything reads
it. So P V is issued async and left in flight across the back edge; Q K^T is issued async
and waited at once with `pendings=0`, which retires the previous P V too (the wait names the
carried accumulator, so nothing reads it earlier). The tensor cores then run P V_j and
Q K^T_{j+1} back to back while the warps update l_i, refill the ring and loop. The copies
for iv + (S-1)*step overwrite the slot P V_{j-1} read, which Q K^T_j's wait retired: they go
at the end of the body (right after that wait when S = 2, so they still have an iteration to
land).

Copies past the end are predicated off, so no copy is in flight after the loop. Which loops:
those `pipelining.plan_loop` leaves alone, with a constant positive step, whose TMA loads (one
buffer and barrier each, the barrier used only by that load's init/expect/copy/wait/inval/
dealloc) feed a wgmma directly or through a transposed view, with coordinates computed from
the induction variable, loop invariants and carried values only stage 0 advances (through a
flattened nest's prologue `if` too; stage-0 values other ops read are delayed as in
pipelining.py).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

from shared_codegen.ir.core import Operation, Value, replace_all_uses
from shared_codegen.ir.passes import erase_op
from shared_codegen.ir.types import SharedMemoryType, int64
from shared_codegen.ops.control.definition import YieldOp
from shared_codegen.ops.arith.definition import INT_COMPARE, BinaryOp, CompareOp, SelectOp
from shared_codegen.ops.mbarrier.definition import (BarrierExpectOp, InitBarrierOp,
                                                    InvalBarrierOp, MBarrierLayout,
                                                    WaitBarrierOp)
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, LocalDeallocOp,
                                                         MemDescIndexOp, MemDescTransOp)
from shared_codegen.ops.tma.definition import AsyncTMACopyGlobalToLocalOp
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp, WarpGroupDotWaitOp
from tile.passes.loop_building import _At, _add_carried, _clone, _iv_at, _less, _next_slot
from tile.passes.pipelining import (_address_ops, _constant_step, _is, _uses,
                                    async_dot, carry_delayed, delayed_yields,
                                    operator_op_name, stage_ahead)
from tile.passes.wgmma_schedule import in_flight_slot, wait_in_branches

_INT_XOR = operator_op_name("xor", floating=False, signed=True)
_BARRIER_OPS = (InitBarrierOp, BarrierExpectOp, WaitBarrierOp, InvalBarrierOp, LocalDeallocOp)


class _TMALoad:
    def __init__(self, copy: Operation, buffer: Operation, barrier_ops: List[Operation]):
        self.copy = copy
        self.buffer = buffer              # the fresh local_alloc the copy fills
        self.barrier_ops = barrier_ops    # its barrier's alloc, init, expect, wait, inval, dealloc
        self.bytes = next(op.attrs["size"] for op in barrier_ops if _is(op, BarrierExpectOp))
        self.ring: Optional[Value] = None


class _TMAPlan:
    def __init__(self, loop, loads, stage0, keep, carried0, num_stages, dot, carried_dot):
        self.loop, self.loads, self.stage0, self.keep = loop, loads, stage0, keep
        self.carried0, self.num_stages, self.async_dot = carried0, num_stages, dot
        # (wgmma left in flight across the back edge, its iter_arg index, the wgmma whose
        # wait(0) retires it next iteration), or None
        self.carried_dot = carried_dot


def _tma_load(buffer_value: Value, block, uses) -> Optional[_TMALoad]:
    alloc = buffer_value.owner
    if not _is(alloc, LocalAllocOp) or alloc.parent is not block or alloc.operands:
        return None
    copies = [u for u in uses.get(buffer_value, []) if _is(u, AsyncTMACopyGlobalToLocalOp)]
    if len(copies) != 1 or copies[0].parent is not block:
        return None
    copy = copies[0]
    desc, smem, bar, coords, pred = AsyncTMACopyGlobalToLocalOp.parts(copy)
    if pred is not None or smem is not buffer_value or not _is(bar.owner, LocalAllocOp) \
            or bar.owner.parent is not block:
        return None
    if desc.owner is not None and desc.owner.parent is block:
        return None
    others = [u for u in uses.get(bar, []) if u is not copy]
    kinds = sorted(type(u.opdef).__name__ for u in others)
    if kinds != sorted(k.__name__ for k in _BARRIER_OPS) \
            or any(u.parent is not block for u in others):
        return None
    wait = next(u for u in others if _is(u, WaitBarrierOp))
    phase = wait.operands[1].owner
    if phase is None or phase.attrs.get("value") != 0 or len(wait.operands) != 2:
        return None
    if any(_is(u, LocalDeallocOp) for u in uses.get(buffer_value, [])):
        return None
    return _TMALoad(copy, alloc, [bar.owner] + others)


def plan_tma_loop(loop: Operation, num_stages: int) -> Optional[_TMAPlan]:
    if num_stages < 2 or _constant_step(loop) is None:
        return None
    block = loop.regions[0].block
    dots = [op for op in block.ops if _is(op, WarpGroupDotOp)]
    if not dots:
        return None
    uses = _uses(block)
    loads: List[_TMALoad] = []
    views: Set[Operation] = set()
    for dot in dots:
        for index in (0, 1):
            v = dot.operands[index]
            if _is(v.owner, MemDescTransOp) and v.owner.parent is block:
                views.add(v.owner)
                v = v.owner.operands[0]
            found = _tma_load(v, block, uses)
            if found is not None and all(found.copy is not l.copy for l in loads):
                loads.append(found)
                views.add(found.buffer)
    if not loads:
        return None
    seeds = {l.buffer for l in loads} | {op for l in loads for op in l.barrier_ops}
    stage0 = _address_ops(block, [l.copy for l in loads], set(seeds))
    if stage0 is None:
        return None
    stage0 -= seeds
    staged = stage_ahead(loop, uses, stage0, set())
    if staged is None:
        return None
    keep, carried0, delayed = staged
    dot = async_dot(dots, views, block, uses)
    plan = _TMAPlan(loop, loads, stage0, keep, carried0, num_stages, dot,
                    None if dot is not None else _carried_dot(dots, views, block, uses))
    plan.delayed = delayed
    if dot is not None:
        plan.async_slot = in_flight_slot(dot, block, uses)
    return plan


def _carried_dot(dots, views, block, uses):
    """(dot, iter_arg index, first wgmma) when the body's last wgmma may stay in flight into
    the next iteration: its result goes only to the yield, the shared memory it reads is a
    ring slot or from outside the loop (a register operand, attention's P, is safe: ptxas
    keeps an in-flight wgmma's registers), and the body's first wgmma comes before every
    reader of the carried value, so that wgmma's wait(0) retires it first."""
    yield_op = block.ops[-1]
    first, dot = dots[0], dots[-1]
    if first is dot:
        return None
    users = uses.get(dot.result, [])
    slots = [i for i, v in enumerate(yield_op.operands) if v is dot.result]
    if len(users) != 1 or not _is(users[0], YieldOp) or len(slots) != 1:
        return None
    for v in dot.operands[:2]:
        owner = v.owner
        if isinstance(v.type, SharedMemoryType) and owner is not None \
                and owner.parent is block and owner not in views:
            return None
    position = {op: i for i, op in enumerate(block.ops)}
    for reader in uses.get(block.args[1 + slots[0]], []):
        top = reader.ancestor_in(block)
        if top is None or position[top] <= position[first]:
            return None
    return dot, slots[0], first


def _issue(at: _At, plan: _TMAPlan, order, mapping: Dict[Value, Value], bars: Value,
           slot: Value, pred: Value) -> None:
    """Stage 0 under `mapping`: address ops cloned, the TMA copies into `slot`, all
    completing on the slot's barrier."""
    by_copy = {l.copy: l for l in plan.loads}
    bar = MemDescIndexOp.build(at.b, bars, slot)
    BarrierExpectOp.build(at.b, bar, sum(l.bytes for l in plan.loads), pred)
    for op in order:
        load = by_copy.get(op)
        if load is None:
            _clone(op, mapping, at.b)
            continue
        desc, _, _, coords, _ = AsyncTMACopyGlobalToLocalOp.parts(op)
        view = MemDescIndexOp.build(at.b, load.ring, slot)
        AsyncTMACopyGlobalToLocalOp.build(at.b, desc, [mapping.get(c, c) for c in coords],
                                          bar, view, pred)


def pipeline_tma_loop(plan: _TMAPlan) -> None:
    loop, S = plan.loop, plan.num_stages
    block = loop.regions[0].block
    yield_op = block.ops[-1]
    lb, ub = loop.operands[0], loop.operands[1]
    step = _constant_step(loop)
    iv = block.args[0]
    order = [op for op in block.ops if op in plan.stage0]
    first_wait = next(op for op in block.ops for l in plan.loads
                      if op in l.barrier_ops and _is(op, WaitBarrierOp))

    at = _At(loop.loc)
    for load in plan.loads:
        ty = load.buffer.result.type
        shape = (S, *ty.shape)
        load.ring = LocalAllocOp.build(at.b, SharedMemoryType(shape, ty.element, ty.layout,
                                                              shape))
    bars = LocalAllocOp.build(at.b, SharedMemoryType((S, 1), int64, MBarrierLayout(), (S, 1)))
    for s in range(S):
        InitBarrierOp.build(at.b, MemDescIndexOp.build(at.b, bars, at.const(s)), 1)
    carried = {block.args[1 + i]: loop.operands[3 + i] for i in plan.carried0}
    early = []
    for p in range(S - 1):
        mapping = dict(carried)
        iv_p = _iv_at(at, lb, step, p)
        mapping[iv] = iv_p
        _issue(at, plan, order, mapping, bars, at.const(p), _less(at, iv_p, ub))
        early.append([mapping[v] for v in plan.delayed])
        carried = {block.args[1 + i]: mapping.get(yield_op.operands[i], yield_op.operands[i])
                   for i in plan.carried0}
    at.place_before(loop)
    for i in plan.carried0:
        loop.operands[3 + i] = carried[block.args[1 + i]]
    read_slot = _add_carried(loop, at.const(0), "read_slot")
    write_slot = _add_carried(loop, at.const(S - 1), "write_slot")
    phase = _add_carried(loop, at.const(0), "phase")
    at.place_before(loop)
    delays = carry_delayed(plan, early)

    # This iteration's boxes: one wait where the first load waited, the slot's views read.
    at = _At(first_wait.loc)
    WaitBarrierOp.build(at.b, MemDescIndexOp.build(at.b, bars, read_slot), phase)
    for load in plan.loads:
        view = MemDescIndexOp.build(at.b, load.ring, read_slot)
        replace_all_uses(block.ops, load.buffer.result, view)
    at.place_before(first_wait)
    wait_end = block.ops[block.ops.index(first_wait) - 1]
    for load in plan.loads:
        for op in [load.copy] + load.barrier_ops[::-1] + [load.buffer]:
            erase_op(op)
    for op in reversed(order):
        if op not in plan.keep and op.parent is block:
            erase_op(op)

    # Stage 0 for iteration iv + (S-1) * step, into the write slot.
    at = _At(loop.loc)
    mapping: Dict[Value, Value] = {}
    ahead = _iv_at(at, iv, step, S - 1)
    mapping[iv] = ahead
    _issue(at, plan, order, mapping, bars, write_slot, _less(at, ahead, ub))
    next_read = _next_slot(at, read_slot, S)
    next_write = _next_slot(at, write_slot, S)
    wraps = CompareOp.build(at.b, INT_COMPARE, "eq", next_read, at.const(0))
    next_phase = SelectOp.build(at.b, wraps, BinaryOp.build(at.b, _INT_XOR, phase,
                                                            at.const(1)), phase)
    if plan.async_dot is not None:
        dot = plan.async_dot
        dot.attrs["is_async"] = True
        wait_at = _At(dot.loc)
        wait = WarpGroupDotWaitOp.build(wait_at.b, [dot.result] + list(dot.operands[:2]), 1)
        wait_at.place_after(dot)
        later = block.ops[block.ops.index(wait) + 1:]
        replace_all_uses(later, dot.result, wait.results[0])
        wait_in_branches(later, wait.results[0])
        at.place_after(wait)  # the copies overwrite the slot of the wgmma `wait` retired
    elif plan.carried_dot is not None:
        dot, index, first = plan.carried_dot
        dot.attrs["is_async"] = True
        first.attrs["is_async"] = True
        carried = block.args[1 + index]
        wait_at = _At(first.loc)
        first_wait = WarpGroupDotWaitOp.build(
            wait_at.b, [first.result] + list(first.operands[:2]) + [carried], 0)
        wait_at.place_after(first)
        others = [op for op in block.ops if op is not first_wait]
        replace_all_uses(others, first.result, first_wait.results[0])
        replace_all_uses(others, carried, first_wait.results[-1])
        # The copies refill the slot P V_{j-1} read, which that wait retired. With two slots
        # they go right after it (at the end of the body they would land only as the next
        # iteration waits for them); deeper rings refill at the end, as Triton does, so that
        # a CTA barrier before the copies never holds a warpgroup between its Q K^T and its
        # softmax (the other warpgroup's Q K^T keeps the tensor cores busy meanwhile).
        if S == 2:
            at.place_after(first_wait)
        else:
            at.place_before(yield_op)
    else:
        at.place_after(wait_end)
    for i in plan.carried0:
        yield_op.operands[i] = mapping.get(yield_op.operands[i], yield_op.operands[i])
    yield_op.operands += [next_read, next_write, next_phase,
                          *delayed_yields(plan, delays, mapping)]

    # After the loop: the last wgmma retired, the barriers invalidated.
    at = _At(loop.loc)
    done = None
    if plan.async_dot is not None:
        result = loop.results[plan.async_slot]
        done = WarpGroupDotWaitOp.build(at.b, [result], 0)
    elif plan.carried_dot is not None:
        result = loop.results[plan.carried_dot[1]]
        done = WarpGroupDotWaitOp.build(at.b, [result], 0)
    for s in range(S):
        InvalBarrierOp.build(at.b, MemDescIndexOp.build(at.b, bars, at.const(s)))
    after = at.place_after(loop)
    if done is not None:
        replace_all_uses(loop.parent.ops[loop.parent.ops.index(after) + 1:], result,
                         done.results[0])


__all__ = ["plan_tma_loop", "pipeline_tma_loop"]
