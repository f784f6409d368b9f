"""Software pipelining of loops that feed tensor-core dots (Triton's loop pipeliner, for the
tile DSL's explicit-layout IR).

A loop whose body loads the operands of a `ttng.warp_group_dot` or `ttg.mma_v2` from global
memory runs those loads `num_stages - 1` iterations ahead, through `cp.async` into a ring of
`num_stages` shared-memory buffers per operand:

    ring_j = local_alloc [S, *tile]                     one per pipelined load
    prologue, p = 0 .. S-2:  the address ops of iteration p, the loads as
                             async_copy(ring_j[p], ptr, mask & (iv_p < ub)); commit
    for iv (carried: ..., read_slot = 0, write_slot = S-1):
        async_wait(S-2)                                 iteration iv's copies have landed
        mma_v2:  copies for iv + (S-1)*step into ring_j[write_slot]; commit
                 local_load(ring_j[read_slot]) -> mma_v2
        wgmma:   warp_group_dot(ring_a[read_slot], ring_b[read_slot], acc, is_async)
                 warp_group_dot_wait(acc, ..., pendings=1)   the previous wgmma retired, so
                 copies for iv + (S-1)*step into ring_j[write_slot]; commit   its slot is free
        several wgmmas (the attention backward): each async, waited where its result is
                 first read; copies after the body's first wait (wgmma_schedule.py)
        read_slot, write_slot advance modulo S
    async_wait(0); warp_group_dot_wait(acc, pendings=0)

One ring serves every dot operand a loaded tile feeds: the attention backward reads Q^T once
as loaded and once transposed (a permuted view of the same slot). The ring keeps the loaded
tile's contiguous dim, whichever it is (cp.async cannot transpose); wgmma reads fp16 / bf16
either way, and tf32, fp8 and int8 only where that dim is the operand's K.

Index loads (`_index_load`: a paged cache's block-table entries, whose values only form the
ringed loads' addresses) run one iteration further ahead than the copies (`index_stage`):
the prologue also loads iteration S-1's entries, and the body loads iteration iv + S*step's
after its copies and carries them to the next issue (an `index_ahead` iter_arg), so a copy's
address never waits on a global load issued just before it.

Loads past the end are masked off (cp.async reads nothing and zero-fills), so short loops
need no special case. `bar.sync`s between the copies and the reads of other warps come from
the shared-memory barrier analysis, as for hand-written Gluon.

Which loops: `scf.for` with a constant positive step whose body holds the dot. A load whose
tile only dot operands read (through their `local_alloc` or `convert_layout`, maybe through
a `tl.trans`) is pipelined when it has `other` absent or zero, a 2-D tile and copies of at
least 4 bytes (cp.async's minimum), and the ops computing its address use only the
induction variable, values from outside, and carried values they compute themselves
(pointer increments). A loop that does not qualify is left as it is.
Tensor-descriptor (TMA) loads are ringed by tile/passes/tma_pipelining.py, called from here.

A flattened nest (tile/passes/loop_flatten.py) arrives as one loop whose addresses come out
of the prologue's `scf.if` (the next tile's offsets): an `if` whose branches only compute
joins stage 0 whole and runs ahead with it. What stage 0 computes from carried values and the
rest of the body also reads (the epilogue's test of the step's place in its tile, the tile's
coordinates) reaches those readers S-1 iterations late, through S-1 more iter_args
(`carry_delayed`), as Triton's expander carries values between stages. The wgmma stays in
flight when its result goes back to its accumulator through `if`s (the epilogue restarts it
from zeros): a branch that reads it waits for it first (Triton's rule: reads under an `if`
may wait there).
`num_stages` comes from `tl.range(num_stages=)`, else from the launch (module attr, default
3); 1 turns pipelining off.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

from shared_codegen.ir.core import (Block, MemoryEffect, Module, Operation, Value,
                                    replace_all_uses)
from shared_codegen.ir.passes import erase_op
from shared_codegen.ir.types import SharedMemoryType, TensorType, int1, int32
from shared_codegen.layouts import SwizzledSharedLayout, to_linear_layout
from shared_codegen.ops.arith.definition import BinaryOp, CastOp, ConstantOp, operator_op_name
from shared_codegen.ops.async_copy.definition import (AsyncCommitGroupOp,
                                                      AsyncCopyGlobalToLocalOp, AsyncWaitOp)
from shared_codegen.ops.control.definition import ForOp, IfOp, YieldOp
from shared_codegen.ops.dot.definition import MmaV2Op
from shared_codegen.ops.memory.definition import LoadOp
from shared_codegen.ops.program.definition import AssumeOp
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, LocalLoadOp,
                                                         MemDescIndexOp, MemDescTransOp)
from shared_codegen.ops.tensor.definition import ConvertLayoutOp, SplatOp, TransOp
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp, WarpGroupDotWaitOp
from tile.passes.loop_building import _At, _add_carried, _clone, _iv_at, _less, _next_slot
from tile.passes.wgmma_schedule import (_is, carried_in_flight, in_flight_slot,
                                        retire_after_loop, schedule_async_dots,
                                        wait_in_branches)


_INT_AND = operator_op_name("and", floating=False, signed=True)


class _Use:
    """One dot operand read from a pipelined load's ring: the op that turned the loaded tile
    into the operand (local_alloc for wgmma, convert_layout for mma_v2), and the `tl.trans`
    between them when there is one (a permuted view of the ring)."""

    def __init__(self, consumer: Operation, trans: Optional[Operation] = None):
        self.consumer = consumer
        self.trans = trans


class _Operand:
    """A pipelined load and the dot operands it feeds: one ring serves them all (the
    attention backward reads each loaded tile twice, once transposed)."""

    def __init__(self, load: Operation, uses: List[_Use], smem_layout):
        self.load = load
        self.uses = uses
        self.smem_layout = smem_layout
        self.ring: Optional[Value] = None


# ---- analysis --------------------------------------------------------------------------------

def _uses(block: Block) -> Dict[Value, List[Operation]]:
    uses: Dict[Value, List[Operation]] = {}
    for top in block.ops:
        for op in top.walk():
            for v in op.operands:
                uses.setdefault(v, []).append(op)
    return uses


def nvmma_shared_layout(shape, elem, k_major_dim0: bool = False):
    from tile.passes.dot_acceleration import nvmma_shared_layout as layout_for
    return layout_for(shape, elem, k_major_dim0)


def mma_v2_smem_layout(ty: TensorType) -> SwizzledSharedLayout:
    """Triton's swizzle for an mma operand staged in shared memory: 16-byte vectors XOR-ed
    across the rows one ldmatrix reads, per_phase rows sharing a phase (128-byte lines)."""
    order = tuple(ty.layout.order) if hasattr(ty.layout, "order") else (1, 0)
    contig = ty.shape[order[0]]
    nbytes = max(1, ty.element.bits // 8)
    vec = max(1, 16 // nbytes)
    per_phase = max(1, 128 // (contig * nbytes))
    max_phase = max(1, 8 // per_phase)
    return SwizzledSharedLayout(vec, per_phase, max_phase, list(order))


def _smem_contiguous_dim(layout, rank: int) -> int:
    if isinstance(layout, SwizzledSharedLayout):
        return layout.order[0]
    return 0 if getattr(layout, "transposed", False) else rank - 1  # NVMMASharedLayout


class _CopyWidth:
    """Enough of a lowering context for `vectorize.vector_width`: axis facts and layouts."""

    def __init__(self, axis_info):
        self.axis_info = axis_info

    def linear_layout(self, ty):
        return to_linear_layout(ty.layout, tuple(ty.shape))


def _copy_bytes(load: Operation, width_ctx) -> int:
    from shared_codegen.lowering.vectorize import vector_width
    ptr, mask, _ = LoadOp.parts(load)
    return vector_width(ptr, width_ctx, mask) * max(1, load.result.type.element.bits // 8)


def _zero_other(load: Operation) -> bool:
    _, _, other = LoadOp.parts(load)
    if other is None:
        return True
    src = other.owner
    # A zero through splats, layout conversions and float casts (0.0 stays 0 in any type).
    while src is not None and src.operands and (
            _is(src, SplatOp) or _is(src, ConvertLayoutOp) or _is(src, CastOp)):
        src = src.operands[0].owner
    return _is(src, ConstantOp) and src.attrs.get("value") in (0, 0.0, False)


def _dot_use(dot: Operation, index: int, block: Block, uses) -> Optional[tuple]:
    """(load, use) when operand `index` of `dot` is a load of this body turned into the
    operand (through a `tl.trans` or not), else None (a register A, a value from outside the
    loop: those stay as they are)."""
    consumer = dot.operands[index].owner
    if consumer is None or consumer.parent is not block:
        return None
    if _is(dot, WarpGroupDotOp):
        if not _is(consumer, LocalAllocOp) or not consumer.operands:
            return None
    elif not _is(consumer, ConvertLayoutOp):
        return None
    if len(uses.get(consumer.result, [])) != 1:
        return None
    load, trans = consumer.operands[0].owner, None
    if _is(load, TransOp) and load.parent is block and tuple(load.attrs["order"]) == (1, 0) \
            and len(uses.get(load.result, [])) == 1:
        load, trans = load.operands[0].owner, load
    if not _is(load, LoadOp) or load.parent is not block:
        return None
    return load, _Use(consumer, trans), index


def _ring_layout(load: Operation, reads, width_ctx):
    """The shared layout of `load`'s ring when every read of the loaded tile is a dot operand
    in `reads` ([(use, operand index)]) that can read it from there, else None. A
    `tl.trans` of the tile becomes a permuted view of the ring, as Triton does, so the copy
    stays untransposed: cp.async moves runs contiguous in both memories, so the ring keeps
    the contiguous dim of the loaded tile."""
    ty = load.result.type
    if len(ty.shape) != 2 or not _zero_other(load) or load.attrs.get("volatile"):
        return None
    if _copy_bytes(load, width_ctx) < 4:
        return None
    contiguous = ty.layout.order[0]
    if not _is(reads[0][0].consumer, LocalAllocOp):  # mma_v2: ldmatrix from a swizzled ring
        return mma_v2_smem_layout(ty)
    direct = [use.consumer.result.type.layout for use, _ in reads if use.trans is None]
    if len(reads) == 1 and direct and _smem_contiguous_dim(direct[0], 2) == contiguous:
        return direct[0]  # the layout the dot pass chose, when cp.async can fill it
    if ty.element.bits != 16:
        # wgmma reads tf32, fp8 and int8 only K-major (K contiguous): each read's view must
        # have the tile's contiguous dim as its K.
        for use, index in reads:
            view_contiguous = contiguous if use.trans is None else 1 - contiguous
            if view_contiguous != (1 if index == 0 else 0):
                return None
    return nvmma_shared_layout(ty.shape, ty.element, k_major_dim0=contiguous == 0)


def _pipelined_operands(dots, block: Block, uses, width_ctx) -> List[_Operand]:
    """The loads every read of which is a dot operand, each with its ring layout."""
    by_load: Dict[Operation, list] = {}
    for dot in dots:
        for index in (0, 1):
            found = _dot_use(dot, index, block, uses)
            if found is not None:
                by_load.setdefault(found[0], []).append(found[1:])
    operands = []
    for load, reads in by_load.items():
        # Every reader of the loaded tile must be one of these uses (a trans or a consumer).
        readers = {use.trans or use.consumer for use, _ in reads}
        if len(uses.get(load.result, [])) != len(reads) or \
                set(uses.get(load.result, [])) != readers:
            continue
        if len({_is(use.consumer, LocalAllocOp) for use, _ in reads}) != 1:
            continue
        layout = _ring_layout(load, reads, width_ctx)
        if layout is not None:
            operands.append(_Operand(load, [use for use, _ in reads], layout))
    return operands


def _may_stay_in_flight(dot: Operation, block: Block, pipelined) -> bool:
    """A wgmma may run past the end of its iteration only when every operand it reads is a
    ring slot or shared memory from outside the loop: a buffer staged in the body would be
    overwritten next iteration, and registers (A) rewritten."""
    for index in (0, 1):
        v = dot.operands[index]
        owner = v.owner
        if not isinstance(v.type, SharedMemoryType):
            return False
        if owner is not None and owner.parent is block and owner not in pipelined:
            return False
    return True


def _writes_global(block: Block) -> bool:
    return any(MemoryEffect.WRITE_GLOBAL in op.opdef.memory_effects
               or any(_writes_global(r.block) for r in op.regions)
               for op in block.ops)


def _index_load(op: Operation, block: Block) -> bool:
    """A load whose value only forms addresses (a paged KV cache's block-table entries):
    it may be issued ahead with the ringed loads when nothing in the loop writes global
    memory, so reading it S-1 iterations early reads the same values (as Triton does)."""
    return _is(op, LoadOp) and not op.attrs.get("volatile") and not _writes_global(block)


def _reads(op: Operation) -> List[Value]:
    """The values `op` reads: its operands and, for an op with regions, what the ops nested
    in it read from outside it."""
    if not op.regions:
        return op.operands
    inside = {r for nested in op.walk() for r in nested.results}
    inside.update(a for nested in op.walk() for region in nested.regions
                  for a in region.block.args)
    return [v for nested in op.walk() for v in nested.operands if v not in inside]


def _computes_only(op: Operation) -> bool:
    """An `scf.if` whose branches only compute (a flattened loop's prologue, which
    computes the next tile's offsets): it may run ahead like a pure op. `tl.assume` counts
    as computing: it states a fact about the values it reads, true whenever they are
    computed (tutorial 03's `tl.assume(row >= 0)` sits in that prologue)."""
    return _is(op, IfOp) and all(
        _is(nested, YieldOp) or (not nested.regions and (nested.opdef.is_pure(nested)
                                                         or _is(nested, CastOp)
                                                         or _is(nested, AssumeOp)))
        for nested in op.walk() if nested is not op)


def _deps(block: Block, roots, stage0: Set[Operation], allowed) -> bool:
    """Add `roots` and the body ops they depend on to `stage0`; False when one has side
    effects or regions (only `allowed`, the loads, index loads and `if`s that only compute
    may)."""
    work = list(roots)
    while work:
        op = work.pop()
        if op in stage0:
            continue
        # Casts count as pure here (CSE keeps them apart only for their rounding modes).
        if not _computes_only(op) and (op.regions or (
                op not in allowed and not op.opdef.is_pure(op) and not _is(op, CastOp)
                and not _index_load(op, block))):
            return False
        stage0.add(op)
        for v in _reads(op):
            if v.owner is not None and v.owner.parent is block:
                work.append(v.owner)
    return True


def _address_ops(block: Block, loads: List[Operation],
                 stage0: Optional[Set[Operation]] = None) -> Optional[Set[Operation]]:
    """Stage 0: the loads, the body ops they depend on, and the ops computing the next value
    of every carried value those read (pointer increments); None when one has side effects.
    `stage0` may come seeded with ops the walk must not enter (a TMA load's buffers)."""
    stage0 = set() if stage0 is None else stage0
    if not _deps(block, loads, stage0, set(loads)):
        return None
    yield_op = block.ops[-1]
    while True:
        read = {v for op in stage0 for v in _reads(op) if v in block.args[1:]}
        nexts = [yield_op.operands[block.args.index(a) - 1].owner for a in read]
        nexts = [op for op in nexts if op is not None and op.parent is block
                 and op not in stage0]
        if not nexts:
            return stage0
        if not _deps(block, nexts, stage0, set(loads)):
            return None


def _carried_dependent(block: Block, stage0: Set[Operation]) -> Set[Operation]:
    """The stage-0 ops whose values depend on carried values (pointers advanced each
    iteration): those run ahead and cannot serve the current iteration. The others depend on
    the induction variable and loop invariants only, so the original ops, which see the
    current iv, can stay for readers outside stage 0 (a mask shared with a load that is not
    pipelined)."""
    carried = set(block.args[1:])
    dependent: Set[Operation] = set()
    for op in block.ops:  # program order: operands come first
        if op in stage0 and any(v in carried or (v.owner in dependent) for v in _reads(op)):
            dependent.add(op)
    return dependent


def _constant_step(loop: Operation) -> Optional[int]:
    step = loop.operands[2].owner
    if _is(step, ConstantOp) and isinstance(step.attrs.get("value"), int) \
            and step.attrs["value"] > 0:
        return step.attrs["value"]
    return None


class _Plan:
    def __init__(self, loop, operands, stage0, carried0, num_stages, async_dot):
        self.loop = loop
        self.operands = operands          # [_Operand]
        self.stage0 = stage0              # ops issued ahead (addresses and loads)
        self.carried0 = carried0          # indices of iter_args stage 0 owns
        self.num_stages = num_stages
        self.async_dot = async_dot        # the single wgmma that may stay in flight, or None
        self.num_threads = 128            # of the CTA (the wgmma schedule's register budget)


def plan_loop(loop: Operation, num_stages: int, width_ctx) -> Optional[_Plan]:
    if num_stages < 2 or _constant_step(loop) is None:
        return None
    block = loop.regions[0].block
    dots = [op for op in block.ops if _is(op, WarpGroupDotOp) or _is(op, MmaV2Op)]
    if not dots:
        return None
    uses = _uses(block)
    operands = _pipelined_operands(dots, block, uses, width_ctx)
    if not operands:
        return None
    loads = [o.load for o in operands]
    stage0 = _address_ops(block, loads)
    if stage0 is None:
        return None
    readers = {u.consumer for o in operands for u in o.uses}
    consumers = readers | {u.trans for o in operands for u in o.uses if u.trans}
    staged = stage_ahead(loop, uses, stage0, consumers)
    if staged is None:
        return None
    plan = _Plan(loop, operands, stage0, staged[1], num_stages,
                 async_dot(dots, readers, block, uses))
    plan.keep, plan.delayed = staged[0], staged[2]
    if plan.async_dot is not None:
        plan.async_slot = in_flight_slot(plan.async_dot, block, uses)
    return plan


def stage_ahead(loop: Operation, uses, stage0: Set[Operation], consumers):
    """(keep, carried0, delayed) for running `stage0` S-1 iterations ahead, or None when it
    cannot: `keep`, the stage-0 ops other readers share (they stay in place too);
    `carried0`, the iter_args stage 0 alone reads and advances; `delayed`, the stage-0
    values computed from carried values that the rest of the body reads (`carry_delayed`)."""
    block = loop.regions[0].block
    yield_op = block.ops[-1]
    dependent = _carried_dependent(block, stage0)
    # Stage-0 values computed from carried values run S-1 iterations ahead: other readers
    # than the consumers get them S-1 iterations late (`delayed`). The others stay in place
    # for their other readers.
    shared: Set[Operation] = set()
    delayed: List[Value] = []
    for op in (op for op in block.ops if op in stage0):
        for res in op.results:
            tops = {user.ancestor_in(block) for user in uses.get(res, [])}
            if tops - stage0 - consumers - {yield_op}:
                if op in dependent:
                    delayed.append(res)
                else:
                    shared.add(op)
    _deps(block, list(shared), keep := set(), set())
    args = block.args[1:]
    carried0 = []
    for i, arg in enumerate(args):
        users = {user.ancestor_in(block) for user in uses.get(arg, [])}
        in0 = [u for u in users if u in stage0]
        if not in0:
            src = yield_op.operands[i].owner
            if src in stage0:  # a stage-0 value carried out but never read ahead: give up
                return None
            continue
        if len(in0) != len(users):
            return None  # read by both stages
        src = yield_op.operands[i].owner
        if src is not None and src.parent is block and src not in stage0:
            return None
        if uses_after(loop, i):
            return None  # its final value would be S-1 iterations ahead
        carried0.append(i)
    return keep, carried0, delayed


def async_dot(dots, pipelined, block: Block, uses) -> Optional[Operation]:
    args = block.args[1:]
    # One wgmma may stay in flight across iterations: its result only carried back into its
    # own accumulator (nothing else reads the registers the tensor cores are still writing,
    # but for branches that wait for it first: `in_flight_slot`).
    wgmmas = [d for d in dots if _is(d, WarpGroupDotOp)]
    async_dot = None
    if len(wgmmas) == 1:
        dot = wgmmas[0]
        slot = in_flight_slot(dot, block, uses)
        if slot is not None and uses.get(args[slot], []) == [dot] \
                and dot.operands[2] is args[slot] and _may_stay_in_flight(dot, block, pipelined):
            async_dot = dot
    return async_dot


def uses_after(loop: Operation, index: int) -> bool:
    res = loop.results[index]
    block = loop.parent
    for top in block.ops[block.ops.index(loop) + 1:]:
        for op in top.walk():
            if res in op.operands:
                return True
    return False


# ---- rewriting -------------------------------------------------------------------------------

def _predicated_mask(at: _At, load: Operation, mapping, pred: Value) -> Value:
    """The load's mask (mapped) and-ed with the scalar `pred` (this iteration exists)."""
    ptr, mask, _ = LoadOp.parts(load)
    ty = ptr.type
    if not isinstance(ty, TensorType):  # a scalar index load
        return pred if mask is None else BinaryOp.build(at.b, _INT_AND,
                                                        mapping.get(mask, mask), pred)
    mask_ty = TensorType(tuple(ty.shape), int1, ty.layout)
    splat = SplatOp.build(at.b, pred, ty.shape, ty.layout)
    if mask is None:
        return splat
    mask = mapping.get(mask, mask)
    if mask.type != mask_ty:  # layout assignment gives a load's mask its pointers' layout
        raise ValueError(f"load mask {mask.type} does not match its pointers {ty}")
    return BinaryOp.build(at.b, _INT_AND, mask, splat)


def _issue(at: _At, plan: _Plan, ops: List[Operation], mapping, slot: Value,
           pred: Value) -> None:
    """Stage 0 under `mapping`: address ops cloned, loads as async copies into `slot`."""
    by_load = {o.load: o for o in plan.operands}
    for op in ops:
        operand = by_load.get(op)
        if operand is None and _is(op, LoadOp):  # an index load: masked off past the end
            if op.result in mapping:  # loaded an iteration earlier (`index_stage`)
                continue
            ptr, _, other = LoadOp.parts(op)
            mask = _predicated_mask(at, op, mapping, pred)
            mapping[op.result] = LoadOp.build(
                at.b, mapping.get(ptr, ptr), mask, None if other is None else
                mapping.get(other, other), op.attrs.get("cache", ""), op.attrs.get("evict", ""))
            continue
        if operand is None:
            _clone(op, mapping, at.b)
            continue
        ptr = LoadOp.parts(op)[0]
        view = MemDescIndexOp.build(at.b, operand.ring, slot)
        mask = _predicated_mask(at, op, mapping, pred)
        AsyncCopyGlobalToLocalOp.build(at.b, mapping.get(ptr, ptr), view, mask,
                                       op.attrs.get("cache", ""), op.attrs.get("evict", ""))
    AsyncCommitGroupOp.build(at.b)


def index_stage(plan: _Plan, block: Block, order: List[Operation]) -> List[Operation]:
    """The index loads of stage 0 (a paged cache's block-table entries) and the ops they
    depend on, in program order, when they can run one more iteration ahead than the ringed
    loads: their values then wait in registers for a whole iteration before the copies'
    addresses read them, instead of stalling the issue on a global load's latency (as
    Triton's pipeliner gives such loads a stage of their own). Empty when there are none,
    when one depends on a carried value, or when a reader outside stage 0 shares one."""
    ringed = {o.load for o in plan.operands}
    loads = [op for op in order if _is(op, LoadOp) and op not in ringed]
    if not loads or any(op in plan.keep for op in loads):
        return []
    ops: Set[Operation] = set()
    work = list(loads)
    while work:
        op = work.pop()
        if op in ops:
            continue
        ops.add(op)
        work += [v.owner for v in _reads(op) if v.owner in plan.stage0]
    if ops & _carried_dependent(block, plan.stage0):
        return []
    return [op for op in order if op in ops]


def _issue_indices(at: _At, ops: List[Operation], mapping, pred: Value) -> None:
    """`index_stage`'s ops under `mapping`, the loads masked off past the loop's end."""
    for op in ops:
        if _is(op, LoadOp):
            ptr, _, other = LoadOp.parts(op)
            mapping[op.result] = LoadOp.build(
                at.b, mapping.get(ptr, ptr), _predicated_mask(at, op, mapping, pred),
                None if other is None else mapping.get(other, other),
                op.attrs.get("cache", ""), op.attrs.get("evict", ""))
        else:
            _clone(op, mapping, at.b)


def pipeline_loop(plan: _Plan) -> None:
    loop, S = plan.loop, plan.num_stages
    block = loop.regions[0].block
    yield_op = block.ops[-1]
    lb, ub = loop.operands[0], loop.operands[1]
    step = _constant_step(loop)
    iv = block.args[0]
    order = [op for op in block.ops if op in plan.stage0]
    indices = index_stage(plan, block, order)
    index_loads = [op for op in indices if _is(op, LoadOp)]

    # Rings, before the loop.
    at = _At(loop.loc)
    for o in plan.operands:
        ty = o.load.result.type
        shape = (S, *ty.shape)
        o.ring = LocalAllocOp.build(at.b, SharedMemoryType(shape, ty.element, o.smem_layout,
                                                           shape))
    # Prologue: iterations 0 .. S-2, carried stage-0 values threaded through.
    carried = {block.args[1 + i]: loop.operands[3 + i] for i in plan.carried0}
    early = []
    for p in range(S - 1):
        mapping = dict(carried)
        iv_p = _iv_at(at, lb, step, p)
        mapping[iv] = iv_p
        _issue(at, plan, order, mapping, at.const(p), _less(at, iv_p, ub))
        early.append([mapping[v] for v in plan.delayed])
        carried = {block.args[1 + i]: mapping.get(yield_op.operands[i], yield_op.operands[i])
                   for i in plan.carried0}
    index_init = []
    if indices:  # the index loads of iteration S-1, read by the loop's first issue
        mapping = {iv: _iv_at(at, lb, step, S - 1)}
        _issue_indices(at, indices, mapping, _less(at, mapping[iv], ub))
        index_init = [mapping[op.result] for op in index_loads]
    at.place_before(loop)
    for i in plan.carried0:
        loop.operands[3 + i] = carried[block.args[1 + i]]
    zero, last = ConstantOp.build(at.b, 0, int32), ConstantOp.build(at.b, S - 1, int32)
    at.place_before(loop)
    read_slot = _add_carried(loop, zero, "read_slot")
    write_slot = _add_carried(loop, last, "write_slot")
    delays = carry_delayed(plan, early)
    index_args = [_add_carried(loop, v, "index_ahead") for v in index_init]

    # The body: wait, read this iteration's slot, then (or first, for mma_v2) issue ahead.
    at = _At(loop.loc)
    AsyncWaitOp.build(at.b, S - 2)
    views = {}
    for o in plan.operands:
        views[o] = MemDescIndexOp.build(at.b, o.ring, read_slot)
    header_end = block.ops[0]
    at.place_before(header_end)
    header_end = block.ops[block.ops.index(header_end) - 1]
    for o in plan.operands:
        for use in o.uses:
            consumer = use.consumer
            at = _At(consumer.loc)
            view = views[o]
            if use.trans is not None:
                view = MemDescTransOp.build(at.b, view, use.trans.attrs["order"])
            if _is(consumer, LocalAllocOp):  # wgmma reads the ring's slot itself
                value = view
            else:
                value = LocalLoadOp.build(at.b, view, consumer.result.type.layout)
            at.place_before(consumer)
            replace_all_uses(block.ops, consumer.result, value)
            erase_op(consumer)
            if use.trans is not None:
                erase_op(use.trans)
    for op in reversed(order):
        if op not in plan.keep:  # loop-invariant ops other readers share stay
            erase_op(op)

    # Stage 0 for iteration iv + (S-1) * step, into the write slot.
    at = _At(loop.loc)
    mapping = dict(zip((op.result for op in index_loads), index_args))
    ahead = _iv_at(at, iv, step, S - 1)
    mapping[iv] = ahead
    _issue(at, plan, order, mapping, write_slot, _less(at, ahead, ub))
    index_next = []
    if indices:  # after the copies: the loads of iteration iv + S wait a whole iteration
        further = {iv: _iv_at(at, iv, step, S)}
        _issue_indices(at, indices, further, _less(at, further[iv], ub))
        index_next = [further[op.result] for op in index_loads]
    next_read = _next_slot(at, read_slot, S)
    next_write = _next_slot(at, write_slot, S)
    if plan.async_dot is not None:
        dot = plan.async_dot
        dot.attrs["is_async"] = True
        wait_at = _At(dot.loc)
        deps = [dot.result] + [v for v in dot.operands[:2]]
        wait = WarpGroupDotWaitOp.build(wait_at.b, deps, 1)
        wait_at.place_after(dot)
        later = block.ops[block.ops.index(wait) + 1:]
        replace_all_uses(later, dot.result, wait.results[0])
        wait_in_branches(later, wait.results[0])
        at.place_after(wait)  # copies overwrite the slot of the wgmma `wait` retired
    else:
        # Several wgmmas: each async, waited where its result is first read
        # (wgmma_schedule.py). One left in flight across the back edge may still read the
        # slot refilled here until the body's first wait retires it.
        first_wait = None
        if sum(1 for op in block.ops if _is(op, WarpGroupDotOp)) >= 2:
            first_wait = schedule_async_dots(block, {o.ring for o in plan.operands},
                                             plan.num_threads)
        if first_wait is not None:
            at.place_after(first_wait)
        else:
            # Issue first, as a Gluon author would: one barrier after the wait both publishes
            # the landed copies and retires last iteration's reads of the slot refilled here.
            at.place_after(header_end)
    for i in plan.carried0:
        yield_op.operands[i] = mapping.get(yield_op.operands[i], yield_op.operands[i])
    yield_op.operands += [next_read, next_write, *delayed_yields(plan, delays, mapping),
                          *index_next]

    # After the loop: no copy or wgmma may still be in flight.
    at = _At(loop.loc)
    AsyncWaitOp.build(at.b, 0)
    if plan.async_dot is not None:
        result = loop.results[plan.async_slot]
        done = WarpGroupDotWaitOp.build(at.b, [result], 0)
        after = at.place_after(loop)
        replace_all_uses(loop.parent.ops[loop.parent.ops.index(after) + 1:], result,
                         done.results[0])
    else:
        at.place_after(retire_after_loop(loop, carried_in_flight(loop)))


def carry_delayed(plan, early: List[List[Value]]) -> List[List[Value]]:
    """Give each of `plan.delayed` (stage-0 values the rest of the body reads) S-1 more
    iter_args: the n-th holds the value of iteration iv + n, so the body reads the first,
    the value of its own iteration, while stage 0 computes the value S-1 iterations ahead
    (`delayed_yields` shifts them). `early[p]`: the values the prologue computed for
    iteration p. Returns the iter_args of each value. A flattened loop's epilogue reads its
    tile's position and offsets this way (Triton's pipeline expander carries them alike)."""
    loop = plan.loop
    block = loop.regions[0].block
    readers = [op for op in block.ops[:-1] if op not in plan.stage0]
    slots = []
    for n, value in enumerate(plan.delayed):
        args = [_add_carried(loop, values[n], value.name_hint) for values in early]
        replace_all_uses(readers, value, args[0])
        slots.append(args)
    return slots


def delayed_yields(plan, slots: List[List[Value]], mapping) -> List[Value]:
    """What the yield hands on for the delayed values: each one's iter_args shifted by one
    iteration, then the value stage 0 computed ahead (in `mapping`)."""
    return [v for args, value in zip(slots, plan.delayed) for v in (*args[1:], mapping[value])]


def _drop_dead_values(blocks) -> None:
    """Erase pure ops nothing reads, as the cloned address ops leave (the loads' `other`,
    which async copies do not need)."""
    changed = True
    while changed:
        changed = False
        used = set()
        for block in blocks:
            for top in block.ops:
                for op in top.walk():
                    used.update(op.operands)
        for block in blocks:
            for op in list(block.ops):
                if op.regions or not op.results or any(r in used for r in op.results):
                    continue
                if op.opdef.is_pure(op) or _is(op, CastOp):
                    erase_op(op)
                    changed = True


def pipeline_module(module: Module) -> None:
    """The `software_pipelining` pass."""
    from shared_codegen.analysis.axis_info import AxisInfo
    from tile.passes.layout_assignment import dot_target
    from shared_codegen.lowering.backend import parse_target
    from tile.passes.tma_pipelining import pipeline_tma_loop, plan_tma_loop

    if parse_target(dot_target(module))[0] < 80:
        return  # cp.async needs sm_80
    default = int(module.attrs.get("num_stages", 3))
    num_threads = 32 * int(module.attrs.get("num_warps", 4))
    for fn in module.functions.values():
        loops = [op for op in fn.walk() if _is(op, ForOp)]
        if not loops:
            continue
        width_ctx = _CopyWidth(AxisInfo.analyze(fn))
        plans = []
        for loop in loops:
            stages = int(loop.attrs.get("num_stages", default))
            plan = plan_loop(loop, stages, width_ctx)
            if plan is not None:
                plan.num_threads = num_threads
                plans.append((pipeline_loop, plan))
            elif parse_target(dot_target(module))[0] >= 90:  # TMA: descriptor loads
                plan = plan_tma_loop(loop, stages)
                if plan is not None:
                    plans.append((pipeline_tma_loop, plan))
        for rewrite, plan in plans:
            outer = plan.loop.parent  # the loop may end up inside a guard (wgmma_schedule)
            rewrite(plan)
            _drop_dead_values([outer, plan.loop.parent, plan.loop.regions[0].block])


__all__ = ["pipeline_module", "plan_loop", "pipeline_loop", "mma_v2_smem_layout"]
