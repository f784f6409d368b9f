"""What each op says about the layouts of its tensors, as constraints for layout assignment.

Three kinds, from strongest to weakest:

- `same(a, b, ...)`: the values must share one layout (elementwise ops, broadcast, the
  operands of one memory access, the values a loop carries). Solved by union-find: each class
  of equal values gets one layout.
- structural relations between two classes that an op's semantics fix:
  `slice(a, b, axis)` (a's layout is `SliceLayout(axis, b's)`: expand_dims operand, reduce
  result), `trans(a, b, order)` and `reshape(a, b)` (b's layout renames a's registers).
  When the two classes end up with layouts that break the relation, a `ttg.convert_layout`
  is inserted at that op.
- `soft(a, b)`: the op works best when both share a layout but can convert (a load's result
  and its pointers, a stored value and its pointers).

One small rule per op family; ops without a rule constrain nothing (their results get a layout
of their own and conversions appear where they meet the rest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from shared_codegen.ir.core import Operation, Value
from shared_codegen.ir.types import TensorType
from shared_codegen.ops.arith.definition import BINARY_RULES, CAST_OPS
from shared_codegen.ops.math.definition import UNARY_FLOAT_RULES


def is_tensor(v: Value) -> bool:
    return isinstance(v.type, TensorType)


@dataclass
class Relation:
    kind: str            # "slice" | "trans" | "reshape" | "soft"
    a: Value             # slice: the sliced value; trans/reshape: the source; soft: either
    b: Value             # slice: the parent-layout value; trans/reshape: the result
    op: Operation
    axis: int = 0
    order: tuple = ()


@dataclass
class Constraints:
    parent: Dict[Value, Value] = field(default_factory=dict)
    relations: List[Relation] = field(default_factory=list)
    values: List[Value] = field(default_factory=list)  # every tensor value, in IR order

    # ---- union-find ------------------------------------------------------------------------
    def add(self, v: Value) -> None:
        if is_tensor(v) and v not in self.parent:
            self.parent[v] = v
            self.values.append(v)

    def find(self, v: Value) -> Value:
        root = v
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[v] is not root:  # path compression
            self.parent[v], v = root, self.parent[v]
        return root

    def same(self, *values: Optional[Value]) -> None:
        tensors = [v for v in values if v is not None and is_tensor(v)]
        for v in tensors:
            self.add(v)
        for v in tensors[1:]:
            ra, rb = self.find(tensors[0]), self.find(v)
            if ra is not rb:
                self.parent[rb] = ra

    # ---- relations -------------------------------------------------------------------------
    def relate(self, kind: str, a: Value, b: Value, op: Operation, **kw) -> None:
        if is_tensor(a) and is_tensor(b):
            self.add(a)
            self.add(b)
            self.relations.append(Relation(kind, a, b, op, **kw))


Rule = Callable[[Operation, Constraints], None]


def rule_elementwise(op: Operation, c: Constraints) -> None:
    """Operands and results of an elementwise op share a layout (scalars are left out)."""
    c.same(*op.operands, *op.results)


def rule_broadcast(op: Operation, c: Constraints) -> None:
    # A layout describes any shape; the size-1 dims of the operand simply repeat.
    c.same(op.operands[0], op.result)


def rule_expand_dims(op: Operation, c: Constraints) -> None:
    c.relate("slice", op.operands[0], op.result, op, axis=op.attrs["axis"])


def rule_reduce(op: Operation, c: Constraints) -> None:
    c.same(*op.operands)
    for res in op.results:
        c.relate("slice", res, op.operands[0], op, axis=op.attrs["axis"])


def rule_scan(op: Operation, c: Constraints) -> None:
    c.same(*op.operands, *op.results)


def rule_trans(op: Operation, c: Constraints) -> None:
    c.relate("trans", op.operands[0], op.result, op, order=tuple(op.attrs["order"]))


def rule_reshape(op: Operation, c: Constraints) -> None:
    c.relate("reshape", op.operands[0], op.result, op)


def rule_load(op: Operation, c: Constraints) -> None:
    c.same(*op.operands)  # pointers, mask and `other`
    c.relate("soft", op.result, op.operands[0], op)


def rule_store_like(op: Operation, c: Constraints) -> None:
    """tt.store / tt.atomic_rmw [ptr, value, mask?]: pointers and mask share a layout; the
    value (and an atomic's result) would rather match but can be converted."""
    ptr, value = op.operands[:2]
    c.same(ptr, *op.operands[2:])
    c.relate("soft", value, ptr, op)
    for res in op.results:
        c.relate("soft", res, ptr, op)


def rule_atomic_cas(op: Operation, c: Constraints) -> None:
    ptr, cmp, value = op.operands
    c.same(ptr)
    for v in (cmp, value, *op.results):
        c.relate("soft", v, ptr, op)


def rule_for(op: Operation, c: Constraints) -> None:
    block = op.regions[0].block
    yields = block.terminator.operands
    for init, arg, out, res in zip(op.operands[3:], block.args[1:], yields, op.results):
        c.same(init, arg, out, res)


def rule_if(op: Operation, c: Constraints) -> None:
    then_y, else_y = (r.block.terminator.operands for r in op.regions)
    for res, a, b in zip(op.results, then_y, else_y):
        c.same(res, a, b)


def rule_while(op: Operation, c: Constraints) -> None:
    before, after = op.regions[0].block, op.regions[1].block
    cond = before.terminator.operands[1:]
    for init, arg, y in zip(op.operands, before.args, after.terminator.operands):
        c.same(init, arg, y)
    for fwd, arg, res in zip(cond, after.args, op.results):
        c.same(fwd, arg, res)


def rule_convert(op: Operation, c: Constraints) -> None:
    """An explicit conversion in layout-free IR separates its two sides on purpose."""
    c.add(op.operands[0])
    c.add(op.result)


def rule_none(op: Operation, c: Constraints) -> None:
    for v in (*op.operands, *op.results):
        c.add(v)


def _build_rules() -> Dict[str, Rule]:
    rules: Dict[str, Rule] = {
        "tt.broadcast": rule_broadcast, "tt.expand_dims": rule_expand_dims,
        "tt.reduce": rule_reduce, "tt.scan": rule_scan, "tt.trans": rule_trans,
        "tt.reshape": rule_reshape, "tt.load": rule_load, "tt.store": rule_store_like,
        "tt.atomic_rmw": rule_store_like, "tt.atomic_cas": rule_atomic_cas,
        "scf.for": rule_for, "scf.if": rule_if, "scf.while": rule_while,
        "ttg.convert_layout": rule_convert,
        # Sources: any layout will do, they take their class's.
        "tt.make_range": rule_none, "arith.constant": rule_none, "tt.splat": rule_none,
    }
    elementwise = (list(BINARY_RULES) + list(CAST_OPS) + list(UNARY_FLOAT_RULES)
                   + ["arith.cmpi", "arith.cmpf", "arith.select", "tt.addptr", "tt.hint",
                      "math.absi", "math.fma"])
    for name in elementwise:
        rules.setdefault(name, rule_elementwise)
    return rules


RULES: Dict[str, Rule] = _build_rules()


def collect_constraints(ops: List[Operation]) -> Constraints:
    """Constraints of every op in `ops` (a flat walk, nested ops included)."""
    c = Constraints()
    for op in ops:
        for region in op.regions:
            for arg in region.block.args:
                c.add(arg)
        RULES.get(op.name, rule_none)(op, c)
    return c
