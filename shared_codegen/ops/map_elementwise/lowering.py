"""Lowering of `tt.map_elementwise`: the region is lowered once per pack of registers (its
scalar ops, branches included, run on the thread's elements one pack at a time)."""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import LoweringError
from shared_codegen.ops.map_elementwise.definition import MapElementwiseOp


@lowering_rule(MapElementwiseOp)
def lower_map_elementwise(op, ctx):
    pack = op.attrs["pack"]
    block = op.regions[0].block
    inputs = [ctx.get(v) for v in op.operands]
    n = len(inputs[0])
    if n % pack:
        raise LoweringError(f"map_elementwise(pack={pack}) needs each thread to hold a "
                            f"multiple of {pack} elements, but the layout of "
                            f"{op.operands[0].type} gives it {n}; use a layout with more "
                            "elements per thread or a smaller pack", op)
    outs = [[None] * n for _ in op.results]
    for start in range(0, n, pack):
        args = [regs[start + j] for regs in inputs for j in range(pack)]
        values = ctx.lower_block(block, args)
        for r, out in enumerate(outs):
            for j in range(pack):
                out[start + j] = values[r * pack + j]
    return outs
