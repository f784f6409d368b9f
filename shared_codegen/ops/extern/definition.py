"""`tt.extern_elementwise {symbol}`: an elementwise call of an external device function.

The builders of `tl.extra.cuda.libdevice` pick the symbol (`__nv_expf`, `__nv_powi`, ...) from
the operand dtypes; lowering declares it and `lowering/libdevice.py` links the bitcode that
defines it. The interpreter evaluates the symbol's numpy rule (`numpy_rules.py`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from shared_codegen.analysis.axis_info import rule_unknown
from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import TensorType, scalar_of
from shared_codegen.layouts.relations import SAME_LAYOUT
from shared_codegen.ops.extern.numpy_rules import NUMPY_RULES


class ExternElementwiseOp(OpDef):
    name = "tt.extern_elementwise"
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(rule_unknown)
    spelling = "extern_elementwise"
    pure = True

    @staticmethod
    def build(b, symbol: str, operands, result_type):
        """`operands` share one shape (the caller broadcasts); `result_type` is a scalar type,
        given the operands' shape (and layout, once there is one) here."""
        like = next((v.type for v in operands if isinstance(v.type, TensorType)), None)
        ty = result_type if like is None else dataclasses.replace(like, element=result_type)
        return b.create("tt.extern_elementwise", list(operands), [ty],
                        {"symbol": symbol}).result

    def verify(self, op):
        shapes = {tuple(v.type.shape) if isinstance(v.type, TensorType) else ()
                  for v in list(op.operands) + [op.result]}
        if len(shapes) != 1:
            raise VerificationError("operands and result of an extern call must share one "
                                    "shape", op)

    def print_attrs(self, op):
        return f'{{symbol = "{op.attrs["symbol"]}"}}'

    def interpret(self, op, frame):
        symbol = op.attrs["symbol"]
        rule = NUMPY_RULES.get(symbol)
        if rule is None:
            frame.error(op, f"the interpreter has no implementation of {symbol}")
        args = [np.asarray(frame[v]) for v in op.operands]
        out_dtype = scalar_of(op.result.type).np
        with np.errstate(all="ignore"):
            out = np.asarray(rule(*args))
        if out.dtype != out_dtype:
            out = out.astype(out_dtype)
        return [out[()]]
