"""Building the partitions of a warp-specialized loop (the plan: warp_specialize.py).

Steps, on the IR the tile passes left (each TMA load a fresh buffer, barrier and wait):
  1. the rings and the `ready` / `empty` barrier pairs, before the loop;
  2. the `ttg.warp_specialize` op in the loop's place, the loop moved into its default
     region (the consumer), its results the op's;
  3. the producer: a fresh loop nest in worker region 0 that clones the load coordinates
     and issues the copies into the ring (`_fill_producer`);
  4. the consumer: the loop's loads replaced by a wait on `ready` and views of the slot, the
     slot handed back on `empty` once the wgmma reading it retired (`_consume`);
  5. the barriers invalidated after the op, when both partitions have returned.

Both sides count `item`, the number of slots consumed so far: slot = item % S and the
phase parity is (item / S) & 1, so the bookkeeping is the same on both sides and runs on
across the tiles of a persistent loop (`gluon.warp_spec.pipeline` counts the same way).
"""

from __future__ import annotations

from typing import Dict, List

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import erase_op
from shared_codegen.ir.types import SharedMemoryType, int32, int64
from shared_codegen.ops.arith.definition import (INT_COMPARE, BinaryOp, CompareOp,
                                                 ConstantOp, operator_op_name)
from shared_codegen.ops.control.definition import ForOp, YieldOp
from shared_codegen.ops.mbarrier.definition import (ArriveBarrierOp, BarrierExpectOp,
                                                    InitBarrierOp, InvalBarrierOp,
                                                    MBarrierLayout, WaitBarrierOp)
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, MemDescIndexOp,
                                                         MemDescTransOp)
from shared_codegen.ops.tma.definition import AsyncTMACopyGlobalToLocalOp
from shared_codegen.ops.tma.tensormap import (ReinterpretTensorDescriptorOp,
                                              TensormapFenceproxyAcquireOp)
from shared_codegen.ops.warp_specialize.definition import WarpSpecializeOp
from shared_codegen.ops.wgmma.definition import WarpGroupDotWaitOp
from tile.passes.loop_building import _add_carried, _At, _clone
from tile.passes.wgmma_schedule import _is
from tile.passes.warp_specialize import (PARTITION_NAMES, PRODUCER_REGS, PRODUCER_WARPS,
                                         WarpSpecPlan)

_ADD = operator_op_name("add", floating=False, signed=True)
_REM = operator_op_name("mod", floating=False, signed=True)
_DIV = operator_op_name("floordiv", floating=False, signed=True)
_AND = operator_op_name("and", floating=False, signed=True)
_XOR = operator_op_name("xor", floating=False, signed=True)


class _Ring:
    """The shared memory both partitions use: one ring per load, one barrier pair a slot."""

    def __init__(self, rings: Dict[Operation, Value], ready: Value, empty: Value, stages: int):
        self.rings, self.ready, self.empty, self.stages = rings, ready, empty, stages

    def values(self) -> List[Value]:
        return list(self.rings.values()) + [self.ready, self.empty]


def _const(b: Builder, value: int) -> Value:
    return ConstantOp.build(b, value, int32)


def _named(v: Value, name: str) -> Value:
    v.name_hint = name
    return v


def _slot_and_parity(b: Builder, item: Value, stages: int, producer: bool):
    """(slot, phase parity) of `item`. The producer waits for the parity before the
    consumer's: its round r waits for the consumer's release of round r - 1."""
    count = _const(b, stages)
    slot = _named(BinaryOp.build(b, _REM, item, count), "slot")
    parity = BinaryOp.build(b, _AND, BinaryOp.build(b, _DIV, item, count), _const(b, 1))
    if producer:
        parity = BinaryOp.build(b, _XOR, parity, _const(b, 1))
    return slot, _named(parity, "phase")


def _previous_slot(b: Builder, item: Value, stages: int) -> Value:
    """The slot of item - 1, kept non-negative for item 0 (whose release is predicated off)."""
    return BinaryOp.build(b, _REM, BinaryOp.build(b, _ADD, item, _const(b, stages - 1)),
                          _const(b, stages))


