"""The Gluon pipeline: IR out of the Gluon frontend already has layouts, so it only

1. `resolve_auto_layouts`: replaces `AutoLayout()` placeholders by propagating the layouts
   of connected tensors, forward and backward (Triton's ResolveAutoEncodings pass), then
   drops the `set_auto_layout` markers;
2. `verify_layouts`: every tensor has a concrete distributed layout that covers its shape
   with the module's `num_warps` (the interpreter and the compiler accept the same kernels).

How layouts relate across ops (the rules the lowering accepts):

- elementwise, memory and hint ops, `tt.broadcast`, `tt.scan`: one layout for every tensor
  operand and result;
- control flow: an `scf` result, its region arguments and the values yielded for it;
- `tt.expand_dims(x, axis)`: x has SliceLayout(axis, result layout);
- `tt.reduce(x, axis)`: the results have SliceLayout(axis, x's layout);
- `tt.trans` / `tt.reshape`: the register-rename layouts of `tile.passes.layout_assignment`;
- `ttg.convert_layout`: unrelated (that is its point), except `set_auto_layout` markers,
  whose operand takes the result's layout.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from gluon.language._layouts import AutoLayout, SharedLayout, SliceLayout, check_layout, is_auto
from gluon.language._semantic import SET_AUTO_LAYOUT_ATTR, layout_mismatch_message
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.ir.core import Function, Module, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import erase_op
from shared_codegen.ir.types import TensorType

# Ops whose tensor operands and results all share one layout.
_SAME_LAYOUT_OPS = {"tt.addptr", "arith.select", "arith.cmpi", "arith.cmpf", "tt.load",
                    "tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.hint", "tt.broadcast",
                    "tt.scan", "tt.bitcast", "tt.fp_to_fp", "tt.ptr_to_int", "tt.int_to_ptr",
                    "tt.precise_sqrt", "tt.precise_divf", "tt.assert"}
_SAME_LAYOUT_PREFIXES = ("arith.", "math.")

# How results read in "cannot infer" errors: what the user wrote, not the IR op.
_USER_NAMES = {"tt.make_range": "gl.arange", "arith.constant": "gl.full", "tt.splat": "gl.full",
               "tt.load": "gl.load", "tt.reduce": "reduction", "tt.expand_dims": "expand_dims",
               "tt.broadcast": "broadcast"}


def _is_tensor(v: Value) -> bool:
    return isinstance(v.type, TensorType)


def _error(op: Optional[Operation], message: str) -> CompilationError:
    loc = getattr(op, "loc", None)
    if loc is None or not loc.line:
        return CompilationError(message)
    return CompilationError(message, loc.file, loc.line, loc.col, loc.source_line)


class _Relations:
    """Every layout relation of a function, indexed by the values it mentions."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.by_value: Dict[int, List[tuple]] = {}
        self.values: List[Value] = [a for a in fn.args if _is_tensor(a)]
        for op in fn.walk():
            self.values.extend(v for v in op.results if _is_tensor(v))
            for region in op.regions:
                self.values.extend(a for a in region.block.args if _is_tensor(a))
            self._collect(op)

    def _add(self, relation: tuple, values):
        for v in values:
            self.by_value.setdefault(id(v), []).append(relation)

    def _same(self, op, values):
        values = [v for v in values if _is_tensor(v)]
        if len(values) > 1:
            self._add(("same", op, values), values)

    def _collect(self, op: Operation):
        name = op.name
        if name in _SAME_LAYOUT_OPS or name.startswith(_SAME_LAYOUT_PREFIXES):
            self._same(op, list(op.operands) + list(op.results))
        elif name == "ttg.convert_layout" and op.attrs.get(SET_AUTO_LAYOUT_ATTR):
            self._same(op, [op.operands[0], op.result])
        elif name == "tt.expand_dims":
            rel = ("slice", op, op.operands[0], op.result, op.attrs["axis"])
            self._add(rel, [op.operands[0], op.result])
        elif name == "tt.reduce":
            self._same(op, op.operands)
            for r in op.results:
                if _is_tensor(r):
                    rel = ("slice", op, r, op.operands[0], op.attrs["axis"])
                    self._add(rel, [r, op.operands[0]])
        elif name in ("tt.trans", "tt.reshape"):
            rel = (name, op, op.operands[0], op.result)
            self._add(rel, [op.operands[0], op.result])
        elif name.startswith("scf."):
            self._control_flow(op)

    def _control_flow(self, op: Operation):
        def yielded(region, skip=0):
            term = region.block.terminator
            return list(term.operands)[skip:] if term is not None else []

        if op.name == "scf.for":
            block = op.regions[0].block
            inits = list(op.operands)[3:]
            groups = zip(inits, op.results, block.args[1:], yielded(op.regions[0]))
        elif op.name == "scf.if":
            groups = zip(op.results, yielded(op.regions[0]), yielded(op.regions[1]))
        elif op.name == "scf.while":
            before, after = op.regions[0], op.regions[1]
            groups = zip(op.operands, before.block.args, yielded(before, 1), op.results,
                         after.block.args, yielded(after))
        else:
            return
        for group in groups:
            self._same(op, list(group))


