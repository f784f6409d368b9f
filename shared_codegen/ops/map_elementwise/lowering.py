"""Lowering of `tt.map_elementwise`: the region is lowered once per pack of registers (its
scalar ops, branches included, run on the thread's elements one pack at a time). When a
thread holds fewer elements than a multiple of `pack`, its last pack repeats its last element
and the extra results are dropped (as the interpreter does)."""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ops.map_elementwise.definition import MapElementwiseOp


@lowering_rule(MapElementwiseOp)
def lower_map_elementwise(op, ctx):
    pack = op.attrs["pack"]
    block = op.regions[0].block
    inputs = [ctx.get(v) for v in op.operands]
    n = len(inputs[0])
    outs = [[None] * n for _ in op.results]
    for start in range(0, n, pack):
        picks = [min(start + j, n - 1) for j in range(pack)]
        args = [regs[k] for regs in inputs for k in picks]
        values = ctx.lower_block(block, args)
        for r, out in enumerate(outs):
            for j in range(min(pack, n - start)):
                out[start + j] = values[r * pack + j]
    return outs
