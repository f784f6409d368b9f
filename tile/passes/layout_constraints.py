"""What each op says about the layouts of its tensors, as constraints for layout assignment.

Each op's `layout_rule` trait lists its relations (`shared_codegen.layouts.relations`); this
module sorts them, from strongest to weakest:

- `Same(values)`: the values must share one layout (elementwise ops, broadcast, the operands
  of one memory access, the values a loop carries). Solved by union-find: each class of equal
  values gets one layout.
- structural relations between two classes that an op's semantics fix: `Slice` (expand_dims
  operand, reduce result), `Trans` and `Reshape` (the result's layout renames the source's
  registers). When the two classes end up with layouts that break the relation, a
  `ttg.convert_layout` is inserted at that op.
- `Prefer(a, b)`: the op works best when both share a layout but can convert (a load's result
  and its pointers, a stored value and its pointers).

Ops whose rule relates nothing still get their tensors a class (a layout of their own;
conversions appear where they meet the rest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from shared_codegen.ir.core import Operation, Value
from shared_codegen.ir.types import TensorType
from shared_codegen.layouts.relations import Same


def is_tensor(v: Value) -> bool:
    return isinstance(v.type, TensorType)


@dataclass
class Constraints:
    parent: Dict[Value, Value] = field(default_factory=dict)
    relations: List = field(default_factory=list)
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
    def relate(self, relation) -> None:
        """Record a relation between two values (only between tensors)."""
        if is_tensor(relation.a) and is_tensor(relation.b):
            self.add(relation.a)
            self.add(relation.b)
            self.relations.append(relation)


def add_op_constraints(op: Operation, c: Constraints) -> None:
    """The constraints of one op, read off its layout rule."""
    rule = op.opdef.layout_rule if op.opdef is not None else None
    for relation in rule.relations(op) if rule is not None else ():
        if isinstance(relation, Same):
            c.same(*relation.values)
        else:
            c.relate(relation)
    # Values no relation mentions still get a class (added after, to keep the IR order of
    # `values` that the solver's tie-breaks follow).
    for v in (*op.operands, *op.results):
        c.add(v)


def collect_constraints(ops: List[Operation]) -> Constraints:
    """Constraints of every op in `ops` (a flat walk, nested ops included)."""
    c = Constraints()
    for op in ops:
        for region in op.regions:
            for arg in region.block.args:
                c.add(arg)
        add_op_constraints(op, c)
    return c
