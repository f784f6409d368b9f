"""Gluon's layouts for join, split, gather and histogram (a mixin of `GluonSemantic`), and
`gl.histogram`, whose signature adds the bins' `layout`.

The layouts are the ones Gluon 3.6 infers (Triton's `inferJoinOpEncoding` /
`inferSplitOpEncoding`): `join` adds a register bit for the new minor dim to the operands'
layout, `split` drops it and needs both halves of every pair in one thread, `gather` gives
the index's layout, and `histogram` takes the layout it is given. With those layouts join
and split are register renames (`shared_codegen/ops/movement/lowering.py`).
"""

from __future__ import annotations

from gluon.language._layouts import DistributedLayout, is_auto
from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.layouts.relations import joined_layout, split_dim_in_registers, split_layout


class GluonMovementSemantic:
    lang_prefix = "gl."

    def join(self, a, b) -> tensor:
        a, b = self._operand(a, "gl.join input"), self._operand(b, "gl.join input")
        if not a.is_block() and not b.is_block():
            raise ValueError("gl.join cannot join scalars in Gluon (the result would need a "
                             "layout); join tensors")
        a, b = self.unify_layouts([a, b], ["a", "b"], "inputs of gl.join")
        return super().join(a, b)

    def split(self, a) -> tuple:
        a = self._operand(a, "gl.split input")
        if a.is_block() and len(a.shape) == 1:
            raise ValueError(f"gl.split of {a.type} would give scalars, which Gluon cannot "
                             "split into; split a tensor of rank 2 or more")
        return super().split(a)

    def _join_layout(self, a: tensor):
        if is_auto(a.layout):
            return a.layout
        return joined_layout(a.layout, a.shape)

    def _split_layout(self, a: tensor):
        if is_auto(a.layout):
            return a.layout
        if not split_dim_in_registers(a.layout, a.shape):
            raise ValueError(
                f"gl.split needs both halves of each pair in one thread: the last dimension "
                f"(size 2) of its input must be held in registers, but {a.layout!r} spreads "
                f"it over lanes or warps; gl.convert_layout the input to a layout with "
                f"size_per_thread 2 in the last dimension")
        return split_layout(a.layout, a.shape)

    def _gather_layout(self, index: tensor):
        return index.layout

    def gather(self, src, index, axis) -> tensor:
        for what, t in (("source", src), ("index", index)):
            if isinstance(t, tensor) and t.is_block() and is_auto(t.layout):
                raise ValueError(f"gl.gather's {what} has no layout yet (AutoLayout); give it "
                                 "one with gl.set_auto_layout")
        return super().gather(src, index, axis)

    def _map_layout(self, first: tensor):
        return first.layout

    def _histogram_layout(self, layout, num_bins: int):
        if layout is None:
            raise ValueError("gl.histogram requires a destination layout (`layout=`) for its "
                             "bins")
        if not isinstance(layout, DistributedLayout) or is_auto(layout):
            raise TypeError(f"gl.histogram: `layout` must be a distributed layout, got "
                            f"{layout!r}")
        self.check_layout(layout, [num_bins], "gl.histogram")
        return layout

    def histogram(self, x, num_bins, mask=None, layout=None) -> tensor:
        if mask is not None and isinstance(x, tensor) and isinstance(mask, tensor):
            x, mask = self.unify_layouts([x, mask], ["input", "mask"],
                                         "gl.histogram's input and mask")
        return super().histogram(x, num_bins, mask, layout)


@builtin
def histogram(input, num_bins, mask=None, layout=None, _semantic=None):
    """int32 counts of a 1-D integer tensor's values in bins of width 1 starting at 0, in
    `layout` (required); elements whose `mask` is false are not counted, and neither are
    values outside [0, num_bins)."""
    return _semantic.histogram(input, num_bins, mask, layout)


__all__ = ["GluonMovementSemantic", "histogram"]
