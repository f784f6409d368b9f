"""Async wgmma in pipelined loops with several dots (the attention backward has four per
iteration): each wgmma is issued as early as its operands allow and waited only where its
result is first read, so independent products overlap on the tensor cores and with the
warps' elementwise work.

    for ... :                              (ring slots landed, as pipelining.py leaves them)
        S^T  = wgmma(K, Q^T_slot)          async
        dP^T = wgmma(V, dO^T_slot)         async, hoisted: it reads nothing the loop computes
        wait(1) -> S^T                     dP^T may still run; the previous iteration's
        P^T = exp2(S^T - m)                dV and dK are retired here (groups retire in order)
        dV  = wgmma(P^T, dO_slot, dV)      async, left in flight across the back edge
        wait(1) -> dP^T
        dS^T = P^T (dP^T - Delta)
        dK  = wgmma(dS^T, Q_slot, dK)      async, left in flight across the back edge
    wait(0) -> dV, dK

`wgmma.wait_group N` retires every wgmma but the N newest, so a wait placed before the first
reader of a result counts the wgmmas issued since that one. A wgmma whose result only goes
back into the loop stays in flight across the back edge when the body's first wait comes
before anything reads the carried value and before every operand it reads is rewritten (its
register A, a buffer staged in the body); the ring slots it reads are refilled after that
first wait (pipelining.py places the copies there). Otherwise it is waited before the yield.

Hoisting moves a wgmma (with its fence, constant operands and ring-slot views) up past
register arithmetic, global loads, fences and wgmmas that wait for the warps' own results
(a register A); it stops at its operands' definitions, at a wgmma as ready as itself (those
keep their order) and at anything else with effects (the ring's wait and barrier, shared-
memory stores, control flow). After the loop, the wgmmas still in flight are retired inside
an `if lb < ub` around the loop (`retire_after_loop`, for ptxas' sake). Past
ACCUMULATOR_BUDGET registers of accumulators per thread the body is left synchronous.

Measured on the H100 (2026-11-28, tutorial 06's backward at HEAD_DIM 64 against Triton 3.6,
geomean over N 1k-16k and causal): 0.88x with the four wgmmas synchronous in source order,
0.98x with this schedule.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import insert_before
from shared_codegen.ir.types import SharedMemoryType
from shared_codegen.ops.arith.definition import INT_COMPARE, CompareOp, ConstantOp
from shared_codegen.ops.control.definition import IfOp, YieldOp
from shared_codegen.ops.fence.definition import FenceAsyncSharedOp
from shared_codegen.ops.reduction.definition import ReduceOp
from shared_codegen.ops.memory.definition import LoadOp
from shared_codegen.ops.shared_memory.definition import MemDescIndexOp, MemDescTransOp
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp, WarpGroupDotWaitOp


def _is(op, cls) -> bool:
    """Whether `op` is an op of family `cls` (False for None and for a block argument's
    owner, a Block). The tile passes share it (pipelining.py, tma_pipelining.py)."""
    return isinstance(op, Operation) and isinstance(op.opdef, cls)


# Op families whose ops only compute on registers (no memory, no synchronization).
_REGISTER_ONLY = ("shared_codegen.ops.arith.", "shared_codegen.ops.math.",
                  "shared_codegen.ops.tensor.")


def _may_pass(op: Operation, dot: Operation) -> bool:
    """Whether `dot` may be issued before `op` (which defines nothing it reads): `op` has no
    effect the wgmma's issue must follow."""
    if _is(op, WarpGroupDotOp):
        # Past one that waits for the warps' own results (a register A such as P), not past
        # one that is as ready as `dot` itself (shared operands): those keep their order.
        return not isinstance(op.operands[0].type, SharedMemoryType)
    if _is(op, FenceAsyncSharedOp):
        return True
    if _is(op, LoadOp):  # a global load: the wgmma reads shared memory and registers
        return not op.attrs.get("volatile")
    if _is(op, ReduceOp):  # a combine region of register arithmetic
        return True
    return not op.regions and type(op.opdef).__module__.startswith(_REGISTER_ONLY)


def _travels_with(op: Operation, needed) -> bool:
    """A definition the hoisted wgmma reads that moves up with it: a constant (use_acc, a
    zero accumulator) or a view of a ring slot (`tl.trans` of a pipelined tile)."""
    if not any(r in needed for r in op.results):
        return False
    return (_is(op, ConstantOp) and not op.operands) or _is(op, MemDescTransOp)


def _hoist(dot: Operation, block: Block) -> None:
    ops = block.ops
    group, needed = [dot], set(dot.operands)
    at = ops.index(dot)
    j = at - 1
    own_fence = True  # the fence right before it (constants and views aside) is its own
    while j >= 0:
        op = ops[j]
        if _travels_with(op, needed) or (own_fence and _is(op, FenceAsyncSharedOp)):
            own_fence = own_fence and not _is(op, FenceAsyncSharedOp)
            group.insert(0, op)
            needed.update(op.operands)
        elif any(r in needed for r in op.results) or not _may_pass(op, dot):
            break
        else:
            own_fence = False
        j -= 1
    members = set(group)
    anchor = next(op for op in ops[j + 1:] if op not in members or op is dot)
    if anchor is dot:  # nothing passed: it stays where it is
        return
    for op in group:
        ops.remove(op)
    for op in group:
        insert_before(anchor, op)


