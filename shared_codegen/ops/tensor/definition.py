"""Shape ops: ranges, splats, broadcasts, expand_dims, reshape, transpose, layout conversion,
and value hints (`multiple_of`, `max_contiguous`).

Layout rules (for explicit-layout IR): `expand_dims` takes a `SliceLayout(axis, parent)`
operand and gives `parent`; `broadcast`, `splat` and hints keep the layout; `convert_layout`
is the only op whose operand and result layouts may differ arbitrarily.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.analysis.axis_info import rule_passthrough
from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import TensorType, int32
from shared_codegen.layouts.relations import (ANY_LAYOUT, EXPAND_DIMS, RESHAPE, SAME_LAYOUT, TRANS,
                                              UNRELATED)
from shared_codegen.ops.tensor.axis import (rule_broadcast, rule_expand_dims, rule_hint,
                                            rule_make_range, rule_reshape, rule_splat, rule_trans)


class MakeRangeOp(OpDef):
    """`tt.make_range {start, end}`: the i32 tensor [start, end)."""

    name = "tt.make_range"
    layout_rule = ANY_LAYOUT
    axis_rule = staticmethod(rule_make_range)
    pure = cheap = True
    user_name = "gl.arange"

    @staticmethod
    def build(b, start: int, end: int, layout=None):
        ty = TensorType((end - start,), int32, layout)
        return b.create("tt.make_range", [], [ty], {"start": start, "end": end}).result

    def verify(self, op):
        start, end = op.attrs["start"], op.attrs["end"]
        n = end - start
        if n <= 0 or n & (n - 1):
            raise VerificationError(f"range length must be a power of two, got {n}", op)

    def interpret(self, op, frame):
        return [np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32)]


class SplatOp(OpDef):
    name = "tt.splat"
    layout_rule = ANY_LAYOUT
    axis_rule = staticmethod(rule_splat)
    pure = cheap = True
    user_name = "gl.full"

    @staticmethod
    def build(b, scalar, shape, layout=None):
        return b.create("tt.splat", [scalar], [TensorType(tuple(shape), scalar.type, layout)]).result

    def verify(self, op):
        if isinstance(op.operands[0].type, TensorType):
            raise VerificationError("splat takes a scalar", op)
        if op.result.type.element != op.operands[0].type:
            raise VerificationError("result element type must be the scalar's type", op)

    def interpret(self, op, frame):
        x = np.asarray(frame[op.operands[0]])
        return [np.full(op.result.type.shape, x, dtype=x.dtype)]


class BroadcastOp(OpDef):
    """`tt.broadcast`: repeat size-1 dimensions up to the result shape (same rank)."""

    name = "tt.broadcast"
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(rule_broadcast)
    pure = cheap = True
    user_name = "broadcast"

    @staticmethod
    def build(b, x, shape):
        ty = x.type.with_shape(shape)
        return b.create("tt.broadcast", [x], [ty]).result

    def verify(self, op):
        src, dst = op.operands[0].type, op.result.type
        if len(src.shape) != len(dst.shape):
            raise VerificationError(f"rank changes: {src.shape} -> {dst.shape}", op)
        for s, d in zip(src.shape, dst.shape):
            if s != d and s != 1:
                raise VerificationError(f"cannot broadcast {src.shape} to {dst.shape}", op)

    def interpret(self, op, frame):
        x = np.asarray(frame[op.operands[0]])
        return [np.broadcast_to(x, op.result.type.shape).copy()]


class ExpandDimsOp(OpDef):
    name = "tt.expand_dims"
    layout_rule = EXPAND_DIMS
    axis_rule = staticmethod(rule_expand_dims)
    pure = cheap = True
    user_name = "expand_dims"

    @staticmethod
    def build(b, x, axis: int, layout=None):
        shape = list(x.type.shape)
        shape.insert(axis, 1)
        ty = TensorType(tuple(shape), x.type.element, layout)
        return b.create("tt.expand_dims", [x], [ty], {"axis": axis}).result

    def verify(self, op):
        src, dst = op.operands[0].type, op.result.type
        axis = op.attrs["axis"]
        if len(dst.shape) != len(src.shape) + 1 or dst.shape[axis] != 1:
            raise VerificationError(f"bad expand_dims {src.shape} -> {dst.shape} at {axis}", op)
        parent = getattr(src.layout, "parent", None)
        # Gluon's AutoLayout placeholders (`placeholder = True`) relate by slices only once
        # resolved; before that both sides hold the placeholder.
        unresolved = any(getattr(t.layout, "placeholder", False) for t in (src, dst))
        if src.layout is not None and dst.layout is not None and not unresolved:
            if getattr(src.layout, "dim", None) != axis or parent != dst.layout:
                raise VerificationError(
                    f"expand_dims at axis {axis} needs a SliceLayout(dim={axis}) operand whose "
                    f"parent is the result layout; got {src.layout!r} -> {dst.layout!r}", op)

    def interpret(self, op, frame):
        return [np.expand_dims(np.asarray(frame[op.operands[0]]), op.attrs["axis"])]


class ReshapeOp(OpDef):
    """`tt.reshape`: row-major reshape; `allow_reorder` lets the compiler permute elements."""

    name = "tt.reshape"
    layout_rule = RESHAPE
    axis_rule = staticmethod(rule_reshape)

    @staticmethod
    def build(b, x, shape, allow_reorder=False, layout=None):
        ty = TensorType(tuple(shape), x.type.element, layout)
        return b.create("tt.reshape", [x], [ty], {"allow_reorder": bool(allow_reorder)}).result

    def verify(self, op):
        if op.operands[0].type.numel != op.result.type.numel:
            raise VerificationError("reshape must keep the number of elements", op)

    def interpret(self, op, frame):
        return [np.asarray(frame[op.operands[0]]).reshape(op.result.type.shape)]


class TransOp(OpDef):
    name = "tt.trans"
    layout_rule = TRANS
    axis_rule = staticmethod(rule_trans)

    @staticmethod
    def build(b, x, order, layout=None):
        shape = tuple(x.type.shape[i] for i in order)
        ty = TensorType(shape, x.type.element, layout)
        return b.create("tt.trans", [x], [ty], {"order": tuple(order)}).result

    def verify(self, op):
        order = op.attrs["order"]
        if sorted(order) != list(range(len(op.operands[0].type.shape))):
            raise VerificationError(f"order {list(order)} is not a permutation", op)

    def interpret(self, op, frame):
        return [np.transpose(np.asarray(frame[op.operands[0]]), op.attrs["order"]).copy()]


class ConvertLayoutOp(OpDef):
    """`ttg.convert_layout`: same values, another distribution over threads."""

    name = "ttg.convert_layout"
    layout_rule = UNRELATED
    axis_rule = staticmethod(rule_passthrough)
    # Merged by cse, but converting is never cheap.
    pure = True

    @staticmethod
    def build(b, x, layout):
        return b.create("ttg.convert_layout", [x], [x.type.with_layout(layout)]).result

    def verify(self, op):
        src, dst = op.operands[0].type, op.result.type
        if src.shape != dst.shape or src.element != dst.element:
            raise VerificationError("convert_layout must keep shape and element type", op)

    def interpret(self, op, frame):
        return [frame[op.operands[0]]]


class HintOp(OpDef):
    """`tt.hint {divisibility, contiguity}`: the value is unchanged; axis analysis reads the
    attributes (`tl.multiple_of`, `tl.max_contiguous`)."""

    name = "tt.hint"
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(rule_hint)
    pure = cheap = True

    @staticmethod
    def build(b, x, **hints):
        return b.create("tt.hint", [x], [x.type], hints).result

    def interpret(self, op, frame):
        return [frame[op.operands[0]]]
