"""`tl.range(..., warp_specialize=True)` on sm_90a: the loop becomes a producer partition that
issues the TMA loads and a consumer partition that runs the wgmmas, handing ring slots to
each other through mbarriers (Triton 3.6's automatic warp specialization for Hopper, in the
shape a Gluon author writes it: `examples/gemm/gemm.py`).

    rings, ready[S], empty[S]                      before the loop (one barrier pair a slot)
    ttg.warp_specialize  default (the kernel's num_warps warps, the consumer):
        for k (carried: ..., item):                slot = item % S, round = item / S
            wait ready[slot], round & 1            the slot's boxes have landed
            wgmma(ring_a[slot], ring_b[slot], acc) async; wait(1): the previous one retired
            arrive empty[(item - 1) % S]           if k > lb: hand its slot back
        wait(0); arrive empty[(item - 1) % S]      if the loop ran: the last slot back
      partition0 (1 warp, 24 registers, the producer), the same iterations:
        for k (carried: ..., item):
            wait empty[slot], (round & 1) ^ 1      the consumer is done with the slot
            expect ready[slot], A + B bytes; TMA A, B -> ring_a[slot], ring_b[slot]
    inval ready[s], empty[s]                       after both partitions have returned

A fresh barrier's phase "-1" counts as complete, so the producer's first round passes its
waits at once and runs S slots ahead of the consumer; the consumer keeps one wgmma in flight
(as the software pipeliner does), so one slot is held by it. With several wgmmas per
iteration they stay synchronous and the slot is handed back after the last one reads it.

The persistent form: the marked loop is the outer tile loop and the K loop is directly in
its body. The producer walks the same tiles (it recomputes the few scalar ops the load
coordinates need from the tile id) and the same K steps; `item` runs on across tiles on
both sides, so the next tile's operands stream in while the consumer runs the epilogue,
which stays in the default partition with everything else in the tile loop.

Registers and warps follow `ttg.warp_specialize`'s lowering (WarpPlan): the producer is one
extra warp on top of the default warps (padded to a warpgroup), its warpgroup drops to
setmaxnreg's minimum of 24 registers (it holds a few scalars: the tile, the K step, the
slot), and the default warps take what it leaves.

How many default warps: Triton 3.6's Hopper pass (`NVGPUWarpSpecialization`,
third_party/nvidia/hopper, WarpSpecialization.cpp) specializes only at num_warps=4 and then
runs the wgmmas on two 4-warp consumer warpgroups of 232 registers each, BLOCK_M split
between them, beside a producer warpgroup: 12 warps for a launch that asked for 4. The
`warp_specialize_warps` pass, before layout assignment, gives the same launch the same
consumer: when a marked loop passes `check_marked_loop` (the acceptance test this pass
runs first, too) and num_warps is 4, the module's num_warps becomes 8 if each of the loop's
tl.dots would then be a wgmma split [8, 1] over two warpgroups (BLOCK_M a multiple of 128;
with 64 rows the kernel keeps 4 warps). Every layout is then made for 8 warps, and the
WarpPlan gives 8 default warps + 1 producer = 12 (8 + 1 padded), 240 registers for the
consumer; `requested_num_warps` on the module keeps the launch's 4. num_warps=8 is two
warpgroups already and stays as it is.

Which loops: those the TMA pipeliner handles (tma_pipelining.py), at the kernel's top level,
on sm_90a, with num_stages >= 2. A marked loop outside that keeps today's software
pipelining, and a UserWarning at the loop's line says why (and, when the kernel was already
widened to 8 warps, that it runs on them).
"""

from __future__ import annotations

import warnings
from typing import List, Set, Tuple

from shared_codegen.ir.core import Module, Operation, Value
from shared_codegen.ir.types import TensorDescriptorType, TensorType
from shared_codegen.ops.arith.definition import CastOp, ConstantOp
from shared_codegen.ops.control.definition import ForOp
from shared_codegen.ops.dot.definition import DotFmaOp, DotOp, MmaV2Op
from shared_codegen.ops.memory.definition import LoadOp
from shared_codegen.ops.shared_memory.definition import LocalLoadOp, MemDescTransOp
from shared_codegen.ops.tensor.definition import TransOp
from shared_codegen.ops.tma.definition import AsyncTMACopyGlobalToLocalOp
from shared_codegen.ops.tma.tensormap import ReinterpretTensorDescriptorOp
from shared_codegen.ops.warp_specialize.definition import WarpPlan, check_capture
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp
from tile.passes.pipelining import _constant_step, _drop_dead_values, _is
from tile.passes.tma_pipelining import plan_tma_loop

