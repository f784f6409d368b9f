"""join, split, cat, gather and histogram of the tile language (a mixin of `TileSemantic`),
with Triton 3.6's rules (`triton/language/semantic.py`):

- `join(a, b)` broadcasts its operands together and adds a minor dim of size 2; two scalars
  give a tensor of shape [2]. `split` is its inverse (a rank-1 tensor of shape [2] gives two
  scalars).
- `cat` takes two rank-1 tensors of one type; like Triton it requires `can_reorder=True`.
  It is built as join, transpose and reshape, so its elements come out in order anyway.
- `gather(src, index, axis)`: the result has the index's shape; the index must have the
  source's rank and size on every other dim.
- `histogram(x, num_bins, mask)` counts a 1-D integer tensor's values in [0, num_bins).

The layout hooks (`_join_layout`, ...) give None here (layout assignment decides); Gluon's
semantic overrides them with the layouts Gluon 3.6 infers.
"""

from __future__ import annotations

from shared_codegen.frontend.values import is_builtin, tensor
from shared_codegen.ir.types import int1
from shared_codegen.ops.map_elementwise.definition import MapElementwiseOp, MapElementwiseReturnOp
from shared_codegen.ops.movement.definition import GatherOp, HistogramOp, JoinOp, SplitOp
from tile.language import _types as T


