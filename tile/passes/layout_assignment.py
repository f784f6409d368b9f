"""Layout assignment: turn layout-free tile IR into IR where every tensor has a layout.

The output is what a Gluon author could have written: each tensor value (op results, block
arguments of `scf` regions, `scf` results) carries a `gluon.layouts` layout, and the only place
two layouts meet is a `ttg.convert_layout`.

Algorithm (Triton's Coalesce + RemoveLayoutConversions, simplified to a union-find):

0. Rematerialize cheap values per use. Index arithmetic (`make_range`, constants, splats,
   broadcasts, integer math, `addptr`, compares) is cloned for each of its uses, so
   `offs_k[None, :]` for A and `offs_k[:, None]` for B do not force one range into two slice
   layouts; the `cse` pass merges the copies that end up identical.
1. Axis analysis, then one coalesced `BlockedLayout` per global memory access (`coalesce.py`).
2. Constraints (`layout_constraints.py`): union-find classes of values that must share a
   layout, structural relations between classes (slice / trans / reshape) and soft ones
   (a load's result and its pointers).
3. Solve: classes holding the pointers of a memory access take that access's layout, the most
   important access first (loads, then bigger tiles); an access of fewer elements than the
   program has threads only if no other layout reached its class. Layouts then flow along
   relations, structural ones before soft ones, so `offs_m` becomes `SliceLayout(1, parent)`
   of the tile it indexes. Classes nothing reached get `default_blocked_layout`, higher rank
   first.
4. Materialize: write the layouts into the types, and where an op's own rule is broken
   (expand_dims of a non-slice, a reduce whose class wants another layout, a load whose result
   class differs from its pointers', ...) insert `ttg.convert_layout`.
"""

from __future__ import annotations

from collections import deque
from typing import Dict, List, Optional, Tuple

from shared_codegen.analysis.axis_info import AxisInfo
from shared_codegen.errors import CompilationError
from shared_codegen.ir.core import Function, Module, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import insert_after, insert_before
from shared_codegen.layouts import BlockedLayout, default_blocked_layout
from shared_codegen.layouts.relations import (STRUCTURAL, PointerAccess, Prefer, Slice, Split,
                                              equivalent, reshaped_layout, transposed_layout)
from shared_codegen.ops.memory.definition import LoadOp, StoreOp
from shared_codegen.ops.tensor.definition import ConvertLayoutOp
from shared_codegen.lowering.context import MAX_SHARED_BYTES
from tile.passes.dot_acceleration import operand_buffer_bytes, plan_dots, rewrite_dots
from tile.passes.coalesce import AccessPlan, memory_pointer, plan_all_accesses
from tile.passes.layout_constraints import Constraints, collect_constraints, is_tensor
from tile.passes.rematerialize import rematerialize_cheap_values


class LayoutAssignmentError(CompilationError, RuntimeError):
    pass


# ---- solving ---------------------------------------------------------------------------------