# ---- step 1: rings and barriers ----------------------------------------------------------------

def _allocate(plan: WarpSpecPlan) -> _Ring:
    S = plan.num_stages
    at = _At(plan.loop.loc)
    rings = {}
    for load in plan.tma.loads:
        ty = load.buffer.result.type
        shape = (S, *ty.shape)
        ring = LocalAllocOp.build(at.b, SharedMemoryType(shape, ty.element, ty.layout, shape))
        desc = AsyncTMACopyGlobalToLocalOp.parts(load.copy)[0]
        stem = desc.name_hint[:-5] if desc.name_hint.endswith("_desc") else ""
        rings[load] = _named(ring, f"{stem}_ring" if stem else "")
    bars = SharedMemoryType((S, 1), int64, MBarrierLayout(), (S, 1))
    ready = _named(LocalAllocOp.build(at.b, bars), "ready")
    empty = _named(LocalAllocOp.build(at.b, bars), "empty")
    for s in range(S):
        # One arrival each: the producer's expect (plus the bytes) fills a slot; the
        # consumer's release is one thread's arrive after its partition barrier.
        InitBarrierOp.build(at.b, MemDescIndexOp.build(at.b, ready, _const(at.b, s)), 1)
        InitBarrierOp.build(at.b, MemDescIndexOp.build(at.b, empty, _const(at.b, s)), 1)
    at.place_before(plan.loop)
    return _Ring(rings, ready, empty, S)


# ---- step 3: the producer ----------------------------------------------------------------------

def _fill_producer(plan: WarpSpecPlan, block: Block, mapping: Dict[Value, Value],
                   ring: _Ring) -> None:
    """Worker region 0: the loop nest again, with only what the loads need."""
    loop, producer = plan.loop, plan.producer
    b = Builder(block, loop.loc)
    for const in producer.constants:
        _clone(const, mapping, b)
    for desc in producer.descriptors:
        # A descriptor the kernel wrote: the default warps published it (release) before
        # the hand-off; this warp acquires it for the tensor-map proxy before its copies.
        ptr = mapping[desc.owner.operands[0]]
        TensormapFenceproxyAcquireOp.build(b, ptr)
        mapping[desc] = _named(ReinterpretTensorDescriptorOp.build(b, ptr, desc.type),
                               desc.name_hint)
    item = _named(_const(b, 0), "item")
    if plan.persistent:
        body = loop.regions[0].block
        outer = ForOp.build(b, *(mapping.get(v, v) for v in loop.operands[:3]), [item],
                            iv_name=body.args[0].name_hint)
        inner = outer.regions[0].block
        mapping[body.args[0]] = inner.args[0]
        ib = Builder(inner, loop.loc)
        for op in producer.outer_ops:
            _clone(op, mapping, ib)
        done = _producer_k_loop(plan, ib, mapping, _named(inner.args[1], "item"), ring)
        YieldOp.build(ib, [done])
    else:
        _producer_k_loop(plan, b, mapping, item, ring)
    YieldOp.build(b, [])