# One warp issues every TMA copy (thread 0 of it does); with nothing but scalars to hold,
# its warpgroup gives the consumers all but setmaxnreg's minimum (gluon's hand-written
# GEMM, examples/gemm/gemm.py, does the same).
PRODUCER_WARPS = 1
PRODUCER_REGS = 24
PARTITION_NAMES = ("consumer", "producer")
_DOTS = (WarpGroupDotOp, MmaV2Op, DotFmaOp)
# What a dot operand passes through from the ring buffer a descriptor load fills: a permuted
# view (after layout assignment), or the transpose and the load of the buffer (before it).
_OPERAND_VIEWS = (MemDescTransOp, TransOp, LocalLoadOp)
# Triton 3.6 specializes a num_warps=4 launch with two consumer warpgroups (see above).
TRITON_WS_NUM_WARPS = 4
CONSUMER_WARPS = 8
REQUESTED_WARPS = "requested_num_warps"  # module attr: the launch's num_warps when widened
FLATTEN = "flatten"  # loop_flatten's attribute (tile/passes/loop_flatten.py)


class Decline(Exception):
    """Why a marked loop is not specialized, in the user's terms (the warning's text)."""


class ProducerSlice:
    """What the producer partition computes besides the copies: the outer loop's ops the load
    coordinates need (persistent form), the values it takes from before the loop (captures),
    the constants it rebuilds and the kernel-built descriptors it re-reads from their
    global-scratch pointer (a captured pointer, acquired again by the producer's warp)."""

    def __init__(self):
        self.outer_ops: List[Operation] = []
        self.captures: List[Value] = []
        self.constants: List[Operation] = []
        self.descriptors: List[Value] = []


class WarpSpecPlan:
    def __init__(self, loop, k_loop, tma, num_stages, producer):
        self.loop = loop            # the marked loop, at the kernel's top level
        self.k_loop = k_loop        # the loop whose TMA loads feed the wgmma (may be `loop`)
        self.tma = tma              # tma_pipelining's plan of k_loop: loads, stage 0, dots
        self.num_stages = num_stages
        self.producer = producer

    @property
    def persistent(self) -> bool:
        return self.k_loop is not self.loop


# ---- which loops -----------------------------------------------------------------------------

def _wgmma_candidate(op) -> bool:
    """A wgmma, or before layout assignment a tl.dot (the warp-count decision then asks
    dot_acceleration whether it becomes one)."""
    return _is(op, WarpGroupDotOp) or _is(op, DotOp)


def _dot_loop(loop: Operation) -> Operation:
    """The loop whose body holds the wgmma: `loop` itself, or the one loop directly in its
    body that does (the persistent form)."""
    body = loop.regions[0].block
    if any(_wgmma_candidate(op) for op in body.ops):
        return loop
    holders = [op for op in body.ops if _is(op, ForOp)
               and any(_wgmma_candidate(inner) for inner in op.walk())]
    if len(holders) == 1 and any(_wgmma_candidate(op)
                                 for op in holders[0].regions[0].block.ops):
        return holders[0]
    dots = [op for op in loop.walk() if isinstance(op.opdef, _DOTS + (DotOp,))]
    if not dots:
        raise Decline("the loop has no tl.dot")
    wgmma = [op for op in dots if _wgmma_candidate(op)]
    if not wgmma:
        raise Decline(f"its tl.dot runs as {dots[0].name}, not wgmma")
    raise Decline("its tl.dot is neither in the loop's body nor in one loop directly inside "
                  "it (the K loop of a persistent tile loop); a loop nest of another shape, "
                  "or a tl.dot under a branch, is not split into partitions")


def _descriptor_fed(k_loop: Operation) -> bool:
    """Whether a dot directly in the K loop's body reads a buffer that a descriptor load of
    the same body fills (the TMA plan's precondition, before and after layout assignment)."""
    block = k_loop.regions[0].block
    filled = {AsyncTMACopyGlobalToLocalOp.parts(op)[1] for op in block.ops
              if _is(op, AsyncTMACopyGlobalToLocalOp)}
    for dot in block.ops:
        if not _wgmma_candidate(dot):
            continue
        for v in dot.operands[:2]:
            while _is(v.owner, _OPERAND_VIEWS):
                v = v.owner.operands[0]
            if v in filled:
                return True
    return False


