"""Ops that move data between elements: `tt.join`, `tt.split`, `tt.gather`, `tt.histogram`.

    %c = tt.join %a, %b : tensor<64xf32> -> tensor<64x2xf32>
    %lo, %hi = tt.split %c : tensor<64x2xf32> -> tensor<64xf32>
    %g = tt.gather %src[%idx] {axis = 0} : tensor<64x8xf32>, tensor<16x8xi32> -> tensor<16x8xf32>
    %h = tt.histogram %x, %mask {num_bins = 16} : tensor<128xi32> -> tensor<16xi32>

Layout rules (`shared_codegen.layouts.relations`): join's result adds a register bit for the
new minor dim to its operands' layout and split drops it (`JOIN`, `SPLIT`: register renames
when the layouts follow them); gather's result is laid out like its index (`GATHER`) and its
source is read through shared memory; histogram's input and mask share a layout and its bins
take any (`HISTOGRAM`).
"""

from __future__ import annotations

import numpy as np

from shared_codegen.errors import InterpreterError
from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import TensorType, int32
from shared_codegen.layouts.relations import GATHER, HISTOGRAM, JOIN, SPLIT, equivalent


def _layouts_match(a: TensorType, b: TensorType) -> bool:
    if a.layout is None or b.layout is None:
        return True
    return equivalent(a.layout, b.layout, a.shape)


class JoinOp(OpDef):
    """`tt.join`: two tensors of one type become the halves of a new minor dim of size 2."""

    name = "tt.join"
    layout_rule = JOIN
    pure = True
    user_name = "join"
    spelling = "join"

    @staticmethod
    def build(b, lhs, rhs, layout=None):
        ty = TensorType((*lhs.type.shape, 2), lhs.type.element, layout)
        return b.create("tt.join", [lhs, rhs], [ty]).result

    def verify(self, op):
        a, b = (v.type for v in op.operands)
        if a.shape != b.shape or a.element != b.element:
            raise VerificationError(f"join operands differ: {a} and {b}", op)
        if not _layouts_match(a, b):
            raise VerificationError(f"join operands have different layouts: {a.layout!r} and "
                                    f"{b.layout!r}", op)
        if op.result.type.shape != (*a.shape, 2):
            raise VerificationError(f"join of {list(a.shape)} must give {[*a.shape, 2]}, got "
                                    f"{list(op.result.type.shape)}", op)

    def interpret(self, op, frame):
        a, b = (np.asarray(frame[v]) for v in op.operands)
        return [np.stack([a, b], axis=-1)]


class SplitOp(OpDef):
    """`tt.split`: the two halves of a tensor whose last dim has size 2."""

    name = "tt.split"
    layout_rule = SPLIT
    pure = True
    user_name = "split"
    spelling = "split"

    @staticmethod
    def build(b, x, layout=None):
        ty = TensorType(tuple(x.type.shape[:-1]), x.type.element, layout)
        return tuple(b.create("tt.split", [x], [ty, ty]).results)

    def verify(self, op):
        src = op.operands[0].type
        if not src.shape or src.shape[-1] != 2 or len(src.shape) < 2:
            raise VerificationError(f"split needs a last dim of size 2 and rank >= 2, got "
                                    f"{list(src.shape)}", op)
        for r in op.results:
            if r.type.shape != src.shape[:-1] or r.type.element != src.element:
                raise VerificationError(f"split result {r.type} does not match {src}", op)

    def interpret(self, op, frame):
        x = np.asarray(frame[op.operands[0]])
        return [x[..., 0].copy(), x[..., 1].copy()]


class GatherOp(OpDef):
    """`tt.gather {axis}`: out[i...] = src[i with index[i...] at `axis`]; the result has the
    index's shape and layout."""

    name = "tt.gather"
    layout_rule = GATHER
    pure = True
    user_name = "gather"
    spelling = "gather"

    @staticmethod
    def build(b, src, index, axis: int, layout=None):
        ty = TensorType(tuple(index.type.shape), src.type.element, layout)
        return b.create("tt.gather", [src, index], [ty], {"axis": int(axis)}).result

    def verify(self, op):
        src, index = (v.type for v in op.operands)
        axis = op.attrs["axis"]
        if len(src.shape) != len(index.shape):
            raise VerificationError(f"gather source {src} and index {index} differ in rank", op)
        if not 0 <= axis < len(src.shape):
            raise VerificationError(f"gather axis {axis} out of range for {src}", op)
        for d, (s, i) in enumerate(zip(src.shape, index.shape)):
            if d != axis and s != i:
                raise VerificationError(f"gather index dim {d} is {i}, source's is {s}", op)
        res = op.result.type
        if res.shape != index.shape or res.element != src.element:
            raise VerificationError(f"gather result {res} must be {index.shape} of "
                                    f"{src.element}", op)
        if not _layouts_match(index, res):
            raise VerificationError(f"gather result layout {res.layout!r} differs from the "
                                    f"index layout {index.layout!r}", op)

    def interpret(self, op, frame):
        src = np.asarray(frame[op.operands[0]])
        index = np.asarray(frame[op.operands[1]]).astype(np.int64)
        axis = op.attrs["axis"]
        n = src.shape[axis]
        bad = (index < 0) | (index >= n)
        if bad.any():
            where = tuple(int(c[0]) for c in np.nonzero(bad))
            raise InterpreterError(f"gather: index {int(index[where])} at position "
                                   f"{list(where)} is out of range for axis {axis} of size {n}")
        return [np.take_along_axis(src, index, axis=axis)]


class HistogramOp(OpDef):
    """`tt.histogram {num_bins}`: int32 counts of the input's values in [0, num_bins)
    (values outside are not counted), skipping elements whose mask is false."""

    name = "tt.histogram"
    layout_rule = HISTOGRAM
    user_name = "histogram"
    spelling = "histogram"
    # Counting goes through shared memory (scratch, like a layout conversion): pure.
    pure = True

    @staticmethod
    def build(b, x, num_bins: int, mask=None, layout=None):
        ty = TensorType((int(num_bins),), int32, layout)
        operands = [x] if mask is None else [x, mask]
        return b.create("tt.histogram", operands, [ty], {"num_bins": int(num_bins)}).result

    def verify(self, op):
        x = op.operands[0].type
        if len(x.shape) != 1 or not x.element.is_int():
            raise VerificationError(f"histogram needs a 1-D integer tensor, got {x}", op)
        if len(op.operands) == 2:
            m = op.operands[1].type
            if m.shape != x.shape or not _layouts_match(x, m):
                raise VerificationError(f"histogram mask {m} does not match the input {x}", op)
        if op.result.type.shape != (op.attrs["num_bins"],):
            raise VerificationError("histogram result must have num_bins elements", op)

    def interpret(self, op, frame):
        x = np.asarray(frame[op.operands[0]]).astype(np.int64)
        keep = (x >= 0) & (x < op.attrs["num_bins"])
        if len(op.operands) == 2:
            keep &= np.asarray(frame[op.operands[1]]).astype(bool)
        return [np.bincount(x[keep], minlength=op.attrs["num_bins"]).astype(np.int32)]