def _producer_k_loop(plan: WarpSpecPlan, b: Builder, mapping, item: Value,
                     ring: _Ring) -> Value:
    k_loop, tma = plan.k_loop, plan.tma
    body = k_loop.regions[0].block
    yield_op = body.ops[-1]
    m = lambda v: mapping.get(v, v)  # noqa: E731
    inits = [m(k_loop.operands[3 + i]) for i in tma.carried0] + [item]
    loop = ForOp.build(b, *(m(v) for v in k_loop.operands[:3]), inits,
                       iv_name=body.args[0].name_hint)
    inner = loop.regions[0].block
    mapping[body.args[0]] = inner.args[0]
    for j, i in enumerate(tma.carried0):
        mapping[body.args[1 + i]] = _named(inner.args[1 + j], body.args[1 + i].name_hint)
    item = _named(inner.args[-1], "item")
    kb = Builder(inner, k_loop.loc)
    slot, parity = _slot_and_parity(kb, item, ring.stages, producer=True)
    # The worker sees the rings and barriers through its block arguments (`mapping`).
    WaitBarrierOp.build(kb, MemDescIndexOp.build(kb, mapping[ring.empty], slot), parity)
    ready = MemDescIndexOp.build(kb, mapping[ring.ready], slot)
    BarrierExpectOp.build(kb, ready, sum(load.bytes for load in tma.loads))
    by_copy = {load.copy: load for load in tma.loads}
    rings = {load: mapping[r] for load, r in ring.rings.items()}
    for op in body.ops:
        if op not in tma.stage0:
            continue
        load = by_copy.get(op)
        if load is None:
            _clone(op, mapping, kb)
            continue
        desc, _, _, coords, _ = AsyncTMACopyGlobalToLocalOp.parts(op)
        view = MemDescIndexOp.build(kb, rings[load], slot)
        AsyncTMACopyGlobalToLocalOp.build(kb, m(desc), [m(c) for c in coords], ready, view)
    nxt = _named(BinaryOp.build(kb, _ADD, item, _const(kb, 1)), "item")
    YieldOp.build(kb, [m(yield_op.operands[i]) for i in tma.carried0] + [nxt])
    loop.results[-1].name_hint = "item"
    return loop.results[-1]


# ---- step 4: the consumer ----------------------------------------------------------------------

def _ring_readers(block: Block, views: List[Value]) -> List[Operation]:
    """The top-level ops of `block` that read a slot view (or a permuted view of one)."""
    seen = set(views)
    out = []
    for top in block.ops:
        inner = list(top.walk())
        if any(v in seen for op in inner for v in op.operands):
            out.append(top)
        for op in inner:
            if _is(op, MemDescTransOp) and op.operands[0] in seen:
                seen.add(op.result)
    return out


def _consume(plan: WarpSpecPlan, ring: _Ring, item_init: Value) -> Dict[Value, Value]:
    """Rewrite the K loop in place; returns {loop result: the value retired after it}."""
    k_loop, tma, S = plan.k_loop, plan.tma, ring.stages
    block = k_loop.regions[0].block
    yield_op = block.ops[-1]
    iv, lb, ub = block.args[0], k_loop.operands[0], k_loop.operands[1]
    item = _add_carried(k_loop, item_init, "item")
    first_wait = next(op for op in block.ops for load in tma.loads
                      if op in load.barrier_ops and _is(op, WaitBarrierOp))

    # This iteration's boxes: one wait where the first load waited, the slot's views read.
    at = _At(first_wait.loc)
    slot, parity = _slot_and_parity(at.b, item, S, producer=False)
    WaitBarrierOp.build(at.b, MemDescIndexOp.build(at.b, ring.ready, slot), parity)
    views = []
    for load in tma.loads:
        view = MemDescIndexOp.build(at.b, ring.rings[load], slot)
        views.append(view)
        replace_all_uses(block.ops, load.buffer.result, view)
    at.place_before(first_wait)
    for load in tma.loads:
        for op in [load.copy] + load.barrier_ops[::-1] + [load.buffer]:
            erase_op(op)
    for op in reversed(block.ops[:]):
        if op in tma.stage0 and op not in tma.keep:
            erase_op(op)
    for i in tma.carried0:  # advanced by the producer now: left unchanged here
        yield_op.operands[i] = block.args[1 + i]
    at = _At(k_loop.loc)
    yield_op.operands.append(_named(BinaryOp.build(at.b, _ADD, item, _const(at.b, 1)),
                                    "item"))
    at.place_before(yield_op)

    if tma.async_dot is None or S < 3:
        # Several wgmmas (or one whose result the body reads) stay synchronous, as the
        # producer runs ahead of them anyway: the slot is free once the last has read it.
        # So does one wgmma over a two-slot ring: kept in flight, it would hold the slot
        # the producer must fill next, so each K step would wait out a whole TMA load;
        # retired at once, its slot is refilled while the next step computes. (Tutorial
        # 09's descriptor-persistent configs with 2 stages ran at 0.67x Triton 3.6's
        # warp-specialized kernel with the wgmma in flight, on the H100.)
        at = _At(k_loop.loc)
        ArriveBarrierOp.build(at.b, MemDescIndexOp.build(at.b, ring.empty, slot), 1)
        at.place_after(_ring_readers(block, views)[-1])
        return {}

    # One wgmma in flight: wait(1) retires the previous one, whose slot goes back (from the
    # second iteration on), as the pipeliner's refill waits for the same retirement.
    dot = tma.async_dot
    dot.attrs["is_async"] = True
    at = _At(dot.loc)
    wait = WarpGroupDotWaitOp.build(at.b, [dot.result] + list(dot.operands[:2]), 1)
    not_first = CompareOp.build(at.b, INT_COMPARE, "ne", iv, lb)
    previous = _previous_slot(at.b, item, S)
    ArriveBarrierOp.build(at.b, MemDescIndexOp.build(at.b, ring.empty, previous), 1,
                          pred=not_first)
    at.place_after(dot)
    replace_all_uses([yield_op], dot.result, wait.results[0])

    # After the loop: the last wgmma retired, its slot handed back if the loop ran.
    index = list(yield_op.operands).index(wait.results[0])
    result = k_loop.results[index]
    at = _At(k_loop.loc)
    done = WarpGroupDotWaitOp.build(at.b, [result], 0)
    ran = CompareOp.build(at.b, INT_COMPARE, "slt", lb, ub)
    last = _previous_slot(at.b, k_loop.results[-1], S)
    ArriveBarrierOp.build(at.b, MemDescIndexOp.build(at.b, ring.empty, last), 1, pred=ran)
    after = at.place_after(k_loop)
    parent = k_loop.parent
    replace_all_uses(parent.ops[parent.ops.index(after) + 1:], result, done.results[0])
    return {result: done.results[0]}