def _why_not_tma(k_loop: Operation) -> str:
    body = list(k_loop.regions[0].block.ops)
    if _constant_step(k_loop) is None:
        return "the K loop's step is not a positive compile-time constant"
    if not any(_is(op, AsyncTMACopyGlobalToLocalOp) for op in body):
        if any(_is(op, LoadOp) for top in body for op in top.walk()):
            return ("its tl.dot operands come from pointer loads (tl.load), which are "
                    "pipelined through cp.async; the producer partition issues "
                    "tensor-descriptor loads (desc.load, TMA) only (in the CPU interpreter "
                    "tl.make_tensor_descriptor loads are pointer loads too)")
        return "its tl.dot operands are not loaded in the loop"
    return ("its tensor-descriptor loads cannot run ahead of the tl.dot: their coordinates "
            "must come from the induction variable, values from before the loop and values "
            "the loop advances only for them, and each load must feed the wgmma directly")


def _where(op: Operation) -> str:
    loc = op.loc
    return f"`{op.opdef.user_name or op.name}` at line {loc.line}" if loc.line else \
        f"`{op.opdef.user_name or op.name}`"


def _outer_slice(loop: Operation, roots: List[Value]) -> List[Operation]:
    """The ops of the outer loop's body that compute `roots` (the K loop's inputs the
    producer needs), in program order. Each must be a pure scalar op the producer can
    recompute from the tile id and values from before the loop."""
    body = loop.regions[0].block
    chosen: Set[Operation] = set()
    work = list(roots)
    while work:
        v = work.pop()
        if v.owner is body:
            if v is not body.args[0]:
                raise Decline(f"the load coordinates depend on `{v.name_hint or 'a value'}`, "
                              f"which the tile loop carries from one tile to the next; the "
                              f"producer can recompute only what the tile id gives")
            continue
        op = v.owner
        if not isinstance(op, Operation) or op.parent is not body or op in chosen:
            continue
        if op.regions or not (op.opdef.is_pure(op) or _is(op, CastOp)) or \
                any(isinstance(r.type, TensorType) for r in op.results):
            raise Decline(f"the load coordinates depend on {_where(op)}, which the producer "
                          f"partition cannot recompute (it runs scalar arithmetic only)")
        chosen.add(op)
        work.extend(op.operands)
    return [op for op in body.ops if op in chosen]


def _k_inputs(plan_tma, k_loop: Operation) -> List[Value]:
    """The values the producer's K loop reads from outside its stage-0 ops: bounds, the
    initial values of the iter_args stage 0 advances, the descriptors and coordinates."""
    block = k_loop.regions[0].block
    by_copy = {load.copy for load in plan_tma.loads}
    defined = {block.args[0]} | {block.args[1 + i] for i in plan_tma.carried0}
    out: List[Value] = list(k_loop.operands[:3]) + \
        [k_loop.operands[3 + i] for i in plan_tma.carried0]
    for op in block.ops:
        if op not in plan_tma.stage0:
            continue
        if op.regions:
            raise Decline(f"the load coordinates are computed under a branch ({_where(op)})")
        if any(isinstance(r.type, TensorType) for r in op.results):
            raise Decline(f"the load coordinates depend on a register tensor ({_where(op)}); "
                          f"the producer partition runs scalar arithmetic only")
        reads = op.operands
        if op in by_copy:
            desc, _, _, coords, _ = AsyncTMACopyGlobalToLocalOp.parts(op)
            reads = [desc] + list(coords)
        out += [v for v in reads if v not in defined]
        defined.update(op.results)
    return out


def _producer_slice(loop: Operation, k_loop: Operation, plan_tma, kernel_args) -> ProducerSlice:
    found = ProducerSlice()
    needs = _k_inputs(plan_tma, k_loop)
    if k_loop is not loop:
        outer_body = loop.regions[0].block
        inside = [v for v in needs if v.owner is outer_body or
                  (isinstance(v.owner, Operation) and v.owner.parent is outer_body)]
        found.outer_ops = _outer_slice(loop, inside)
        needs = [v for v in needs if v not in inside] + [
            v for op in found.outer_ops for v in op.operands if v.owner is not outer_body
            and not (isinstance(v.owner, Operation) and v.owner.parent is outer_body)]
        needs += list(loop.operands[:3])
    seen: Set[Value] = set()
    for v in needs:
        if v in seen:
            continue
        seen.add(v)
        owner = v.owner
        if _is(owner, ConstantOp) and not owner.operands:
            found.constants.append(owner)
        elif isinstance(v.type, TensorType):
            raise Decline(f"the load coordinates read the register tensor "
                          f"`{v.name_hint or 'a value'}` from before the loop")
        elif _is(owner, ReinterpretTensorDescriptorOp):
            found.descriptors.append(v)
            if owner.operands[0] not in found.captures:
                found.captures.append(owner.operands[0])
        elif isinstance(v.type, TensorDescriptorType) and v not in kernel_args:
            raise Decline("a tensor descriptor the loads use is neither a kernel argument nor "
                          "made by tl.make_tensor_descriptor before the loop")
        else:
            try:
                check_capture(v.type, f"`{v.name_hint or 'a value'}`")
            except ValueError as exc:
                raise Decline(str(exc)) from None
            found.captures.append(v)
    return found