class _Solver:
    """Gives every union-find class one layout (see the module docstring, step 3)."""

    def __init__(self, c: Constraints, plans: List[AccessPlan], num_warps: int,
                 threads_per_warp: int):
        self.c = c
        self.plans = plans
        self.num_warps = num_warps
        self.threads_per_warp = threads_per_warp
        self.layout: Dict[Value, object] = {}
        self.by_root: Dict[Value, List] = {}
        self.shape: Dict[Value, Tuple[int, ...]] = {}
        for v in c.values:
            root = c.find(v)
            best = self.shape.get(root)
            if best is None or v.type.numel > _numel(best):
                self.shape[root] = tuple(v.type.shape)
        for rel in c.relations:
            for end in (rel.a, rel.b):
                self.by_root.setdefault(c.find(end), []).append(rel)
        self.strong: deque = deque()
        self.soft: deque = deque()

    def assign(self, root: Value, layout) -> None:
        self.layout[root] = layout
        for rel in self.by_root.get(root, ()):
            (self.soft if isinstance(rel, Prefer) else self.strong).append(rel)

    def solve(self, fixed: Dict[Value, object] = None) -> Dict[Value, object]:
        """`fixed`: class roots whose layout is decided already (dot accumulators); they win
        over memory accesses, as Triton's MMA layouts do."""
        anchors: Dict[Value, AccessPlan] = {}
        for plan in self.plans:
            root = self.c.find(memory_pointer(plan.op))
            if root not in anchors or plan.priority > anchors[root].priority:
                anchors[root] = plan
        cheap = []
        for root, plan in sorted(anchors.items(), key=lambda kv: kv[1].priority, reverse=True):
            if self._cheap_in_any_layout(plan):
                cheap.append((root, plan))
            else:
                self.assign(root, plan.layout)
        for root, layout in (fixed or {}).items():
            self.assign(root, layout)
        self.propagate()
        # A load or store of fewer elements than the program has threads costs about the
        # same in any layout (lanes asking for one address share one transaction; a
        # replicated store has one writer per element; Triton's isExpensiveLoadOrStore),
        # while its coalesced layout would cost a conversion through shared memory, with
        # barriers, wherever the value's producer or consumer wants another one (a block
        # table's entries feeding a gathered tile's row addresses, a row statistic kept in
        # an MMA layout). So such an access anchors its class only when no other layout
        # has reached it.
        for root, plan in cheap:
            if root not in self.layout:
                self.assign(root, plan.layout)
                self.propagate()
        while True:
            left = [r for r in self.shape if r not in self.layout]
            if not left:
                return self.layout
            # Higher rank first, so tiles get a blocked layout and their ranges slices of it.
            root = max(left, key=lambda r: (len(self.shape[r]), _numel(self.shape[r])))
            self.assign(root, default_blocked_layout(self.shape[root], self.num_warps,
                                                     self.threads_per_warp))
            self.propagate()

    def _cheap_in_any_layout(self, plan: AccessPlan) -> bool:
        return (isinstance(plan.op.opdef, (LoadOp, StoreOp))
                and memory_pointer(plan.op).type.numel < self.num_warps * self.threads_per_warp)

    def propagate(self) -> None:
        while self.strong or self.soft:
            rel = self.strong.popleft() if self.strong else self.soft.popleft()
            ra, rb = self.c.find(rel.a), self.c.find(rel.b)
            la, lb = self.layout.get(ra), self.layout.get(rb)
            if (la is None) == (lb is None):
                continue  # both known (a conflict is fixed at materialization) or neither yet
            if la is None:
                derived = rel.backward(lb)
                if derived is not None:
                    self.assign(ra, derived)
            else:
                derived = rel.forward(la)
                if derived is not None:
                    self.assign(rb, derived)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---- materializing -------------------------------------------------------------------------

def _convert(value: Value, layout, loc) -> Operation:
    op = Operation(ConvertLayoutOp.name, [value], [value.type.with_layout(layout)], loc=loc)
    op.result.name_hint = value.name_hint
    return op


def convert_operand(op: Operation, index: int, layout, exact: bool = False) -> None:
    """Make operand `index` of `op` arrive in `layout` (a convert right before `op`).

    `exact`: the op's verifier wants this very layout object, not just the same placement."""
    v = op.operands[index]
    if not is_tensor(v) or v.type.layout == layout or (
            not exact and equivalent(v.type.layout, layout, v.type.shape)):
        return
    cvt = insert_before(op, _convert(v, layout, op.loc))
    op.operands[index] = cvt.result


def pin_result(fn: Function, op: Operation, index: int, layout) -> None:
    """The op can only produce `layout`; convert to the layout its users were given."""
    res = op.results[index]
    wanted = res.type.layout
    if equivalent(layout, wanted, res.type.shape):
        return
    res.type = res.type.with_layout(layout)
    cvt = insert_after(op, _convert(res, wanted, op.loc))
    replace_all_uses(list(fn.body.block.ops), res, cvt.result)
    cvt.operands[0] = res


def _access_layout(op: Operation, plan: Optional[AccessPlan]):
    """The layout a memory op accesses memory in: its pointers' class layout, unless that
    walks memory along another dimension than the op's own coalesced layout would (then
    coalescing is worth the conversions)."""
    ptr_layout = op.operands[0].type.layout
    if plan is None or not isinstance(ptr_layout, BlockedLayout):
        return ptr_layout
    if ptr_layout.order[0] != plan.order[0]:
        return plan.layout
    return ptr_layout


def fix_structural(fn, op, relation) -> None:
    """Restore a slice / trans / reshape relation the classes' layouts broke."""
    if relation.a in op.results:  # a reduce's result: what its operand implies
        pin_result(fn, op, op.results.index(relation.a),
                   relation.backward(relation.b.type.layout))
    elif isinstance(relation, Slice):
        # expand_dims: a slice names no parent, so the operand arrives converted to exactly
        # the slice of the result's layout.
        index = op.operands.index(relation.a)
        convert_operand(op, index, relation.backward(relation.b.type.layout), exact=True)
    elif isinstance(relation, Split) and relation.operand_layout() is not None:
        # split needs both halves of each pair in one thread: convert its operand.
        convert_operand(op, 0, relation.operand_layout(), exact=True)
    else:  # trans / reshape: the result renames its operand's registers
        pin_result(fn, op, op.results.index(relation.b), relation.forward(relation.a.type.layout))


