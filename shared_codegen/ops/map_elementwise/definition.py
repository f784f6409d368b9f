"""`tt.map_elementwise {pack}`: apply a scalar region to every element of its operands.

    %y = tt.map_elementwise %x, %alpha {pack = 1} : tensor<128xfp32> -> tensor<128xfp32> {
    ^bb(%a: fp32, %b: fp32):
      ...                       (scalar ops, scf.if: one element at a time)
      tt.map_elementwise.return %r
    }

The operands have one shape (the frontends broadcast them) and the results take it. With
`pack = p` the region takes p elements of each operand at once (operand i's element j is
argument i*p + j) and returns p of each result (result r's element j is value r*p + j), so a
function can share work between neighbouring elements; which elements form a pack is the
compiler's choice (consecutive registers of a thread, consecutive row-major elements in the
interpreter).

Layout rule: operands and results share one layout (`SAME_LAYOUT`), as elementwise ops do.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, Region, VerificationError
from shared_codegen.ir.types import TensorType
from shared_codegen.layouts.relations import SAME_LAYOUT, TERMINATOR

MAP_RETURN = "tt.map_elementwise.return"


class MapElementwiseOp(OpDef):
    name = "tt.map_elementwise"
    layout_rule = SAME_LAYOUT
    user_name = "map_elementwise"
    spelling = "map_elementwise"
    # Not `pure`: cse compares operands and attributes, not region bodies.

    @staticmethod
    def region(operand_types, pack: int) -> Region:
        """The body to trace the scalar function into, before the op exists (its result
        types are what the function returns)."""
        return Region([t.element for t in operand_types for _ in range(pack)])

    @staticmethod
    def build(b, operands, result_elements, pack: int, region: Region, layout=None):
        shape = operands[0].type.shape
        result_types = [TensorType(tuple(shape), e, layout) for e in result_elements]
        return b.create("tt.map_elementwise", list(operands), result_types, {"pack": int(pack)},
                        regions=[region])

    def verify(self, op):
        pack = op.attrs["pack"]
        shape = op.operands[0].type.shape
        for v in (*op.operands, *op.results):
            if v.type.shape != shape:
                raise VerificationError(f"map_elementwise operands and results must have one "
                                        f"shape, got {v.type} and {op.operands[0].type}", op)
        block = op.regions[0].block
        if len(block.args) != pack * len(op.operands):
            raise VerificationError(f"the region takes {pack} element(s) of each operand", op)
        term = block.terminator
        if term is None or term.name != MAP_RETURN or \
                len(term.operands) != pack * len(op.results):
            raise VerificationError(f"the region must return {pack} element(s) of each "
                                    "result", op)
        for r, res in enumerate(op.results):
            for j in range(pack):
                if term.operands[r * pack + j].type != res.type.element:
                    raise VerificationError(f"result {r} is {res.type.element} but the region "
                                            f"returns {term.operands[r * pack + j].type}", op)

    def interpret(self, op, frame):
        pack = op.attrs["pack"]
        block = op.regions[0].block
        shape = op.operands[0].type.shape
        flat = [np.asarray(frame[v]).reshape(-1) for v in op.operands]
        n = flat[0].size
        outs = [np.empty(n, dtype=r.type.element.np) for r in op.results]
        for start in range(0, n, pack):
            # A short last pack repeats its final element; the extra results are dropped.
            picks = [min(start + j, n - 1) for j in range(pack)]
            args = [x[k] for x in flat for k in picks]
            values = frame.run_block(block, args)
            for r, out in enumerate(outs):
                for j, k in enumerate(picks):
                    out[k] = values[r * pack + j]
        return [out.reshape(shape) for out in outs]


class MapElementwiseReturnOp(OpDef):
    """Ends a map_elementwise region; its operands are the region's results."""

    name = MAP_RETURN
    terminator = True
    layout_rule = TERMINATOR

    @staticmethod
    def build(b, values):
        return b.create(MAP_RETURN, list(values), [])

    def interpret(self, op, frame):
        return []
