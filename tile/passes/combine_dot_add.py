"""`acc += tl.dot(a, b)` as one product with an accumulator: `x + dot(a, b, 0)` (either
operand order, float or integer add) becomes `dot(a, b, x)`, as Triton's combine pass does.

Why it matters:
- numerics: the tensor cores then add the product into `x` as they accumulate, in the order
  cuBLAS does too, instead of rounding the product to fp32 first and adding it after;
  tutorial 08's grouped GEMM compares fp16 results to cuBLAS with atol 1e-2 and no rtol,
  which only the fused form meets;
- speed: the accumulator is then carried by the dot, so the pipeliner keeps the wgmma in
  flight (`is_async`) instead of waiting for it before an add.

Only a dot whose result has no other use, whose accumulator is a zero constant, and which
sits in the add's block is folded (moved to the add, so `x` is defined before it); an fp8
product with `max_num_imprecise_acc` keeps its own rounding and is left alone.
"""

from __future__ import annotations

from typing import Dict, List

from shared_codegen.ir.core import Module, Operation, Value
from shared_codegen.ir.passes import erase_op
from shared_codegen.ops.arith.definition import BinaryOp, ConstantOp
from shared_codegen.ops.dot.definition import DotOp
from shared_codegen.ops.tensor.definition import ConvertLayoutOp


def _uses(module: Module) -> Dict[Value, List[Operation]]:
    uses: Dict[Value, List[Operation]] = {}
    for op in module.walk():
        for v in op.operands:
            uses.setdefault(v, []).append(op)
    return uses


def is_zero_constant(value: Value) -> bool:
    """Whether `value` is a splat of zero, through layout conversions (dot_acceleration asks
    after layout assignment, which may have put one between the constant and the dot)."""
    op = value.defining_op
    while op is not None and isinstance(op.opdef, ConvertLayoutOp):
        op = op.operands[0].defining_op
    return op is not None and isinstance(op.opdef, ConstantOp) and op.attrs.get("value") == 0


def _foldable_dot(value: Value, add: Operation, uses) -> Operation:
    dot = value.defining_op
    if dot is None or not isinstance(dot.opdef, DotOp) or dot.parent is not add.parent:
        return None
    if uses.get(dot.result) != [add] or not is_zero_constant(dot.operands[2]):
        return None
    if dot.attrs.get("max_num_imprecise_acc"):
        return None
    return dot


def _fold_one(module: Module) -> bool:
    uses = _uses(module)
    for add in list(module.walk()):
        if not isinstance(add.opdef, BinaryOp) or add.opdef.spelling_of(add) != "+":
            continue
        for side in (1, 0):
            dot = _foldable_dot(add.operands[side], add, uses)
            other = add.operands[1 - side]
            if dot is None or other.type != dot.result.type:
                continue
            zero = dot.operands[2]
            block = add.parent
            block.ops.remove(dot)  # the product now runs where the add ran, after `other`
            block.ops.insert(block.ops.index(add), dot)
            dot.operands[2] = other
            for user in uses.get(add.result, []):
                user.operands = [dot.result if v is add.result else v for v in user.operands]
            dot.result.name_hint = dot.result.name_hint or add.result.name_hint
            erase_op(add)
            if not _uses(module).get(zero) and zero.defining_op is not None:
                erase_op(zero.defining_op)
            return True
    return False


def combine_dot_add(module: Module) -> None:
    """The `combine_dot_add` pass."""
    while _fold_one(module):
        pass


__all__ = ["combine_dot_add"]
