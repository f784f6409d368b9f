"""Building blocks of the loop-rewriting passes (software pipelining, TMA rings, flattening,
persistent programs, warp specialization): ops built into a scratch block and placed around
an anchor, cloned ops, induction-variable arithmetic, ring slots and new iter_args."""

from __future__ import annotations

from typing import Dict

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block, Operation, Value, clone_op
from shared_codegen.ir.passes import insert_after, insert_before
from shared_codegen.ir.types import int32
from shared_codegen.ops.arith.definition import (INT_COMPARE, BinaryOp, CompareOp, ConstantOp,
                                                 SelectOp, operator_op_name)

_INT_ADD = operator_op_name("add", floating=False, signed=True)


class _At:
    """Build ops into a scratch block, then place them before or after an anchor."""

    def __init__(self, loc):
        self.block = Block()
        self.b = Builder(self.block, loc)

    def const(self, value, ty=int32) -> Value:
        return ConstantOp.build(self.b, value, ty)

    def place_before(self, anchor: Operation) -> None:
        for op in list(self.block.ops):
            insert_before(anchor, op)
        self.block.ops.clear()

    def place_after(self, anchor: Operation) -> Operation:
        last = anchor
        for op in list(self.block.ops):
            insert_after(last, op)
            last = op
        self.block.ops.clear()
        return last


def _clone(op: Operation, mapping: Dict[Value, Value], b: Builder) -> Operation:
    """A copy of `op` (with its regions: a flattened loop's prologue `if`) at `b`, operands
    read through `mapping`, which records the copy's results."""
    new = clone_op(op, mapping)
    new.loc = b.loc
    return b.insert(new)


def _iv_at(at: _At, base: Value, step_value: int, count: int) -> Value:
    if count == 0:
        return base
    return BinaryOp.build(at.b, _INT_ADD, base, at.const(step_value * count, base.type))


def _less(at: _At, x: Value, ub: Value) -> Value:
    return CompareOp.build(at.b, INT_COMPARE, "slt", x, ub)


def _next_slot(at: _At, slot: Value, num_stages: int) -> Value:
    nxt = BinaryOp.build(at.b, _INT_ADD, slot, at.const(1))
    wraps = CompareOp.build(at.b, INT_COMPARE, "eq", nxt, at.const(num_stages))
    return SelectOp.build(at.b, wraps, at.const(0), nxt)


def _add_carried(loop: Operation, init: Value, name: str) -> Value:
    """Append an iter_arg: init operand, block argument, result. Returns the block argument."""
    block = loop.regions[0].block
    loop.operands.append(init)
    arg = Value(init.type, block, len(block.args))
    arg.name_hint = name
    block.args.append(arg)
    loop.results.append(Value(init.type, loop, len(loop.results)))
    return arg