def _readers(value: Value, block: Block) -> List[Operation]:
    """The top-level ops of `block` that read `value` (directly or inside their regions)."""
    out = []
    for top in block.ops:
        if any(value in op.operands for op in top.walk()):
            out.append(top)
    return out


def _ring_view(v: Value, block: Block, rings) -> bool:
    """A slot of a ring (or its permuted view) taken at the top of the body: the copies
    refilling it come after the body's first wait."""
    op = v.owner
    while _is(op, MemDescTransOp) and op.parent is block:
        op = op.operands[0].owner
    return _is(op, MemDescIndexOp) and op.parent is block and op.operands[0] in rings


# Accumulator registers per thread (all the body's wgmma results together) up to which the
# async schedule is used. An in-flight accumulator cannot be spilled, so where the body
# spills ptxas waits after every wgmma anyway: tutorial 06's backward at HEAD_DIM 128 (dK and
# dV alone take 256 registers per thread with 4 warps) ran at 0.92x Triton async against
# 1.13x synchronous (H100, 2026-11-28, N 1k-16k); HEAD_DIM 64 takes 192 and gains.
ACCUMULATOR_BUDGET = 192


def _accumulator_registers(dots, num_threads: int) -> int:
    total = 0
    for dot in dots:
        ty = dot.result.type
        elements = 1
        for extent in ty.shape:
            elements *= extent
        total += (elements * ty.element.bits + 31) // 32 // num_threads
    return total


def schedule_async_dots(block: Block, rings, num_threads: int) -> Optional[Operation]:
    """Make every top-level wgmma of the loop body `block` async, with waits where results
    are first read; returns the body's first wait when some wgmma stays in flight across the
    back edge (the ring refill must come after it), else None. `rings`: the ring buffers
    (values defined before the loop) whose slots the body reads. Past ACCUMULATOR_BUDGET
    registers per thread (`num_threads` in the CTA) nothing changes: the wgmmas stay
    synchronous."""
    dots = [op for op in block.ops if _is(op, WarpGroupDotOp)]
    if _accumulator_registers(dots, num_threads) > ACCUMULATOR_BUDGET:
        return None
    for dot in dots:
        _hoist(dot, block)
    dots = [op for op in block.ops if _is(op, WarpGroupDotOp)]
    yield_op = block.ops[-1]
    position = {op: i for i, op in enumerate(block.ops)}

    def issued_between(first: Operation, before: Operation) -> int:
        return sum(1 for d in dots if position[first] < position[d] < position[before])

    # Where each result is first read; a result read only by the yield may stay in flight.
    first_reader: Dict[Operation, Operation] = {}
    carried: Dict[Operation, int] = {}
    for dot in dots:
        readers = _readers(dot.result, block)
        slots = [i for i, v in enumerate(yield_op.operands) if v is dot.result]
        if readers == [yield_op] and len(slots) == 1:
            carried[dot] = slots[0]
        first_reader[dot] = readers[0] if readers else yield_op
    first_wait_at = min((position[first_reader[d]] for d in dots if d not in carried),
                        default=None)

    def may_carry(dot: Operation) -> bool:
        if first_wait_at is None:
            return False
        for v in dot.operands[:2]:  # nothing it reads is rewritten before the first wait
            owner = v.owner
            if owner is None or owner.parent is not block or _ring_view(v, block, rings):
                continue
            if position[owner] < first_wait_at:
                return False
        # The carried value is read only after the first wait (the wgmma itself may chain on
        # it in flight: wgmmas into one accumulator run in order).
        return all(position[reader] >= first_wait_at or reader is dot
                   for reader in _readers(block.args[1 + carried[dot]], block))

    in_flight = [d for d in carried if may_carry(d)]
    for dot in carried:
        if dot not in in_flight:
            first_reader[dot] = yield_op

    # Waits where results are first read, in body order. A wgmma an earlier wait already
    # retired is named in that wait (its readers are all after it).
    for dot in dots:
        dot.attrs["is_async"] = True
    retired_by: Dict[Operation, Operation] = {}
    first_wait = None
    waited = sorted((d for d in dots if d not in in_flight),
                    key=lambda d: (position[first_reader[d]], position[d]))
    for dot in waited:
        wait_op = retired_by.get(dot)
        if wait_op is not None:
            _name_in_wait(wait_op, dot.result)
            continue
        reader = first_reader[dot]
        pendings = issued_between(dot, reader)
        deps = [dot.result]
        if first_wait is None:
            deps += [block.args[1 + carried[d]] for d in in_flight]
        scratch = Block()
        wait_op = WarpGroupDotWaitOp.build(Builder(scratch, dot.loc), deps, pendings)
        scratch.ops.clear()
        insert_before(reader, wait_op)
        later = block.ops[block.ops.index(wait_op) + 1:]
        for dep, res in zip(deps, wait_op.results):
            replace_all_uses(later, dep, res)
        first_wait = first_wait or wait_op
        # Everything issued before the wait but the `pendings` newest is retired.
        before = [d for d in dots if position[d] < position[reader]]
        for d in before[:len(before) - pendings]:
            retired_by.setdefault(d, wait_op)
    return first_wait if in_flight else None