def fix_memory(fn, op, plans) -> None:
    if memory_pointer(op) is None:
        return
    access = _access_layout(op, plans.get(op))
    for i in range(len(op.operands)):
        convert_operand(op, i, access)
    for i, res in enumerate(op.results):
        if is_tensor(res):
            pin_result(fn, op, i, access)


def fix_op(fn, op, plans) -> None:
    """Insert the conversions `op`'s layout rule needs once every class has its layout."""
    rule = op.opdef.layout_rule if op.opdef is not None else None
    if rule is None:
        return
    if isinstance(rule, PointerAccess):
        fix_memory(fn, op, plans)
        return
    for relation in rule.relations(op):
        if isinstance(relation, STRUCTURAL) and is_tensor(relation.a) and is_tensor(relation.b):
            fix_structural(fn, op, relation)


# ---- the pass ------------------------------------------------------------------------------

def _stored_value(op: Operation) -> Optional[Value]:
    """The tensor a `tt.store` writes (None for other memory ops)."""
    if isinstance(op.opdef, StoreOp) and len(op.operands) > 1 and is_tensor(op.operands[1]):
        return op.operands[1]
    return None


def _layout_state(fn: Function) -> str:
    """'free' (no tensor has a layout), 'explicit' (all do) or 'mixed'."""
    seen = set()
    values = list(fn.args)
    for op in fn.walk():
        values.extend(op.results)
        for region in op.regions:
            values.extend(region.block.args)
    for v in values:
        if is_tensor(v):
            seen.add(v.type.layout is None)
    if seen == {False}:
        return "explicit"
    return "free" if seen <= {True} else "mixed"


def assign_function_layouts(fn: Function, num_warps: int, threads_per_warp: int = 32,
                            target: str = "sm_90a", num_stages: int = 3) -> None:
    state = _layout_state(fn)
    if state == "explicit":
        return  # Gluon IR: layouts were written by hand
    if state == "mixed":
        raise LayoutAssignmentError(
            f"function {fn.name!r} has tensors with and without layouts; layout assignment "
            "takes layout-free (tile) IR only")
    rematerialize_cheap_values(fn)
    dots = plan_dots(list(fn.walk()), target, num_warps)
    info = AxisInfo.analyze(fn)
    ops = list(fn.walk())
    plans = plan_all_accesses(ops, info, num_warps, threads_per_warp)
    constraints = collect_constraints(ops)
    for arg in fn.args:
        constraints.add(arg)
    fixed = {constraints.find(op.result): plan.acc_layout for op, plan in dots.items()}
    # A store of an accumulator (or values computed from it) converts to its coalesced
    # layout through shared memory (16-byte stores; measured faster on the H100) when the
    # conversion's scratch fits beside the pipelined operand buffers; otherwise it stores
    # from the MMA layout, its pointers following.
    budget = MAX_SHARED_BYTES - operand_buffer_bytes(dots, num_stages)

    def keeps_anchor(plan) -> bool:
        value = _stored_value(plan.op)
        if value is None or constraints.find(value) not in fixed:
            return True
        return value.type.numel * max(1, value.type.element.bits // 8) <= budget

    anchored = [p for p in plans if keeps_anchor(p)]
    layouts = _Solver(constraints, anchored, num_warps, threads_per_warp).solve(fixed)
    for v in constraints.values:
        v.type = v.type.with_layout(layouts[constraints.find(v)])
    plan_of = {p.op: p for p in plans}
    for op in ops:
        fix_op(fn, op, plan_of)
    rewrite_dots(dots, convert_operand)


def assign_layouts(module: Module) -> None:
    """The `layout_assignment` pass: reads module attrs `num_warps` (4), `threads_per_warp`
    (32), `target` and `num_stages` (3, the pipeliner's depth: the shared memory its operand
    buffers will take decides how accumulators are stored)."""
    num_warps = int(module.attrs.get("num_warps", 4))
    threads_per_warp = int(module.attrs.get("threads_per_warp", 32))
    for fn in module.functions.values():
        assign_function_layouts(fn, num_warps, threads_per_warp, dot_target(module),
                                int(module.attrs.get("num_stages", 3)))


def dot_target(module: Module) -> str:
    """The target whose instructions `tl.dot` uses: the compile target, or for the CPU
    interpreter SC_TARGET (default sm_90a), so it runs the IR that GPU would."""
    target = module.stage_results.get("target") or module.attrs.get("target")
    if not target or target == "interpreter":
        from shared_codegen import config
        target = config.get("SC_TARGET") or "sm_90a"
    return target


__all__ = ["assign_layouts", "assign_function_layouts", "transposed_layout",
           "reshaped_layout", "LayoutAssignmentError"]
