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
   important access first (loads, then bigger tiles). Layouts then flow along relations,
   structural ones before soft ones, so `offs_m` becomes `SliceLayout(1, parent)` of the tile
   it indexes. Classes nothing reached get `default_blocked_layout`, higher rank first.
4. Materialize: write the layouts into the types, and where an op's own rule is broken
   (expand_dims of a non-slice, a reduce whose class wants another layout, a load whose result
   class differs from its pointers', ...) insert `ttg.convert_layout`.
"""

from __future__ import annotations

from collections import deque
from typing import Dict, List, Optional, Tuple

from shared_codegen.analysis.axis_info import AxisInfo
from shared_codegen.ir.core import Function, Module, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import insert_after, insert_before
from shared_codegen.layouts import (
    BlockedLayout,
    DistributedLinearLayout,
    SliceLayout,
    default_blocked_layout,
    to_linear_layout,
)
from shared_codegen.layouts.linear_layout import reshape_coords
from tile.passes.coalesce import AccessPlan, memory_pointer, plan_all_accesses
from tile.passes.layout_constraints import Constraints, Relation, collect_constraints, is_tensor
from tile.passes.rematerialize import rematerialize_cheap_values


class LayoutAssignmentError(RuntimeError):
    pass


# ---- layout algebra the relations need -------------------------------------------------------

def transposed_layout(layout, order, src_shape):
    """The layout of `trans(x, order)` that makes the transpose a register rename."""
    if isinstance(layout, BlockedLayout):
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        return BlockedLayout([layout.size_per_thread[d] for d in order],
                             [layout.threads_per_warp[d] for d in order],
                             [layout.warps_per_cta[d] for d in order],
                             [inverse[d] for d in layout.order])
    ll = to_linear_layout(layout, src_shape)
    dst_shape = [src_shape[d] for d in order]
    return _linear_from_bases(ll, lambda v: tuple(v[d] for d in order), dst_shape)


def reshaped_layout(layout, src_shape, dst_shape):
    """The layout of a row-major reshape that keeps every element in its register.

    With power-of-two sizes, the row-major flat index is the concatenation of the coordinate
    bits, so each basis vector maps to a basis vector of the new shape."""
    ll = to_linear_layout(layout, src_shape)
    return _linear_from_bases(ll, lambda v: reshape_coords(v, src_shape, dst_shape), dst_shape)


def _linear_from_bases(ll, move, dst_shape):
    bases = {name: [move(tuple(v)) for v in vectors] for name, vectors in ll.bases.items()}
    linear = DistributedLinearLayout(bases.get("register", []), bases.get("lane", []),
                                     bases.get("warp", []), bases.get("block", []), dst_shape)
    return as_blocked(linear, dst_shape) or linear


def as_blocked(layout, shape) -> Optional[BlockedLayout]:
    """The BlockedLayout placing elements exactly like `layout` for `shape`, if there is one.

    Readers (and the Gluon converter) know blocked layouts; a derived linear layout that is
    secretly blocked is printed as one. The candidate is read off the bases (registers below
    the first lane step of a dim form the per-thread block, lanes and warps count per dim,
    the order is the order dims first appear in) and kept only if it matches exactly."""
    ll = to_linear_layout(layout, shape)
    bases = ll.bases
    if bases.get("block"):
        return None
    rank = len(shape)
    dims_seen: List[int] = []
    counts = {name: [0] * rank for name in ("register", "lane", "warp")}
    first_thread_step = [None] * rank
    for name in ("register", "lane", "warp"):
        for vec in bases.get(name, []):
            nonzero = [d for d, c in enumerate(vec) if c]
            if len(nonzero) != 1:
                return None
            d = nonzero[0]
            if d not in dims_seen:
                dims_seen.append(d)
            if name != "register" and first_thread_step[d] is None:
                first_thread_step[d] = vec[d]
    for vec in bases.get("register", []):
        d = next(i for i, c in enumerate(vec) if c)
        if first_thread_step[d] is None or vec[d] < first_thread_step[d]:
            counts["register"][d] += 1
    for name in ("lane", "warp"):
        for vec in bases.get(name, []):
            counts[name][next(i for i, c in enumerate(vec) if c)] += 1
    order = dims_seen + [d for d in reversed(range(rank)) if d not in dims_seen]
    try:
        candidate = BlockedLayout([1 << n for n in counts["register"]],
                                  [1 << n for n in counts["lane"]],
                                  [1 << n for n in counts["warp"]], order)
    except ValueError:
        return None
    return candidate if equivalent(candidate, layout, shape) else None


def equivalent(a, b, shape) -> bool:
    if a == b:
        return True
    try:
        return to_linear_layout(a, shape) == to_linear_layout(b, shape)
    except ValueError:
        return False


def _inverse(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return tuple(inv)


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
        self.by_root: Dict[Value, List[Relation]] = {}
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
            (self.soft if rel.kind == "soft" else self.strong).append(rel)

    def solve(self) -> Dict[Value, object]:
        anchors: Dict[Value, AccessPlan] = {}
        for plan in self.plans:
            root = self.c.find(memory_pointer(plan.op))
            if root not in anchors or plan.priority > anchors[root].priority:
                anchors[root] = plan
        for root, plan in sorted(anchors.items(), key=lambda kv: kv[1].priority, reverse=True):
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

    def propagate(self) -> None:
        while self.strong or self.soft:
            rel = self.strong.popleft() if self.strong else self.soft.popleft()
            ra, rb = self.c.find(rel.a), self.c.find(rel.b)
            la, lb = self.layout.get(ra), self.layout.get(rb)
            if (la is None) == (lb is None):
                continue  # both known (a conflict is fixed at materialization) or neither yet
            if la is None:
                derived = derive_backward(rel, lb)
                if derived is not None:
                    self.assign(ra, derived)
            else:
                derived = derive_forward(rel, la)
                if derived is not None:
                    self.assign(rb, derived)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def derive_forward(rel: Relation, la):
    """b's layout from a's, or None when the relation does not determine it."""
    if rel.kind == "soft":
        return la
    if rel.kind == "slice":  # a = Slice(axis, b): a's layout determines b only if it is one
        if isinstance(la, SliceLayout) and la.dim == rel.axis:
            return la.parent
        return None
    if rel.kind == "trans":
        return transposed_layout(la, rel.order, rel.a.type.shape)
    if rel.kind == "reshape":
        return reshaped_layout(la, rel.a.type.shape, rel.b.type.shape)
    return None


def derive_backward(rel: Relation, lb):
    """a's layout from b's."""
    if rel.kind == "soft":
        return lb
    if rel.kind == "slice":
        return SliceLayout(rel.axis, lb)
    if rel.kind == "trans":
        return transposed_layout(lb, _inverse(rel.order), rel.b.type.shape)
    if rel.kind == "reshape":
        return reshaped_layout(lb, rel.b.type.shape, rel.a.type.shape)
    return None


# ---- materializing -------------------------------------------------------------------------

def _convert(value: Value, layout, loc) -> Operation:
    op = Operation("ttg.convert_layout", [value], [value.type.with_layout(layout)], loc=loc)
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


def fix_expand_dims(fn, op, plans):
    convert_operand(op, 0, SliceLayout(op.attrs["axis"], op.result.type.layout), exact=True)


def fix_reduce(fn, op, plans):
    layout = SliceLayout(op.attrs["axis"], op.operands[0].type.layout)
    for i, res in enumerate(op.results):
        if is_tensor(res):
            pin_result(fn, op, i, layout)


def fix_trans(fn, op, plans):
    src = op.operands[0]
    pin_result(fn, op, 0, transposed_layout(src.type.layout, op.attrs["order"],
                                            src.type.shape))


def fix_reshape(fn, op, plans):
    src = op.operands[0]
    pin_result(fn, op, 0, reshaped_layout(src.type.layout, src.type.shape,
                                          op.result.type.shape))


def fix_memory(fn, op, plans):
    if memory_pointer(op) is None:
        return
    access = _access_layout(op, plans.get(op))
    for i in range(len(op.operands)):
        convert_operand(op, i, access)
    for i, res in enumerate(op.results):
        if is_tensor(res):
            pin_result(fn, op, i, access)


FIXES = {"tt.expand_dims": fix_expand_dims, "tt.reduce": fix_reduce, "tt.trans": fix_trans,
         "tt.reshape": fix_reshape, "tt.load": fix_memory, "tt.store": fix_memory,
         "tt.atomic_rmw": fix_memory, "tt.atomic_cas": fix_memory}


# ---- the pass ------------------------------------------------------------------------------

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


def assign_function_layouts(fn: Function, num_warps: int, threads_per_warp: int = 32) -> None:
    state = _layout_state(fn)
    if state == "explicit":
        return  # Gluon IR: layouts were written by hand
    if state == "mixed":
        raise LayoutAssignmentError(
            f"function {fn.name!r} has tensors with and without layouts; layout assignment "
            "takes layout-free (tile) IR only")
    rematerialize_cheap_values(fn)
    info = AxisInfo.analyze(fn)
    ops = list(fn.walk())
    plans = plan_all_accesses(ops, info, num_warps, threads_per_warp)
    constraints = collect_constraints(ops)
    for arg in fn.args:
        constraints.add(arg)
    layouts = _Solver(constraints, plans, num_warps, threads_per_warp).solve()
    for v in constraints.values:
        v.type = v.type.with_layout(layouts[constraints.find(v)])
    plan_of = {p.op: p for p in plans}
    for op in ops:
        fix = FIXES.get(op.name)
        if fix is not None:
            fix(fn, op, plan_of)


def assign_layouts(module: Module) -> None:
    """The `layout_assignment` pass: reads module attrs `num_warps` (4) and
    `threads_per_warp` (32)."""
    num_warps = int(module.attrs.get("num_warps", 4))
    threads_per_warp = int(module.attrs.get("threads_per_warp", 32))
    for fn in module.functions.values():
        assign_function_layouts(fn, num_warps, threads_per_warp)


__all__ = ["assign_layouts", "assign_function_layouts", "transposed_layout",
           "reshaped_layout", "LayoutAssignmentError"]