def _name_in_wait(wait_op: Operation, value: Value) -> None:
    """Add `value` to the deps of `wait_op` (which retired its wgmma) and read it from there."""
    wait_op.operands.append(value)
    result = Value(value.type, wait_op, len(wait_op.results))
    wait_op.results.append(result)
    block = wait_op.parent
    replace_all_uses(block.ops[block.ops.index(wait_op) + 1:], value, result)


def retire_after_loop(loop: Operation, indices: List[int]) -> Operation:
    """Retire the loop results `indices` (wgmmas still in flight when the loop ends) with one
    `wait(0)`, placed with the loop inside `if lb < ub`: the path that skips the loop then
    joins after the wait. With the wait after the join, LLVM gives the skip path's initial
    values the accumulator registers the wgmmas write, so those registers get a non-wgmma
    definition while a wgmma may be in flight, and ptxas serializes every wgmma of the
    kernel (C7515: a wait after each HGMMA; tutorial 06's backward at HEAD_DIM 64).
    Returns the op that now stands where the loop stood (the guard, or the loop itself)."""
    if not indices:
        return loop
    parent = loop.parent
    scratch = Block()
    b = Builder(scratch, loop.loc)
    lb, ub = loop.operands[0], loop.operands[1]
    runs = CompareOp.build(b, INT_COMPARE, "slt", lb, ub)
    guard = IfOp.build(b, runs, [r.type for r in loop.results])
    scratch.ops.clear()
    insert_before(loop, runs.owner)
    insert_before(loop, guard)
    rest = parent.ops[parent.ops.index(loop) + 1:]
    parent.ops.remove(loop)
    then_block, else_block = guard.regions[0].block, guard.regions[1].block
    then_block.ops.append(loop)
    loop.parent = then_block
    done = WarpGroupDotWaitOp.build(Builder(then_block, loop.loc),
                                    [loop.results[i] for i in indices], 0)
    outs = list(loop.results)
    for i, retired in zip(indices, done.results):
        outs[i] = retired
    YieldOp.build(Builder(then_block, loop.loc), outs)
    YieldOp.build(Builder(else_block, loop.loc), loop.operands[3:])
    for result, joined in zip(loop.results, guard.results):
        replace_all_uses(rest, result, joined)
    return guard


def in_flight_slot(dot: Operation, block: Block, uses) -> Optional[int]:
    """The iter_arg the result of the wgmma `dot` goes back to, straight or handed on by the
    branches of `if`s in the loop body `block`, when nothing in the body reads it outside
    an `if` (a flattened loop's epilogue reads it in one); else None. `uses`: every op of
    the body (nested ones too) that reads each value. Triton's rule: reads under an `if`
    may wait there (`wait_in_branches`), so the wgmma still stays in flight."""
    yield_op = block.ops[-1]
    slots, work = set(), [dot.result]
    while work:
        value = work.pop()
        for user in uses.get(value, []):
            if user is yield_op:
                slots.update(i for i, v in enumerate(user.operands) if v is value)
                continue
            top = user.ancestor_in(block)
            if top is user or not _is(top, IfOp):
                return None
            if _is(user, YieldOp) and any(user.parent is r.block for r in top.regions):
                work += [top.results[i] for i, v in enumerate(user.operands) if v is value]
    return slots.pop() if len(slots) == 1 else None


def wait_in_branches(ops: List[Operation], value: Value) -> None:
    """The branches of the `if`s among `ops` that read `value`, the result of a wgmma still in
    flight, other than to hand it on, wait for it first: a `wait(0)` before their first
    reader (only one that yields it on needs none)."""
    for top in ops:
        if not _is(top, IfOp):
            continue
        for region in top.regions:
            ops_in = region.block.ops
            first = next((op for op in ops_in[:-1]
                          if any(value in nested.operands for nested in op.walk())), None)
            if first is None:
                continue
            scratch = Block()
            wait = WarpGroupDotWaitOp.build(Builder(scratch, first.loc), [value], 0)
            scratch.ops.clear()
            insert_before(first, wait)
            replace_all_uses(ops_in[ops_in.index(wait) + 1:], value, wait.results[0])


def carried_in_flight(loop: Operation) -> List[int]:
    """The iter_arg indices of the loop whose wgmma results are still in flight at its end."""
    block = loop.regions[0].block
    yield_op = block.ops[-1]
    return [i for i, v in enumerate(yield_op.operands)
            if _is(v.owner, WarpGroupDotOp) and v.owner.parent is block]


__all__ = ["schedule_async_dots", "carried_in_flight", "retire_after_loop", "in_flight_slot",
           "wait_in_branches"]