class MovementSemantic:
    # The language's spelling in messages ("gl." in Gluon).
    lang_prefix = "tl."

    # ---- layout hooks (Gluon overrides) ---------------------------------------------------
    def _join_layout(self, a: tensor):
        return None

    def _split_layout(self, a: tensor):
        return None

    def _gather_layout(self, index: tensor):
        return None

    def _histogram_layout(self, layout, num_bins: int):
        return None

    def _map_layout(self, first: tensor):
        return None

    # ---- join / split / cat ---------------------------------------------------------------
    def join(self, a, b) -> tensor:
        fn = f"{self.lang_prefix}join"
        a, b = self._operand(a, f"{fn} input"), self._operand(b, f"{fn} input")
        if a.dtype != b.dtype:
            raise TypeError(f"{fn}: both inputs must have one dtype, got {T.type_name(a.dtype)} "
                            f"and {T.type_name(b.dtype)}")
        a, b = self._broadcast_pair(a, b)
        scalars = not a.is_block()
        if scalars:
            a, b = self._broadcast_to(a, [1]), self._broadcast_to(b, [1])
        out = self.make_tensor(JoinOp.build(self.builder, a.handle, b.handle,
                                            self._join_layout(a)))
        return self.reshape(out, [2]) if scalars else out

    def split(self, a) -> tuple:
        fn = f"{self.lang_prefix}split"
        a = self._operand(a, f"{fn} input")
        if not a.is_block() or a.shape[-1] != 2:
            raise ValueError(f"{fn} needs a tensor whose last dimension has size 2, got "
                             f"{T.describe(a)}")
        if len(a.shape) == 1:  # two scalars: split a [1, 2] tensor and unsplat the halves
            lo, hi = self.split(self.expand_dims(a, 0))
            return self._unsplat(lo), self._unsplat(hi)
        lo, hi = SplitOp.build(self.builder, a.handle, self._split_layout(a))
        return self.make_tensor(lo), self.make_tensor(hi)

    def cat(self, a, b, can_reorder=False) -> tensor:
        fn = f"{self.lang_prefix}cat"
        a, b = self._operand(a, f"{fn} input"), self._operand(b, f"{fn} input")
        if not can_reorder:
            raise ValueError(f"{fn}: the current implementation of `cat` always may reorder "
                             "elements; pass can_reorder=True (as Triton 3.6 requires)")
        for t in (a, b):
            if not t.is_block() or len(t.shape) != 1:
                raise ValueError(f"{fn} takes rank-1 tensors, got {T.describe(t)}")
        if a.type != b.type:
            raise TypeError(f"{fn}: both inputs must have one type, got {a.type} and {b.type}")
        # [a0 b0], [a1 b1], ... transposed to [a..., b...]: the concatenation, in order.
        rows = self.permute(self.join(a, b), [1, 0])
        return self.reshape(rows, [2 * a.shape[0]])

    # ---- gather ---------------------------------------------------------------------------
    def gather(self, src, index, axis) -> tensor:
        fn = f"{self.lang_prefix}gather"
        src, index = self._operand(src, f"{fn} source"), self._operand(index, f"{fn} index")
        if not src.is_block() or not index.is_block():
            raise ValueError(f"{fn} takes tensors, got source {T.describe(src)} and index "
                             f"{T.describe(index)}")
        if not T.is_int(index.dtype):
            raise TypeError(f"{fn}: the index must be an integer tensor, got "
                            f"{T.type_name(index.dtype)}")
        rank = len(src.shape)
        if len(index.shape) != rank:
            raise ValueError(f"{fn}: the source and index tensors must have the same rank, "
                             f"got {src.type} and {index.type}")
        axis = T.plain_number(axis)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"{fn}: `axis` must be a compile-time int, got {T.describe(axis)}")
        if not -rank <= axis < rank:
            raise ValueError(f"{fn}: axis {axis} is out of range for a source of rank {rank}")
        axis %= rank
        for d in range(rank):
            if d != axis and index.shape[d] != src.shape[d]:
                raise ValueError(f"{fn}: index dim {d} has size {index.shape[d]} but the "
                                 f"source's has {src.shape[d]}; only the gather axis ({axis}) "
                                 "may differ")
        return self.make_tensor(GatherOp.build(self.builder, src.handle, index.handle, axis,
                                               self._gather_layout(index)))

    # ---- histogram ------------------------------------------------------------------------
    def histogram(self, x, num_bins, mask=None, layout=None) -> tensor:
        fn = f"{self.lang_prefix}histogram"
        x = self._operand(x, f"{fn} input")
        if not x.is_block() or len(x.shape) != 1:
            raise ValueError(f"{fn} only supports 1-D input, got {T.describe(x)}")
        if not T.is_int(x.dtype):
            raise TypeError(f"{fn} only supports integer input, got {T.type_name(x.dtype)}")
        num_bins = T.plain_number(num_bins)
        if isinstance(num_bins, bool) or not isinstance(num_bins, int):
            raise TypeError(f"{fn}: `num_bins` must be a compile-time int, got "
                            f"{T.describe(num_bins)}")
        if num_bins <= 0 or not T.is_power_of_two(num_bins):
            raise ValueError(f"{fn}: `num_bins` must be a power of 2 (it is the result's "
                             f"shape), got {num_bins}")
        result_layout = self._histogram_layout(layout, num_bins)
        mask_handle = None
        if mask is not None:
            mask = self._operand(mask, f"{fn} mask")
            if mask.dtype != int1:
                raise ValueError(f"{fn}: the mask must be a boolean tensor, got "
                                 f"{T.type_name(mask.dtype)}")
            mask, x = self._broadcast_pair(mask, x)
            if mask.shape != x.shape:
                raise ValueError(f"{fn}: the mask {mask.type} does not broadcast to the input "
                                 f"{x.type}")
            mask_handle = mask.handle
        return self.make_tensor(HistogramOp.build(self.builder, x.handle, num_bins, mask_handle,
                                                  result_layout))

    # ---- map_elementwise ------------------------------------------------------------------
    def map_elementwise(self, fn, args, pack=1):
        """Trace `fn` on scalars (`pack` elements of each input) into the region of one
        `tt.map_elementwise` over the broadcast inputs."""
        name = f"{self.lang_prefix}map_elementwise"
        pack = T.plain_number(pack)
        if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
            raise ValueError(f"{name}: `pack` must be a compile-time int >= 1, got "
                             f"{T.describe(pack)}")
        args = [self._operand(a, f"{name} input") for a in args]
        if not any(a.is_block() for a in args):
            raise ValueError(f"{name} needs at least one tensor input")
        args = list(self.broadcast_tensors(*args))
        region = MapElementwiseOp.region([a.type for a in args], pack)
        block = region.block
        with self.builder.at_end_of(block), self.builder.location(self.builder.loc):
            params = [self.make_tensor(v) for v in block.args]
            if is_builtin(fn):
                results = fn(*params, _semantic=self)
            elif self.codegen is None:
                raise RuntimeError(f"{name}: tracing the scalar function needs the code "
                                   "generator")
            else:
                results = self.codegen.call_function(fn, params, {})
            single = isinstance(results, tensor) or T.is_number(results)
            results = [results] if single else list(results or [])
            results = [self.to_tensor(r) if T.is_number(r) else r for r in results]
            for i, r in enumerate(results):
                if not isinstance(r, tensor) or r.is_block():
                    raise TypeError(f"{name}: the scalar function must return scalars, but "
                                    f"value {i} is {T.describe(r)}")
            if not results or len(results) % pack:
                raise TypeError(f"{name}: with pack={pack} the scalar function must return "
                                f"a multiple of {pack} values, got {len(results)}")
            MapElementwiseReturnOp.build(self.builder, [r.handle for r in results])
        types = [r.dtype for r in results]
        elements = types[::pack]
        for offset in range(1, pack):
            if types[offset::pack] != elements:
                raise TypeError(f"{name}: the {pack} values returned for each result must "
                                f"have one dtype, got {[str(t) for t in types]}")
        op = MapElementwiseOp.build(self.builder, [a.handle for a in args], elements, pack,
                                    region, self._map_layout(args[0]))
        outs = [self.make_tensor(v) for v in op.results]
        return outs[0] if single else tuple(outs)


__all__ = ["MovementSemantic"]
