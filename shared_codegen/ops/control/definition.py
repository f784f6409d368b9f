"""Structured control flow: `scf.for`, `scf.if`, `scf.while` and their terminators.

    %r = scf.for %lb, %ub, %step, %init : i32 {      region: ^bb(%iv, %acc)
      scf.yield %next
    }
    %r = scf.if %cond : f32 { scf.yield %a } { scf.yield %b }
    %r = scf.while %init : i32 {                     before: ^bb(%x) -> scf.condition %c, %x
    } {                                              after:  ^bb(%x) -> scf.yield %x2
    }

Loop-carried values are block arguments; results are what the last iteration yields.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.analysis.axis_info import AxisAnalysis
from shared_codegen.ir.core import OpDef, Region, VerificationError
from shared_codegen.ir.types import int1, scalar_of
from shared_codegen.layouts.relations import TERMINATOR, LayoutRule, Same


def _check_yield(op, region, want_types, what):
    term = region.block.terminator
    if term is None or term.name not in ("scf.yield", "scf.condition"):
        raise VerificationError(f"{what} region must end with scf.yield", op)
    got = [v.type for v in term.operands[1:]] if term.name == "scf.condition" else [
        v.type for v in term.operands]
    if got != list(want_types):
        raise VerificationError(
            f"{what} yields ({', '.join(map(str, got))}) but the op carries "
            f"({', '.join(map(str, want_types))})", op)


def _yielded(region, skip=0):
    term = region.block.terminator
    return list(term.operands)[skip:] if term is not None else []


def _for_carried(op):
    """A carried value: its init, the region argument, what is yielded for it and the loop's
    result share one layout (the loop does not convert between iterations)."""
    block = op.regions[0].block
    groups = zip(op.operands[3:], block.args[1:], _yielded(op.regions[0]), op.results)
    return [Same(op, group) for group in groups]


def _if_results(op):
    groups = zip(op.results, _yielded(op.regions[0]), _yielded(op.regions[1]))
    return [Same(op, group) for group in groups]


def _while_carried(op):
    """Two groups: what enters the `before` region (inits, its arguments, what `after`
    yields), and what `scf.condition` forwards (to `after`'s arguments and the results)."""
    before, after = op.regions[0].block, op.regions[1].block
    entering = zip(op.operands, before.args, _yielded(op.regions[1]))
    forwarded = zip(_yielded(op.regions[0], 1), after.args, op.results)
    return [Same(op, group) for group in (*entering, *forwarded)]


FOR_CARRIED = LayoutRule("for-carried values", _for_carried)
IF_RESULTS = LayoutRule("if results", _if_results)
WHILE_CARRIED = LayoutRule("while-carried values", _while_carried)


class ForOp(OpDef):
    name = "scf.for"
    layout_rule = FOR_CARRIED
    axis_region_rule = staticmethod(AxisAnalysis.visit_for)

    @staticmethod
    def build(b, lb, ub, step, inits, iv_name="", num_stages=None, loop_unroll_factor=None,
              flatten=False, warp_specialize=False):
        region = Region([lb.type] + [v.type for v in inits])
        region.block.args[0].name_hint = iv_name
        # num_stages: tl.range's software-pipelining depth for this loop; loop_unroll_factor:
        # how many copies of the body tile/passes/loop_unroll.py makes; tl.range checks both.
        attrs = {} if num_stages is None else {"num_stages": num_stages}
        if loop_unroll_factor is not None and loop_unroll_factor > 1:
            attrs["loop_unroll_factor"] = loop_unroll_factor
        if flatten:  # tl.range(flatten=True): tile/passes/loop_flatten.py fuses the nest
            attrs["flatten"] = True
        if warp_specialize:  # tl.range(warp_specialize=True): tile/passes/warp_specialize.py
            attrs["warp_specialize"] = True
        return b.create("scf.for", [lb, ub, step] + list(inits), [v.type for v in inits],
                        attrs, regions=[region])

    def verify(self, op):
        lb, ub, step = op.operands[:3]
        if not (lb.type == ub.type == step.type) or not scalar_of(lb.type).is_int():
            raise VerificationError("bounds and step must be integers of one type", op)
        inits = op.operands[3:]
        block = op.regions[0].block
        if [a.type for a in block.args] != [lb.type] + [v.type for v in inits]:
            raise VerificationError("block arguments must be (iv, *iter_args)", op)
        _check_yield(op, op.regions[0], [v.type for v in inits], "loop body")

    def interpret(self, op, frame):
        lb, ub, step = (int(frame[v]) for v in op.operands[:3])
        carried = [frame.raw(v) for v in op.operands[3:]]  # may be Unready
        iv_dtype = scalar_of(op.operands[0].type).np
        block = op.regions[0].block
        if step == 0:
            frame.error(op, "scf.for step is zero")
        i = lb
        while (i < ub) if step > 0 else (i > ub):
            carried = frame.run_block(block, [np.asarray(i, dtype=iv_dtype)[()]] + carried)
            i += step
        return carried


class IfOp(OpDef):
    name = "scf.if"
    layout_rule = IF_RESULTS
    axis_region_rule = staticmethod(AxisAnalysis.visit_if)

    @staticmethod
    def build(b, cond, result_types):
        return b.create("scf.if", [cond], list(result_types), regions=[Region(), Region()])

    def verify(self, op):
        if op.operands[0].type != int1:
            raise VerificationError(f"condition must be a scalar i1, got {op.operands[0].type}",
                                    op)
        want = [r.type for r in op.results]
        _check_yield(op, op.regions[0], want, "then")
        _check_yield(op, op.regions[1], want, "else")

    def interpret(self, op, frame):
        from shared_codegen.ops.program.warp_vote import WarpAnswers, merge_warp_branch

        cond = frame[op.operands[0]]
        if isinstance(cond, WarpAnswers):  # each warp takes the branch on its own answer
            return merge_warp_branch(op, frame, cond)
        region = op.regions[0] if bool(cond) else op.regions[1]
        return frame.run_block(region.block, [])


class WhileOp(OpDef):
    name = "scf.while"
    layout_rule = WHILE_CARRIED
    axis_region_rule = staticmethod(AxisAnalysis.visit_while)

    @staticmethod
    def build(b, inits):
        types = [v.type for v in inits]
        return b.create("scf.while", list(inits), types, regions=[Region(types), Region(types)])

    def verify(self, op):
        cond = op.regions[0].block.terminator
        if cond is None or cond.name != "scf.condition":
            raise VerificationError("before region must end with scf.condition", op)
        _check_yield(op, op.regions[0], [r.type for r in op.results], "before")
        _check_yield(op, op.regions[1], [v.type for v in op.operands], "after")

    def interpret(self, op, frame):
        carried = [frame.raw(v) for v in op.operands]  # may be Unready
        before, after = op.regions[0].block, op.regions[1].block
        while True:
            values = frame.run_block(before, carried, keep_condition=True)
            cond, forwarded = values[0], values[1:]
            if not bool(cond):
                return forwarded
            carried = frame.run_block(after, forwarded)


# The terminators: a loop body's or branch's yield, a while's condition (which forwards the
# values to the `after` region), a function's return, a combine region's return.
YIELD, CONDITION, RETURN, COMBINE_RETURN = ("scf.yield", "scf.condition", "tt.return",
                                            "tt.reduce.return")


class YieldOp(OpDef):
    names = (YIELD, CONDITION, RETURN, COMBINE_RETURN)
    terminator = True
    layout_rule = TERMINATOR

    @staticmethod
    def build(b, values, name=YIELD):
        return b.create(name, list(values), [])

    def interpret(self, op, frame):
        return []
