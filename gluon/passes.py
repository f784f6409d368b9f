"""The Gluon pipeline: IR out of the Gluon frontend already has layouts, so it only

1. `resolve_auto_layouts`: replaces `AutoLayout()` placeholders by propagating the layouts
   of connected tensors, forward and backward (Triton's ResolveAutoEncodings pass), then
   drops the `set_auto_layout` markers;
2. `verify_layouts`: every tensor has a concrete distributed layout that covers its shape
   with the module's `num_warps` (the interpreter and the compiler accept the same kernels).

How layouts relate across ops is each op's `layout_rule` trait, the relations of
`shared_codegen.layouts.relations` that the tile layout assignment uses too: elementwise,
memory and hint ops share one layout (a memory access's preferences are equalities here, the
lowering wants them); control flow joins a result, its region arguments and the values yielded
for it; expand_dims and reduce relate by slice layouts; trans and reshape by register renames;
a conversion relates nothing (that is its point), except the `set_auto_layout` markers, whose
operand takes the result's layout.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from gluon.language._layouts import (AutoLayout, CoalescedLayout, SharedLayout, check_layout,
                                     is_auto)
from gluon.language._semantic import SET_AUTO_LAYOUT_ATTR, layout_mismatch_message
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.ir.core import Function, Module, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import erase_op
from shared_codegen.ir.types import TensorType
from shared_codegen.layouts.relations import Prefer, Same
from shared_codegen.ops.tensor.definition import ConvertLayoutOp


def _is_tensor(v: Value) -> bool:
    return isinstance(v.type, TensorType)


def _error(op: Optional[Operation], message: str) -> CompilationError:
    loc = getattr(op, "loc", None)
    if loc is None or not loc.line:
        return CompilationError(message)
    return CompilationError(message, loc.file, loc.line, loc.col, loc.source_line)


class _Relations:
    """Every layout relation of a function (its ops' `layout_rule` traits), indexed by the
    values it mentions."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.by_value: Dict[int, List] = {}
        self.values: List[Value] = [a for a in fn.args if _is_tensor(a)]
        for op in fn.walk():
            self.values.extend(v for v in op.results if _is_tensor(v))
            for region in op.regions:
                self.values.extend(a for a in region.block.args if _is_tensor(a))
            self._collect(op)

    def _add(self, relation, values):
        for v in values:
            self.by_value.setdefault(id(v), []).append(relation)

    def _same(self, op, values):
        values = tuple(v for v in values if _is_tensor(v))
        if len(values) > 1:
            self._add(Same(op, values), values)

    def _collect(self, op: Operation):
        if isinstance(op.opdef, ConvertLayoutOp) and op.attrs.get(SET_AUTO_LAYOUT_ATTR):
            self._same(op, [op.operands[0], op.result])
            return
        rule = op.opdef.layout_rule if op.opdef is not None else None
        for relation in rule.relations(op) if rule is not None else ():
            if isinstance(relation, Same):
                self._same(op, relation.values)
            elif isinstance(relation, Prefer):
                # Explicit layouts: the lowering of a memory access wants them equal.
                self._same(op, [relation.a, relation.b])
            elif _is_tensor(relation.a) and _is_tensor(relation.b):
                self._add(relation, [relation.a, relation.b])


def _derive(relation, known: Value, layout) -> List[Tuple[Value, object]]:
    """(value, layout) pairs the relation implies once `known` has `layout`."""
    if isinstance(relation, Same):
        return [(v, layout) for v in relation.values if v is not known]
    if known is relation.a:
        derived = relation.forward(layout)
        return [(relation.b, derived)] if derived is not None else []
    return [(relation.a, relation.backward(layout))]


def _coalesced_seeds(fn: Function, rel: _Relations, auto, num_warps: int):
    """(pointer, layout, op) for each global memory access whose pointers are unresolved
    and connected (through equal-layout relations) to a `CoalescedLayout()` value: the layout
    Triton's Coalesce pass would give the access."""
    from tile.passes.coalesce import memory_pointer, plan_access
    accesses = [op for op in fn.walk() if memory_pointer(op) is not None
                and id(memory_pointer(op)) in auto]
    if not accesses or not any(isinstance(v.type.layout, CoalescedLayout)
                               for v in rel.values):
        return []
    from shared_codegen.analysis.axis_info import AxisAnalysis
    info = AxisAnalysis(fn)
    seeds = []
    for index, op in enumerate(accesses):
        ptr = memory_pointer(op)
        if _reaches_coalesced(ptr, rel, auto):
            plan = plan_access(op, index, info, num_warps, 32)
            seeds.append((ptr, plan.layout, op))
    return seeds


def _reaches_coalesced(start: Value, rel: _Relations, auto) -> bool:
    seen, stack = {id(start)}, [start]
    while stack:
        v = stack.pop()
        if isinstance(v.type.layout, CoalescedLayout):
            return True
        for relation in rel.by_value.get(id(v), ()):
            for other in getattr(relation, "values", ()):
                if id(other) in auto and id(other) not in seen:
                    seen.add(id(other))
                    stack.append(other)
    return False


def resolve_function(fn: Function, num_warps: int = 4) -> None:
    rel = _Relations(fn)
    auto = {id(v) for v in rel.values if is_auto(v.type.layout)}
    if not auto:
        return
    chosen: Dict[int, object] = {}
    chosen_by: Dict[int, Operation] = {}
    work = [v for v in rel.values if id(v) not in auto]
    for ptr, layout, op in _coalesced_seeds(fn, rel, auto, num_warps):
        if chosen.get(id(ptr), layout) != layout:
            raise _error(op, layout_mismatch_message(
                "CoalescedLayout resolution: two memory accesses on one pointer tensor want "
                "different coalesced layouts", [("one", chosen[id(ptr)]), ("another", layout)],
                ptr.type.shape))
        chosen[id(ptr)], chosen_by[id(ptr)] = layout, op
        work.append(ptr)
    while work:
        v = work.pop()
        layout = chosen.get(id(v), v.type.layout)
        for relation in rel.by_value.get(id(v), ()):
            for other, derived in _derive(relation, v, layout):
                if id(other) not in auto:
                    continue  # a written layout is never changed; the verifier checks ops
                previous = chosen.get(id(other))
                if previous is None:
                    chosen[id(other)] = derived
                    chosen_by[id(other)] = relation.op
                    work.append(other)
                elif previous != derived:
                    raise _error(relation.op, layout_mismatch_message(
                        "AutoLayout resolution found conflicting layouts: the values this op "
                        "connects", [("one use", previous), ("another", derived)],
                        other.type.shape))
    for v in rel.values:
        if id(v) in auto and id(v) not in chosen:
            op = v.owner if isinstance(v.owner, Operation) else None
            what = "value" if op is None else (
                (op.opdef.user_name if op.opdef is not None else None) or op.name)
            raise _error(op, f"cannot infer the layout of this {what} result ({v.type}): no "
                             "tensor with a layout is connected to it. Give it one (e.g. "
                             "`layout=gl.BlockedLayout(...)`) or pin it with "
                             "gl.set_auto_layout(x, layout)")
    for v in rel.values:
        if id(v) in chosen:
            v.type = v.type.with_layout(chosen[id(v)])
    _drop_markers(fn)


def _drop_markers(fn: Function) -> None:
    """`set_auto_layout` markers now join equal layouts: forward their operand."""
    for op in list(fn.walk()):
        if not isinstance(op.opdef, ConvertLayoutOp) or not op.attrs.get(SET_AUTO_LAYOUT_ATTR):
            continue
        src = op.operands[0]
        if src.type == op.result.type:
            replace_all_uses(list(fn.body.block.ops), op.result, src)
            erase_op(op)
        else:
            del op.attrs[SET_AUTO_LAYOUT_ATTR]  # a real conversion (cannot happen today)


def resolve_auto_layouts(module: Module) -> None:
    """Pass: replace every AutoLayout by the layout propagation gives it."""
    num_warps = int(module.attrs.get("num_warps", 4))
    for fn in module.functions.values():
        resolve_function(fn, num_warps)


def verify_layouts(module: Module) -> None:
    """Pass: every tensor value has a concrete layout covering its shape with the module's
    warps (a worker partition's warps inside `gl.warp_specialize`)."""
    from shared_codegen.ops.warp_specialize.definition import partition_warps
    num_warps = int(module.attrs.get("num_warps", 4))
    for fn in module.functions.values():
        # Inside a worker partition, layouts cover that partition's warps.
        warps_of = partition_warps(fn, num_warps)
        for v, op in _tensor_values(fn):
            layout = v.type.layout
            if layout is None or isinstance(layout, AutoLayout):
                what = "no layout" if layout is None else "an unresolved AutoLayout"
                raise _error(op, f"tensor {v.type} has {what}: every Gluon tensor needs a "
                                 "layout")
            if isinstance(layout, SharedLayout):
                continue  # not a register tensor: its own ops check it
            try:
                check_layout(layout, v.type.shape, warps_of.get(id(op), num_warps), "tensor")
            except (ValueError, TypeError) as exc:
                raise _error(op, str(exc)) from None


def _tensor_values(fn: Function):
    for a in fn.args:
        if _is_tensor(a):
            yield a, None
    for op in fn.walk():
        for r in op.results:
            if _is_tensor(r):
                yield r, op
        for region in op.regions:
            for a in region.block.args:
                if _is_tensor(a):
                    yield a, op


GLUON_PIPELINE = [
    ("resolve_auto_layouts", resolve_auto_layouts),
    ("verify_layouts", verify_layouts),
]

__all__ = ["GLUON_PIPELINE", "resolve_auto_layouts", "verify_layouts"]
