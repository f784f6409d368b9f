"""`sc.warp_any`, the warp vote, and the branch each warp takes on its own answer.

    %any = sc.warp_any %pred : tensor<64xi1, #l>      (vote.sync.any.pred of each thread's OR)
    %o = scf.if %any : tensor<64x64xf32, #acc> { ... scf.yield %scaled } { scf.yield %acc }

`barrier_any` answers for the whole program at a barrier; `warp_any` answers for one warp with
no barrier, so warps that have nothing to do skip the branch while the others run it (CUDA's
`if (__any_sync(~0u, p))`). The answer differs between warps, so it may only be an `scf.if`'s
condition, and that branch may only compute values: no memory access and no op that needs the
other warps (`needs_all_warps`); conversions and reductions that would cross warps through
shared memory are refused when the branch is lowered (`ctx.warp_branch`).

The interpreter runs a program whole, so it keeps the warps' answers (`WarpAnswers`) and, when
they differ, runs both sides of the branch and takes each element of a result from the side
its warps took (`merge_warp_branch`), as the GPU's registers end up. An element held by warps
that disagree (a layout that repeats it across warps) must come out the same on both sides.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from shared_codegen.interpreter.run import Unready
from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import TensorType, int1, scalar_of
from shared_codegen.layouts.relations import NO_RELATION

WARP_ANY = "sc.warp_any"


class WarpAnswers:
    """The interpreter's value of a `sc.warp_any`: one answer per warp (per CTA and warp of
    the operand's layout, `warps_holding`'s order). Only `scf.if` reads it."""

    __slots__ = ("per_warp",)

    def __init__(self, per_warp: np.ndarray):
        self.per_warp = per_warp

    def __bool__(self):
        raise TypeError("a gl.warp_any answer differs between warps: only an `if` may read it")


class WarpAnyOp(OpDef):
    """`sc.warp_any`: i1 operand (a scalar or a distributed tensor) -> i1 scalar, the OR of
    the elements one warp holds (module docstring)."""

    name = WARP_ANY
    layout_rule = NO_RELATION
    user_name = "gl.warp_any"

    @staticmethod
    def build(b, pred):
        return b.create(WARP_ANY, [pred], [int1]).result

    def verify(self, op):
        if scalar_of(op.operands[0].type) != int1:
            raise VerificationError(f"warp_any takes an i1 operand (a comparison), got "
                                    f"{op.operands[0].type}", op)
        for user in op.users():
            if not (_is_branch_on(user, op) and user.operands.count(op.result) == 1):
                raise VerificationError(
                    f"gl.warp_any's answer differs between warps, so it may only be an `if` "
                    f"condition; line {user.loc.line} uses it otherwise", op)
            _check_branch(user, op)

    def interpret(self, op, frame):
        pred_type = op.operands[0].type
        pred = np.asarray(frame[op.operands[0]])
        if not isinstance(pred_type, TensorType):
            return [np.bool_(pred)]  # a scalar is the same in every warp
        held = warps_holding(pred_type.layout, tuple(pred_type.shape))
        return [WarpAnswers((held & pred.reshape(1, -1)).any(axis=1))]


def _is_branch_on(user, vote) -> bool:
    from shared_codegen.ops.control.definition import IfOp

    return isinstance(user.opdef, IfOp) and user.operands[0] is vote.result


def _check_branch(if_op, vote):
    """The branch on a warp's own answer only computes values: each op in it neither touches
    memory nor needs the other warps."""
    for region in if_op.regions:
        for top in region.block.ops:
            for inner in top.walk():
                d = inner.opdef
                if d is None or d.terminator:
                    continue
                if d.memory_effects or d.needs_all_warps:
                    what = ("touches memory" if d.memory_effects else
                            "needs every warp of the program")
                    raise VerificationError(
                        f"the branch on gl.warp_any (line {vote.loc.line}) runs in some warps "
                        f"only, so it may only compute values, but {_spelled(inner)} {what}",
                        inner)


def _spelled(op) -> str:
    """How kernel source names `op`, where its definition says."""
    spelling = op.opdef.spelling_of(op)
    return op.opdef.user_name or (f"gl.{spelling}" if spelling else op.name)


@lru_cache(maxsize=256)
def warps_holding(layout, shape: tuple) -> np.ndarray:
    """bool[warps, elements]: which warps hold each element (row-major) of a `shape` tensor
    in `layout`, warps numbered CTA-major (`block * warps + warp`)."""
    from shared_codegen.layouts import to_linear_layout

    ll = to_linear_layout(layout, shape)
    sizes = ll.in_dim_sizes
    n_regs, n_lanes = sizes.get("register", 1), sizes.get("lane", 1)
    n_warps, n_blocks = sizes.get("warp", 1), sizes.get("block", 1)
    unit = np.arange(n_blocks * n_warps)
    reg, lane = np.meshgrid(np.arange(n_regs), np.arange(n_lanes), indexing="ij")
    inputs = {"register": reg.reshape(1, -1), "lane": lane.reshape(1, -1),
              "warp": (unit % n_warps).reshape(-1, 1), "block": (unit // n_warps).reshape(-1, 1)}
    coords = ll.apply_array({k: v for k, v in inputs.items() if ll.has_in_dim(k)})
    flat = np.zeros((len(unit), n_regs * n_lanes), dtype=np.int64)
    for axis, extent in enumerate(shape):
        flat = flat * extent + coords.get(f"dim{axis}", 0)
    held = np.zeros((len(unit), int(np.prod(shape, dtype=np.int64))), dtype=bool)
    np.put_along_axis(held, flat, True, axis=1)
    return held


def merge_warp_branch(op, frame, answers: WarpAnswers):
    """`scf.if` on warps' own answers: each result element from the side its warps took."""
    taken = answers.per_warp
    then_block, else_block = op.regions[0].block, op.regions[1].block
    if taken.all() or not taken.any():
        return frame.run_block(then_block if taken.all() else else_block, [])
    took = frame.run_block(then_block, [])
    skipped = frame.run_block(else_block, [])
    results = []
    for result, a, b in zip(op.results, took, skipped):
        if a is b:
            results.append(a)
            continue
        kept = a = _ready(frame, a)
        a, b = np.asarray(a), np.asarray(_ready(frame, b))
        if not isinstance(result.type, TensorType):
            if not _same_bits(a, b):
                frame.error(op, f"a scalar the branch on gl.warp_any (line {op.loc.line}) "
                                f"changes differs between the warps that take it and those "
                                f"that do not ({a} against {b})")
            results.append(kept)
            continue
        held = warps_holding(result.type.layout, tuple(result.type.shape))
        if held.shape[0] != len(taken):
            frame.error(op, f"gl.warp_any voted over {len(taken)} warps but a value its branch "
                            f"yields is spread over {held.shape[0]}")
        by_taking = (held & taken[:, None]).any(axis=0).reshape(a.shape)
        by_skipping = (held & ~taken[:, None]).any(axis=0).reshape(a.shape)
        split = by_taking & by_skipping & ~_same_bits(a, b, elementwise=True)
        if split.any():
            index = tuple(int(i) for i in np.argwhere(split)[0])
            frame.error(op, f"element {index} of a value the branch on gl.warp_any changes is "
                            f"held by warps that take the branch and warps that do not, so "
                            f"their copies would differ; give it a layout that holds each "
                            f"element in one warp")
        results.append(np.where(by_taking, a, b))
    return results


def _ready(frame, value):
    return value.read(frame) if isinstance(value, Unready) else value


def _same_bits(a, b, elementwise=False):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" or a.dtype.kind == "V":
        view = np.dtype(f"u{a.dtype.itemsize}")
        same = a.view(view) == b.view(view)
    else:
        same = a == b
    return same if elementwise else bool(np.all(same))


__all__ = ["WARP_ANY", "WarpAnswers", "WarpAnyOp", "merge_warp_branch", "warps_holding"]