def _derive(relation: tuple, known: Value, layout) -> List[Tuple[Value, object]]:
    """(value, layout) pairs the relation implies once `known` has `layout`."""
    from tile.passes.layout_assignment import reshaped_layout, transposed_layout

    kind = relation[0]
    if kind == "same":
        return [(v, layout) for v in relation[2] if v is not known]
    if kind == "slice":
        _, _, sliced, parent, axis = relation
        if known is parent:
            return [(sliced, SliceLayout(axis, layout))]
        if isinstance(layout, SliceLayout) and layout.dim == axis:
            return [(parent, layout.parent)]
        return []
    _, op, src, dst = relation
    if kind == "tt.trans":
        order = list(op.attrs["order"])
        if known is src:
            return [(dst, transposed_layout(layout, order, src.type.shape))]
        inverse = [order.index(i) for i in range(len(order))]
        return [(src, transposed_layout(layout, inverse, dst.type.shape))]
    if known is src:
        return [(dst, reshaped_layout(layout, src.type.shape, dst.type.shape))]
    return [(src, reshaped_layout(layout, dst.type.shape, src.type.shape))]


def resolve_function(fn: Function) -> None:
    rel = _Relations(fn)
    auto = {id(v) for v in rel.values if is_auto(v.type.layout)}
    if not auto:
        return
    chosen: Dict[int, object] = {}
    chosen_by: Dict[int, Operation] = {}
    work = [v for v in rel.values if id(v) not in auto]
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
                    chosen_by[id(other)] = relation[1]
                    work.append(other)
                elif previous != derived:
                    raise _error(relation[1], layout_mismatch_message(
                        "AutoLayout resolution found conflicting layouts: the values this op "
                        "connects", [("one use", previous), ("another", derived)],
                        other.type.shape))
    for v in rel.values:
        if id(v) in auto and id(v) not in chosen:
            op = v.owner if isinstance(v.owner, Operation) else None
            what = _USER_NAMES.get(op.name, op.name) if op is not None else "value"
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
        if op.name != "ttg.convert_layout" or not op.attrs.get(SET_AUTO_LAYOUT_ATTR):
            continue
        src = op.operands[0]
        if src.type == op.result.type:
            replace_all_uses(list(fn.body.block.ops), op.result, src)
            erase_op(op)
        else:
            del op.attrs[SET_AUTO_LAYOUT_ATTR]  # a real conversion (cannot happen today)


def resolve_auto_layouts(module: Module) -> None:
    """Pass: replace every AutoLayout by the layout propagation gives it."""
    for fn in module.functions.values():
        resolve_function(fn)


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