def _nested_reason(loop: Operation) -> str:
    in_loop, op = False, loop
    while True:  # up through the ops holding it: block -> region -> op
        op = getattr(getattr(op.parent, "parent", None), "parent", None)
        if not isinstance(op, Operation):
            break
        in_loop = in_loop or _is(op, ForOp)
    if in_loop:
        return ("the loop is inside another loop; the partitions are forked at the kernel's "
                "top level (mark the outer loop: its producer walks the inner one)")
    return ("the loop is inside a branch (an `if`, or the guard a nest flattened by "
            "tl.range(flatten=True) runs under: on Hopper pass flatten=False with "
            "warp_specialize=True, as tutorial 09 does); the partitions are forked at the "
            "kernel's top level")


def check_marked_loop(loop: Operation, module: Module,
                      default_stages: int) -> Tuple[Operation, int]:
    """The acceptance test of a marked loop that needs no layouts, run by the warp-count
    decision before layout assignment and by the pass after it: (the K loop, num_stages),
    or Decline with the reason."""
    from shared_codegen.lowering.backend import parse_target
    from tile.passes.layout_assignment import dot_target

    target = dot_target(module)
    if parse_target(target) != (90, "a"):
        raise Decline(f"automatic warp specialization is implemented for sm_90a (TMA "
                      f"loads feeding wgmma); the target is {target}")
    num_warps = int(module.attrs.get("num_warps", 4))
    try:
        WarpPlan.make(num_warps, [PRODUCER_WARPS], [PRODUCER_REGS], [PARTITION_NAMES[1]])
    except ValueError as exc:
        raise Decline(str(exc)) from None
    if loop.parent is not module.kernel.body.block:
        raise Decline(_nested_reason(loop))
    if loop.attrs.get(FLATTEN):  # before loop_flatten (after it, _nested_reason says it)
        raise Decline("tl.range(flatten=True) puts the loop under a guard")
    k_loop = _dot_loop(loop)
    stages = int(k_loop.attrs.get("num_stages", loop.attrs.get("num_stages",
                                                               default_stages)))
    if stages < 2:
        raise Decline(f"num_stages={stages} turns pipelining off; the producer and the "
                      f"consumer share a ring of num_stages >= 2 slots")
    if _constant_step(k_loop) is None or not _descriptor_fed(k_loop):
        raise Decline(_why_not_tma(k_loop))
    return k_loop, stages


def plan_warp_specialization(loop: Operation, module: Module,
                             default_stages: int) -> WarpSpecPlan:
    """The plan for the marked `loop`, or Decline with the reason."""
    k_loop, stages = check_marked_loop(loop, module, default_stages)
    tma = plan_tma_loop(k_loop, stages)
    if tma is None:
        raise Decline(_why_not_tma(k_loop))
    if tma.carried_dot is not None:
        raise Decline("its last tl.dot stays in flight across iterations (attention's "
                      "schedule, which the software pipeliner keeps); the producer/consumer "
                      "split keeps one wgmma in flight within an iteration, or none")
    if getattr(tma, "delayed", None):
        raise Decline("the loop body reads values computed from what its loads advance (a "
                      "flattened nest's tile offsets); only the producer advances them")
    producer = _producer_slice(loop, k_loop, tma, set(module.kernel.args))
    return WarpSpecPlan(loop, k_loop, tma, stages, producer)


# ---- how many warps the consumer runs on (before layout assignment) --------------------------

def _marked_loops(module: Module) -> List[Operation]:
    return [op for op in module.kernel.walk() if _is(op, ForOp)
            and op.attrs.get("warp_specialize")]


def _splits_over_two_warpgroups(dot: Operation, target: str) -> bool:
    """Whether `dot` on 8 warps is a wgmma whose warpgroups each own half of BLOCK_M."""
    from tile.passes.dot_acceleration import plan_dot

    plan = plan_dot(dot, target, CONSUMER_WARPS)
    return plan.kind == "wgmma" and list(plan.acc_layout.warps_per_cta) == [CONSUMER_WARPS, 1]