# ---- steps 2 and 5: the op ----------------------------------------------------------------------

def specialize(plan: WarpSpecPlan) -> List[Block]:
    """Rewrite the plan's loop into partitions; returns the blocks whose dead values the
    caller may drop."""
    loop = plan.loop
    top = loop.parent
    ring = _allocate(plan)
    captures = ring.values() + plan.producer.captures
    count = len(loop.results)

    at = _At(loop.loc)
    item0 = _named(_const(at.b, 0), "item")  # the consumer's count, before the op
    ws = WarpSpecializeOp.build(at.b, [captures], [r.type for r in loop.results],
                                [PRODUCER_WARPS], [PRODUCER_REGS], PARTITION_NAMES)
    at.place_before(loop)
    worker = ws.regions[1].block
    mapping: Dict[Value, Value] = {}
    for v, arg in zip(captures, worker.args):
        arg.name_hint = v.name_hint
        mapping[v] = arg
    _fill_producer(plan, worker, mapping, ring)

    # The loop becomes the default region's body.
    default = ws.regions[0].block
    top.ops.remove(loop)
    default.ops.append(loop)
    loop.parent = default
    if plan.persistent:
        tile_item = _add_carried(loop, item0, "item")
        retired = _consume(plan, ring, tile_item)
        loop.regions[0].block.ops[-1].operands.append(plan.k_loop.results[-1])
    else:
        retired = _consume(plan, ring, item0)
    outs = [retired.get(r, r) for r in loop.results[:count]]
    YieldOp.build(Builder(default, loop.loc), outs)
    rest = top.ops[top.ops.index(ws) + 1:]
    for old, new in zip(loop.results[:count], ws.results):
        new.name_hint = old.name_hint
        replace_all_uses(rest, old, new)

    at = _At(loop.loc)
    for bars in (ring.ready, ring.empty):
        for s in range(ring.stages):
            InvalBarrierOp.build(at.b, MemDescIndexOp.build(at.b, bars, _const(at.b, s)))
    at.place_after(ws)
    blocks = [top, default, loop.regions[0].block]
    if plan.persistent:
        blocks.append(plan.k_loop.regions[0].block)
    return blocks


__all__ = ["specialize"]
