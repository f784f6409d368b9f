"""`a if cond else b` on a runtime scalar condition whose branches call something.

Triton builds an `scf.if` for a conditional expression with a runtime condition, so only the
chosen branch runs: `tl.store(p, x) if flag else tl.store(q, y)` stores once, and
`tl.load(p) if i < n else 0.0` never touches `p` when `i >= n`. Branches without calls stay a
`select` (the code generator's `where`), which is the same value at no branch cost, and so
does a block condition, which `scf.if` cannot take.
"""

from __future__ import annotations

import ast

from shared_codegen.frontend.values import unwrap, wrap
from shared_codegen.ir.core import Operation, Region
from shared_codegen.ops.control.definition import IfOp, YieldOp

NAME = "<conditional expression>"


def has_call(node: ast.IfExp) -> bool:
    return any(isinstance(n, ast.Call) for branch in (node.body, node.orelse)
               for n in ast.walk(branch))


def runtime_if_expression(gen, node: ast.IfExp, cond):
    """Visit each branch inside its own region of one `scf.if`; both give a value (yielded,
    unified to one type) or neither does (calls such as `tl.store` give None)."""
    cond_value = gen.semantic.to_condition(cond)
    regions = (Region(), Region())
    values = []
    for region, expr in zip(regions, (node.body, node.orelse)):
        with gen.builder.at_end_of(region.block):
            gen.runtime_nesting += 1
            try:
                values.append(unwrap(gen.visit(expr)))
            finally:
                gen.runtime_nesting -= 1
    then_value, else_value = values
    if (then_value is None) != (else_value is None):
        empty = "`if`" if then_value is None else "`else`"
        raise gen.error(node, f"the {empty} branch of this conditional expression gives no "
                              "value but the other does; with a runtime condition both must "
                              "give one, or neither")
    yielded = [] if then_value is None else list(gen.unify_branch_values(
        node, NAME, then_value, else_value, regions))
    for region, value in zip(regions, yielded or [None, None]):
        with gen.builder.at_end_of(region.block):
            YieldOp.build(gen.builder, [] if value is None else [value.handle])
    op = Operation(IfOp.name, [cond_value], [v.handle.type for v in yielded[:1]],
                   regions=list(regions), loc=gen.location(node))
    gen.builder.insert(op)
    return wrap(op.results[0], yielded[0].type) if yielded else None
