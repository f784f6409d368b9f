"""Reductions and scans with a combine region: `tt.reduce`, `tt.scan`.

    %m, %i = tt.reduce %vals, %idxs {axis = 1} : tensor<64xf32>, tensor<64xi32> {
    ^bb(%a: f32, %ai: i32, %b: f32, %bi: i32):
      ...
      tt.reduce.return %c, %ci
    }

The combine region takes 2N scalars (the running values of the N operands, then the new ones)
and returns N. Reducing a 1-D tensor gives scalars. The interpreter runs the region on whole
numpy slices at once (the rules of scalar ops are numpy ufuncs), combining halves pairwise.
For a scan the order is sequential along the axis, which fixes rounding like the GPU does
within a thread.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, Region, VerificationError
from shared_codegen.ir.types import TensorType
from shared_codegen.layouts.relations import REDUCE, SAME_LAYOUT


def _reduced_type(ty: TensorType, axis: int, layout=None):
    shape = ty.shape[:axis] + ty.shape[axis + 1:]
    if not shape:
        return ty.element
    return TensorType(shape, ty.element, layout)


class ReduceOp(OpDef):
    name = "tt.reduce"
    layout_rule = REDUCE
    user_name = "reduction"

    @staticmethod
    def build(b, operands, axis: int, result_layout=None):
        elems = [v.type.element for v in operands]
        region = Region(elems + elems)
        result_types = [_reduced_type(v.type, axis, result_layout) for v in operands]
        return b.create("tt.reduce", list(operands), result_types, {"axis": axis},
                        regions=[region])

    def verify(self, op):
        axis = op.attrs["axis"]
        shapes = {v.type.shape for v in op.operands}
        if len(shapes) != 1:
            raise VerificationError("reduced operands must have one shape", op)
        shape = shapes.pop()
        if not 0 <= axis < len(shape):
            raise VerificationError(f"axis {axis} out of range for shape {list(shape)}", op)
        n = len(op.operands)
        block = op.regions[0].block
        if len(block.args) != 2 * n:
            raise VerificationError(f"combine region takes {2 * n} arguments", op)
        term = block.terminator
        if term is None or term.name != "tt.reduce.return" or len(term.operands) != n:
            raise VerificationError(f"combine region must return {n} values", op)

    def interpret(self, op, frame):
        axis = op.attrs["axis"]
        block = op.regions[0].block
        parts = [np.moveaxis(np.asarray(frame[v]), axis, 0) for v in op.operands]
        while parts[0].shape[0] > 1:
            n = parts[0].shape[0]
            half = n // 2
            lhs = [p[:half] for p in parts]
            rhs = [p[half:2 * half] for p in parts]
            combined = frame.run_block(block, lhs + rhs)
            combined = [np.asarray(c, dtype=p.dtype) for c, p in zip(combined, parts)]
            if n % 2:
                combined = [np.concatenate([c, p[2 * half:]]) for c, p in zip(combined, parts)]
            parts = combined
        return [p[0] if p.ndim > 1 else p[0][()] for p in parts]


class ScanOp(OpDef):
    name = "tt.scan"
    layout_rule = SAME_LAYOUT

    @staticmethod
    def build(b, operands, axis: int, reverse: bool = False):
        elems = [v.type.element for v in operands]
        region = Region(elems + elems)
        return b.create("tt.scan", list(operands), [v.type for v in operands],
                        {"axis": axis, "reverse": bool(reverse)}, regions=[region])

    def verify(self, op):
        axis = op.attrs["axis"]
        shape = op.operands[0].type.shape
        if not 0 <= axis < len(shape):
            raise VerificationError(f"axis {axis} out of range for shape {list(shape)}", op)

    def interpret(self, op, frame):
        axis = op.attrs["axis"]
        block = op.regions[0].block
        parts = [np.moveaxis(np.asarray(frame[v]), axis, 0) for v in op.operands]
        n = parts[0].shape[0]
        order = range(n - 1, -1, -1) if op.attrs.get("reverse") else range(n)
        outs = [np.empty_like(p) for p in parts]
        acc = None
        for i in order:
            cur = [p[i] for p in parts]
            acc = cur if acc is None else frame.run_block(block, acc + cur)
            for o, a in zip(outs, acc):
                o[i] = a
        return [np.moveaxis(o, 0, axis) for o in outs]

