"""The converter's form for `ttg.warp_specialize` (what `tl.range(warp_specialize=True)`
leaves, tile/passes/warp_specialize.py): each partition becomes a `@gluon.jit` function and
the op a `gl.warp_specialize` call, as a Gluon author writes it:

    @gluon.jit
    def _consumer_partition(a_ring, b_ring, ready, empty, acc, k_tiles):
        ...                                     # the default region, its yield returned
        return acc_1

    @gluon.jit
    def _producer_partition(a_ring, b_ring, ready, empty, k_tiles, a_desc, b_desc):
        ...                                     # worker region 0, its block arguments

    acc_1 = gl.warp_specialize([(_consumer_partition, (a_ring, ...)),
                                (_producer_partition, (a_ring, ...))], [1], [24])

The default region may read anything in scope: what it reads from outside is passed in
(literals stay inline). A worker region sees only its arguments, which are the op's
operands, so its function takes them in order. Gluon traces both back to the same op.

`WarpSpecForms` is a mixin of `tile.convert.GluonPrinter`; `warp_spec_op` prints the op and
returns False for other ops.
"""

from __future__ import annotations

from typing import List

from shared_codegen.ops.tma.tensormap import ReinterpretTensorDescriptorOp
from shared_codegen.ops.warp_specialize.definition import (WarpSpecializeOp, partition_names,
                                                           worker_operands)

# Names the printed module defines or imports, which a partition's locals must not shadow.
_RESERVED = {"gl", "gluon", "libdevice", "mbarrier", "tma", "fence_async_shared",
             "warpgroup_mma", "warpgroup_mma_wait", "async_copy", "mma_v2"}


class WarpSpecForms:
    def warp_spec_op(self, op, out, indent) -> bool:
        if not isinstance(op.opdef, WarpSpecializeOp):
            return False
        names = partition_names(op)
        default, default_args = self.partition_function(op.regions[0].block,
                                                        names[0] or "default", None)
        pairs = [f"({default}, {_tuple(default_args)})"]
        for i, (region, caps) in enumerate(zip(op.regions[1:], worker_operands(op))):
            _check_descriptors(region.block, self)
            fn, _ = self.partition_function(region.block, names[i + 1] or f"worker{i}",
                                            region.block.args)
            pairs.append(f"({fn}, {_tuple([self.value(v) for v in caps])})")
        call = (f"gl.warp_specialize([{', '.join(pairs)}], "
                f"{list(op.attrs['worker_num_warps'])}, {list(op.attrs['worker_num_regs'])})")
        pad = "    " * indent
        if not op.results:
            out.append(pad + call)
            return True
        results = [self.names.fresh(r.name_hint) for r in op.results]
        out.append(pad + f"{', '.join(results)} = {call}")
        for r, n in zip(op.results, results):
            self.expr[r] = n
        return True

    def partition_function(self, block, name: str, params):
        """A `@gluon.jit` function printing `block`: with `params` (a worker's block
        arguments) it takes those; without, it takes what the block reads from outside
        (the default region). Returns (function name, the caller's argument texts)."""
        saved_expr, saved_names = self.expr, self.names
        args: List[str] = []
        self.expr = {}
        if params is None:
            params, args = self.free_values(block, saved_expr)
        # A fresh scope of the printer's own name allocator (its class: no import back).
        self.names = names = type(saved_names)(_RESERVED | set(self.layout_names.values()))
        formal = []
        for v in params:
            hint = args[len(formal)] if len(args) > len(formal) else v.name_hint
            n = names.fresh(hint)
            self.expr[v] = n
            formal.append(n)
        lines: List[str] = []
        self.block(block, lines, 1)
        returned = block.terminator.operands
        if returned:
            lines.append(f"    return {', '.join(self.value(v) for v in returned)}")
        if not any(line.strip() for line in lines):
            lines.append("    pass")
        self.expr, self.names = saved_expr, saved_names
        fn = f"_{name}_partition"
        taken = {h.split("(", 1)[0].split()[-1] for h in self.helpers}
        k = 1
        while fn in taken:
            fn, k = f"_{name}_partition_{k}", k + 1
        self.helpers.append(f"\n@gluon.jit\ndef {fn}({', '.join(formal)}):\n"
                            + "\n".join(lines))
        return fn, args

    def free_values(self, block, outer_expr):
        """(values, texts): what `block` reads from outside it, by first use, each printed
        as the caller's name. Literals print inline in the function (left out of both)."""
        inner = set(block.args)
        for top in block.ops:
            for op in top.walk():
                inner.update(op.results)
                for region in op.regions:
                    inner.update(region.block.args)
        values, texts = [], []
        for top in block.ops:
            for op in top.walk():
                for v in op.operands:
                    if v in inner or v in values or v in self.expr:
                        continue
                    text = outer_expr.get(v)
                    if text is None:
                        raise self.fail(f"value {v!r} is used before it is defined")
                    if v in self.literals or not text.isidentifier():
                        self.expr[v] = text
                        continue
                    values.append(v)
                    texts.append(text)
        return values, texts


def _check_descriptors(block, printer) -> None:
    """A worker re-reading a kernel-built descriptor from its scratch pointer (what the tile
    pass does for tl.make_tensor_descriptor) has no Gluon spelling: Gluon partitions take
    descriptors only as kernel arguments."""
    args = set(block.args)
    for top in block.ops:
        for op in top.walk():
            if isinstance(op.opdef, ReinterpretTensorDescriptorOp) and op.operands[0] in args:
                raise printer.fail(
                    f"{op.loc}: the producer partition reads a descriptor the kernel builds "
                    f"(tl.make_tensor_descriptor) through its global-scratch pointer, which "
                    f"Gluon cannot express; convert with warp_specialize off, or pass "
                    f"host TensorDescriptors")


def _tuple(items: List[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


__all__ = ["WarpSpecForms"]
