"""Loop unrolling: `tl.range(..., loop_unroll_factor=N)`, as Triton's `triton-loop-unroll`.

Why: one iteration of the unrolled loop runs N copies of the body back to back, so ptxas can
overlap one copy's loads with the previous copy's math, and the loop's own work (the compare
and branch, the induction variable, the pipeliner's ring-slot bookkeeping) is paid once per N
bodies. LLVM may unroll a loop too, but only after the tile passes: here the layouts, the
shared-memory staging and the software pipeliner see the N copies.

    %r = scf.for %lb, %ub, %s, %init {loop_unroll_factor = N}    ^bb(%iv, %x): body(%iv, %x)
becomes
    %start = %lb + (trip % N) * %s                  trip: the loop's iterations (0 if none)
    %p = scf.for %lb, %start, %s, %init {num_stages = 1}        the remainder, < N iterations
    %r = scf.for %start, %ub, N*%s, %p              ^bb(%iv, %x):
            %x1 = body(%iv, %x); %x2 = body(%iv + %s, %x1); ...; body(%iv + (N-1)*%s, ...)

Each copy is a clone with fresh SSA values: copy j reads what copy j-1 yields where the body
reads a carried value, and `%iv + j*%s` where it reads the induction variable; the main
loop's yield hands on the last copy's values. Loops nested in the body are cloned with it;
a marked loop inside another marked loop is unrolled first, then copied. The iterations run
in their original order, so results are those of the loop as written, bit for bit.

Triton (lib/Dialect/Triton/Transforms/LoopUnroll.cpp) runs this last in its TTIR pipeline,
after its combine pass and before layouts exist; here it runs after combine_dot_add and before
layout_assignment, for the same reasons: every copy gets its layouts like code the user wrote,
and the pipeliner sees the unrolled loop (its step N*%s, constant when %s is). The remainder
gets `num_stages = 1`, as Triton marks the epilogue loop of MLIR's `loopUnrollByFactor`: it
runs fewer than N iterations, too few to fill a ring.

One difference: MLIR puts the remainder after the main loop, we put it before. Our pipeliner
runs a loop's pointer increments num_stages - 1 iterations ahead, so it leaves alone a loop
whose carried pointers are read after it, which is what a remainder after it does; peeled in
front, the remainder only feeds the main loop's initial values.

Bounds known at compile time are computed here: no remainder when N divides the trip count,
and no main loop when the trip count is below N (the loop is then all remainder: it keeps its
single body and is not pipelined, as in Triton where the empty main loop is folded away).
Runtime bounds get the computation above as IR before the loops. Unlike MLIR's
`ceilDivPositive` of `ub - lb`, the trip count here is 0 when the loop runs no iteration
(`lb >= ub`), and it divides the unsigned distance |ub - lb|, so a range wider than half the
type still counts right. Tile loops may count down with a runtime negative step (the lowering
picks the comparison by the step's sign): selects on that sign choose the distance here.
Descending loops with a constant step already count upward (the frontend rewrites them).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block, Module, Operation, Value, clone_op
from shared_codegen.ir.passes import insert_before
from shared_codegen.ir.types import scalar_of
from shared_codegen.ops.arith.definition import (INT_COMPARE, BinaryOp, CompareOp, ConstantOp,
                                                 SelectOp, operator_op_name)
from shared_codegen.ops.control.definition import ForOp
from tile.passes.wgmma_schedule import _is

UNROLL_FACTOR = "loop_unroll_factor"  # the scf.for attribute tl.range sets (ForOp.build)


def unroll_loops(module: Module) -> None:
    """Unroll every `scf.for` marked with a factor above 1, innermost first."""
    loops = [op for op in module.walk() if _is(op, ForOp) and op.attrs.get(UNROLL_FACTOR)]
    # module.walk() lists a loop before the loops nested in it: reversed, an inner marked loop
    # is unrolled before the outer one copies it (the copies then need no unrolling).
    for loop in reversed(loops):
        unroll_loop(loop, loop.attrs.pop(UNROLL_FACTOR))


def unroll_loop(loop: Operation, factor: int) -> None:
    """Unroll `loop` by `factor` in place (it becomes the main loop), after a remainder loop
    for the first `trip % factor` iterations where that may not be zero."""
    body = loop.regions[0].block
    lb, ub, step = loop.operands[:3]
    known = [_known(v) for v in (lb, ub, step)]
    if factor <= 1 or len(body.ops) == 1 or known[2] == 0:
        return  # nothing asked, an empty body, or a zero step (the interpreter reports it)
    at = _Index(loop)
    if None in known:
        start = at.main_start(lb, ub, step, factor)
    else:
        trip = _trip_count(*known)
        if trip < factor:  # fewer iterations than copies (or none): all remainder
            if trip:
                loop.attrs["num_stages"] = 1
            return
        left = trip % factor
        start = at.const(known[0] + left * known[2]) if left else None
    wide_step = at.scaled(step, factor)
    offsets = [at.scaled(step, j) for j in range(1, factor)] if _iv_is_read(loop) else []
    at.place_before(loop)
    if start is not None:
        _peel_remainder(loop, start)
    loop.operands[2] = wide_step
    _replicate_body(loop, factor, offsets)


# ---- the bounds ------------------------------------------------------------------------------

def _known(v: Value) -> Optional[int]:
    """The value of an integer constant, else None."""
    op = v.owner
    if _is(op, ConstantOp) and type(op.attrs.get("value")) is int:
        return op.attrs["value"]
    return None


def _trip_count(lb: int, ub: int, step: int) -> int:
    distance = ub - lb if step > 0 else lb - ub
    return max(0, -(-distance // abs(step)))


class _Index:
    """Scalar arithmetic in the loop bounds' type, built into a scratch block that
    `place_before` moves in front of the loop (the ops carry the loop's source line)."""

    def __init__(self, loop: Operation):
        self.ty = loop.operands[0].type
        self.unsigned = scalar_of(self.ty).is_int_unsigned()
        self.b = Builder(Block(), loop.loc)

    def const(self, value: int) -> Value:
        return ConstantOp.build(self.b, value, self.ty)

    def binary(self, operator: str, x: Value, y: Value) -> Value:
        # Distances and counts are unsigned: `signed` only picks divui / remui here.
        return BinaryOp.build(self.b, operator_op_name(operator, False, False), x, y)

    def less(self, x: Value, y: Value) -> Value:
        return CompareOp.build(self.b, INT_COMPARE, "ult" if self.unsigned else "slt", x, y)

    def scaled(self, step: Value, k: int) -> Value:
        """`k * step`: a constant when the step is a constant (the pipeliner takes only loops with
        a constant step), else the step itself (k = 1) or a multiply."""
        s = _known(step)
        if s is not None:
            return self.const(s * k)
        return step if k == 1 else self.binary("mul", step, self.const(k))

    def main_start(self, lb: Value, ub: Value, step: Value, factor: int) -> Value:
        """`lb + (trip % factor) * step` for runtime bounds: where the remainder loop stops
        and the main loop starts."""
        s = _known(step)
        if self.unsigned or (s is not None and s > 0):
            runs, distance, size = self.less(lb, ub), self.binary("sub", ub, lb), step
        elif s is not None:
            runs, distance, size = self.less(ub, lb), self.binary("sub", lb, ub), self.const(-s)
        else:  # a runtime step: upward or downward by its sign, as the lowering compares
            zero = self.const(0)
            up = CompareOp.build(self.b, INT_COMPARE, "sgt", step, zero)
            runs = SelectOp.build(self.b, up, self.less(lb, ub), self.less(ub, lb))
            distance = SelectOp.build(self.b, up, self.binary("sub", ub, lb),
                                      self.binary("sub", lb, ub))
            size = SelectOp.build(self.b, up, step, self.binary("sub", zero, step))
        one = self.const(1)
        if _known(size) != 1:  # ceil(distance / size) for distance >= 1
            distance = self.binary("add", self.binary("floordiv", self.binary(
                "sub", distance, one), size), one)
        trip = SelectOp.build(self.b, runs, distance, self.const(0))
        left = self.binary("mod", trip, self.const(factor))
        return self.binary("add", lb, self.binary("mul", left, step))

    def place_before(self, anchor: Operation) -> None:
        for op in list(self.b.block.ops):
            insert_before(anchor, op)
        self.b.block.ops.clear()


# ---- the loops -------------------------------------------------------------------------------

def _iv_is_read(loop: Operation) -> bool:
    iv = loop.regions[0].block.args[0]
    return any(iv in op.operands for top in loop.regions[0].block.ops for op in top.walk())


def _peel_remainder(loop: Operation, start: Value) -> Operation:
    """A copy of `loop` before it for the iterations up to `start` (same step, same inits),
    whose results the loop, now starting at `start`, continues from."""
    remainder = clone_op(loop, {})
    remainder.operands[1] = start
    remainder.attrs["num_stages"] = 1  # never pipelined, as Triton's epilogue loop
    insert_before(loop, remainder)
    loop.operands[0] = start
    loop.operands[3:] = list(remainder.results)
    return remainder


def _replicate_body(loop: Operation, factor: int, offsets: List[Value]) -> None:
    """Append copies 1 .. factor-1 of the body before its yield, chained through the carried
    values; the yield then hands on the last copy's values. `offsets[j-1]` is j * step
    (empty when the body never reads the induction variable)."""
    block = loop.regions[0].block
    *ops, term = block.ops
    iv, carried = block.args[0], block.args[1:]
    original = yielded = list(term.operands)
    block.ops.remove(term)
    b = Builder(block, loop.loc)
    add = operator_op_name("add", False, False)
    for j in range(1, factor):
        mapping: Dict[Value, Value] = dict(zip(carried, yielded))
        if offsets:
            mapping[iv] = BinaryOp.build(b, add, iv, offsets[j - 1])
            mapping[iv].name_hint = iv.name_hint
        for op in ops:
            b.insert(clone_op(op, mapping))
        yielded = [mapping.get(v, v) for v in original]
    term.operands = yielded
    b.insert(term)


__all__ = ["unroll_loops", "unroll_loop", "UNROLL_FACTOR"]
