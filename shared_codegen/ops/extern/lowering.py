"""Lowering of `tt.extern_elementwise`: one call of the declared symbol per register.

The callee stays a declaration here; `lowering/libdevice.py` links libdevice's definition at
the LLVM step, and the optimizer inlines it (the PTX has no `call`).
"""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import scalar_of
from shared_codegen.lowering.context import llvm_type
from shared_codegen.ops.arith.lowering import elementwise
from shared_codegen.ops.extern.definition import ExternElementwiseOp


def call_extern(ctx, symbol: str, result_type, args):
    """`symbol(*args)` declared (once per module) as `result_type (arg types)`."""
    return ctx.intrinsic(symbol, result_type, list(args))


@lowering_rule(ExternElementwiseOp)
def lower_extern_elementwise(op, ctx):
    ret = llvm_type(scalar_of(op.result.type))
    symbol = op.attrs["symbol"]
    return elementwise(ctx, op, lambda *xs: call_extern(ctx, symbol, ret, xs))