def _chained_dots(k_loop: Operation) -> bool:
    """Whether a tl.dot of the K loop's body reads, through the body's ops, another one's
    result (its A or B operand; the accumulator chain of one dot does not count)."""
    block = k_loop.regions[0].block
    dots = [op for op in block.ops if _is(op, DotOp)]
    reached = set()
    for op in block.ops:  # program order: a value's producer comes before its readers
        if any(v.owner in dots or v in reached for v in op.operands if v.owner is not None):
            if _is(op, DotOp) and any(v.owner in dots or v in reached
                                      for v in op.operands[:2] if v.owner is not None):
                return True
            if not _is(op, DotOp):
                reached.update(op.results)
    return False


def warp_specialize_warps(module: Module) -> None:
    """The `warp_specialize_warps` pass (before layout assignment): a num_warps=4 kernel
    whose marked loop the warp-specialization pass will take runs its consumer on two
    warpgroups, as Triton 3.6 does (see the module docstring); the module's num_warps,
    which layouts, the warp plan, the launch and the interpreter read, becomes 8."""
    from tile.passes.layout_assignment import dot_target

    if int(module.attrs.get("num_warps", 4)) != TRITON_WS_NUM_WARPS:
        return
    default = int(module.attrs.get("num_stages", 3))
    k_loops = []
    for loop in _marked_loops(module):
        try:
            k_loops.append(check_marked_loop(loop, module, default)[0])
        except Decline:
            continue  # the pass says why, after layout assignment
    target = dot_target(module)
    # A K loop whose dots feed one another (attention: S = Q K^T, then P V) keeps its last
    # wgmma in flight across iterations, which the pass declines after layout assignment:
    # widened for nothing, the kernel would run unspecialized on twice its warps.
    k_loops = [k_loop for k_loop in k_loops if not _chained_dots(k_loop)]
    dots = [op for k_loop in k_loops for op in k_loop.regions[0].block.ops if _is(op, DotOp)]
    if dots and all(_splits_over_two_warpgroups(dot, target) for dot in dots):
        module.attrs[REQUESTED_WARPS] = TRITON_WS_NUM_WARPS
        module.attrs["num_warps"] = CONSUMER_WARPS


# ---- the pass --------------------------------------------------------------------------------

def _warn(loop: Operation, module: Module, reason: str) -> None:
    loc = loop.loc
    text = (f"{loc.file}:{loc.line}: tl.range(warp_specialize=True) in `{module.kernel.name}` "
            f"is not applied: {reason}; the loop is software-pipelined as without it")
    requested = module.attrs.get(REQUESTED_WARPS)
    if requested is not None:
        text += (f", on {module.attrs['num_warps']} warps: the kernel launched with "
                 f"num_warps={requested} was given two consumer warpgroups before layout "
                 f"assignment, as Triton's warp specialization does")
    if loc.source_line:
        text += f"\n    {loc.source_line.strip()}"
    warnings.warn_explicit(text, UserWarning, loc.file, loc.line or 1)


def warp_specialize_module(module: Module) -> None:
    """The `warp_specialization` pass: split each loop marked `warp_specialize` into a TMA
    producer partition and a wgmma consumer partition (see the module docstring)."""
    from tile.passes.warp_specialize_rewrite import specialize

    marked = _marked_loops(module)
    if not marked:
        return
    default = int(module.attrs.get("num_stages", 3))
    done: List[Operation] = []
    warned = set()
    for loop in marked:
        loop.attrs.pop("warp_specialize", None)
        if any(inner is loop for outer in done for inner in outer.walk()):
            continue  # inside a loop already split: its partitions hold it
        try:
            plan = plan_warp_specialization(loop, module, default)
        except Decline as why:
            # One warning a source loop (a pass before may have copied it, flattening).
            if (loop.loc.file, loop.loc.line) not in warned:
                warned.add((loop.loc.file, loop.loc.line))
                _warn(loop, module, str(why))
            continue
        blocks = specialize(plan)
        _drop_dead_values(blocks)
        done.append(loop)


__all__ = ["warp_specialize_module", "warp_specialize_warps", "plan_warp_specialization",
           "check_marked_loop", "WarpSpecPlan", "Decline", "PRODUCER_WARPS", "PRODUCER_REGS",
           "REQUESTED_WARPS"]
