"""Clean-up rewrites after layout assignment: redundant conversions and duplicated pure ops.

Each rewrite is a small named rule `rule(op) -> bool` run by `apply_rules` until none fires:

- `drop_identity_conversion`: convert_layout to a layout that places every element where the
  source already has it (equal, or equal as linear layouts for this shape) -> its operand.
- `fold_conversion_chain`: convert(convert(x, A), B) -> convert(x, B), then the identity rule
  removes it when B is x's own layout.
- `drop_dead_conversion`: a conversion nobody uses.

`hoist_invariant_conversions` (its own pass, after software pipelining) moves a conversion
at the top level of a loop body whose operand is defined outside the loop to just before
the loop (Triton's LICM does the same): layout assignment materialises a conversion next
to its user, so a loop-invariant operand (the query tile of a decode loop, converted to an
MMA operand) would otherwise pay a shared-memory round trip and its barriers on every
iteration. Repeated, it leaves a nest of loops entirely.

`cse` merges pure ops that compute the same thing from the same operands in the same block
(layout assignment clones index math per use; the copies that got one layout fold back).
"""

from __future__ import annotations

from typing import Dict

from shared_codegen.ir.core import Module, Operation, Value
from shared_codegen.ir.passes import apply_rules, encloses, erase_op, insert_before
from shared_codegen.layouts import to_linear_layout
from shared_codegen.ops.control.definition import ForOp
from shared_codegen.ops.tensor.definition import ConvertLayoutOp


def _same_placement(a, b, shape) -> bool:
    if a == b:
        return True
    if a is None or b is None:
        return False
    try:
        return to_linear_layout(a, shape) == to_linear_layout(b, shape)
    except ValueError:
        return False


def _replace_uses(module: Module, old: Value, new: Value) -> None:
    for op in module.walk():
        for i, v in enumerate(op.operands):
            if v is old:
                op.operands[i] = new


def make_conversion_rules(module: Module):
    """The rules, bound to `module` (they replace uses across the whole module)."""

    def drop_identity_conversion(op: Operation) -> bool:
        if not isinstance(op.opdef, ConvertLayoutOp):
            return False
        src, dst = op.operands[0], op.result
        if dst.type.layout != src.type.layout:
            if not _same_placement(src.type.layout, dst.type.layout, src.type.shape):
                return False
            # Same placement but another name for it: keep the users' spelling only when
            # they would otherwise disagree with the source's type.
            if dst.type != src.type:
                return False
        _replace_uses(module, dst, src)
        erase_op(op)
        return True

    def fold_conversion_chain(op: Operation) -> bool:
        if not isinstance(op.opdef, ConvertLayoutOp):
            return False
        inner = op.operands[0].defining_op
        if inner is None or not isinstance(inner.opdef, ConvertLayoutOp):
            return False
        op.operands[0] = inner.operands[0]
        return True

    def drop_dead_conversion(op: Operation) -> bool:
        if not isinstance(op.opdef, ConvertLayoutOp):
            return False
        for user in module.walk():
            if any(v is op.result for v in user.operands):
                return False
        erase_op(op)
        return True

    return [drop_identity_conversion, fold_conversion_chain, drop_dead_conversion]


def hoist_invariant_conversion(op: Operation) -> bool:
    if not isinstance(op.opdef, ConvertLayoutOp):
        return False
    loop = op.parent_op  # a loop whose body holds op at its top level
    if loop is None or not isinstance(loop.opdef, ForOp) or encloses(loop, op.operands[0]):
        return False
    op.parent.ops.remove(op)
    insert_before(loop, op)
    return True


def remove_redundant_conversions(module: Module) -> None:
    """The `remove_redundant_conversions` pass."""
    apply_rules(module, make_conversion_rules(module))


def hoist_invariant_conversions(module: Module) -> None:
    """The `hoist_invariant_conversions` pass. It runs after software pipelining, so that a
    hoisted conversion lands after the pipeline's prologue: placed before it, its wait for
    the converted value (a decode program's Q tile, just loaded) held back the prologue's
    own loads (the block table's entries, then the first K/V tiles) by one memory latency."""
    apply_rules(module, [hoist_invariant_conversion])


# ---- common subexpressions of pure ops -------------------------------------------------------

def _is_pure(op: Operation) -> bool:
    return op.opdef is not None and op.opdef.is_pure(op)


def _attr_key(attrs) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in attrs.items()))


def _cse_block(block, replace: Dict[Value, Value]) -> None:
    seen: Dict[tuple, Operation] = {}
    for op in list(block.ops):
        op.operands = [replace.get(v, v) for v in op.operands]
        for region in op.regions:
            _cse_block(region.block, replace)
        if not _is_pure(op) or op.regions:
            continue
        key = (op.name, tuple(id(v) for v in op.operands), _attr_key(op.attrs),
               tuple(r.type for r in op.results))
        first = seen.get(key)
        if first is None:
            seen[key] = op
            continue
        for dup, keep in zip(op.results, first.results):
            replace[dup] = keep
        erase_op(op)


def cse(module: Module) -> None:
    """The `cse` pass: one pass per function, in program order; nested regions see the values
    of the blocks that enclose them but merge only within their own block."""
    for fn in module.functions.values():
        replace: Dict[Value, Value] = {}
        _cse_block(fn.body.block, replace)
        # Terminators and ops after a merge point were rewritten on the way; one more sweep
        # catches uses inside regions visited before the duplicate was found.
        for op in fn.walk():
            op.operands = [replace.get(v, v) for v in op.operands]


__all__ = ["remove_redundant_conversions", "make_conversion_rules", "cse",
           "hoist_invariant_conversions"]
