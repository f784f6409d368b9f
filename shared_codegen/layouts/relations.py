"""How the layouts of an op's tensors relate: one implementation for both frontends.

The tile DSL's layout assignment (`tile.passes.layout_assignment`) and Gluon's AutoLayout
resolution (`gluon.passes`) both read an op's `layout_rule` trait, ask it for the op's
relations and derive layouts along them with `forward` / `backward` below.

Relations between tensor values:

- `Same(values)`: one layout for all of them (elementwise ops, broadcast, carried loop values).
- `Slice(sliced, parent, axis)`: sliced's layout is `SliceLayout(axis, parent's)` (the operand
  of expand_dims, the results of a reduce).
- `Trans(src, dst, order)` / `Reshape(src, dst)`: dst's layout renames src's registers, so the
  op moves no data (`transposed_layout`, `reshaped_layout`).
- `Prefer(a, b)`: the op works best when both share a layout but can convert (a load's result
  and its pointers). In explicit-layout IR the lowering wants them equal.

The binary relations read as `a -> b`: `forward(a's layout)` is b's, `backward(b's)` is a's,
or None when a layout does not determine the other (a non-slice layout has no parent).

A `LayoutRule` names the relations one op kind imposes; each op definition declares one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from shared_codegen.layouts import (BlockedLayout, DistributedLinearLayout, SliceLayout,
                                    to_linear_layout)
from shared_codegen.layouts.linear_layout import reshape_coords

# ---- layout algebra ------------------------------------------------------------------------


def inverse_order(order: Sequence[int]) -> Tuple[int, ...]:
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return tuple(inv)


def transposed_layout(layout, order, src_shape):
    """The layout of `trans(x, order)` that makes the transpose a register rename."""
    if isinstance(layout, BlockedLayout):
        inverse = inverse_order(order)
        return BlockedLayout([layout.size_per_thread[d] for d in order],
                             [layout.threads_per_warp[d] for d in order],
                             [layout.warps_per_cta[d] for d in order],
                             [inverse[d] for d in layout.order])
    ll = to_linear_layout(layout, src_shape)
    dst_shape = [src_shape[d] for d in order]
    return _linear_from_bases(ll, lambda v: tuple(v[d] for d in order), dst_shape)


def reshaped_layout(layout, src_shape, dst_shape):
    """The layout of a row-major reshape that keeps every element in its register.

    With power-of-two sizes, the row-major flat index is the concatenation of the coordinate
    bits, so each basis vector maps to a basis vector of the new shape."""
    ll = to_linear_layout(layout, src_shape)
    return _linear_from_bases(ll, lambda v: reshape_coords(v, src_shape, dst_shape), dst_shape)


def joined_layout(layout, src_shape):
    """The layout of `join(a, b)` (a new minor dim of size 2) when `a` and `b` have `layout`:
    the new dim is the first register bit, so each thread holds both halves of its elements
    and the join moves no data (Triton's inferred JoinOp encoding)."""
    ll = to_linear_layout(layout, src_shape)
    rank = len(src_shape)
    bases = {name: [(*v, 0) for v in vectors] for name, vectors in ll.bases.items()}
    bases["register"] = [(0,) * rank + (1,)] + bases.get("register", [])
    return _layout_from_bases(bases, [*src_shape, 2])


def split_layout(layout, src_shape):
    """The layout of each half of `split(x)` (x's last dim has size 2) when x has `layout`.

    The register bit that walks the last dim disappears. A lane or warp bit that walks it
    would leave threads holding the other half: with the last coordinate dropped it becomes
    a replication bit (the lowering then moves data; Gluon refuses such layouts)."""
    ll = to_linear_layout(layout, src_shape)
    bases = {}
    for name, vectors in ll.bases.items():
        kept = []
        for v in vectors:
            if name == "register" and not any(v[:-1]):
                continue  # walks only the split dim (or nothing): each half drops it
            kept.append(tuple(v[:-1]))
        bases[name] = kept
    return _layout_from_bases(bases, list(src_shape[:-1]))


def split_dim_in_registers(layout, src_shape) -> bool:
    """Whether every thread holds both halves of each element pair `split` separates."""
    ll = to_linear_layout(layout, src_shape)
    if any(v[-1] for name, vectors in ll.bases.items() if name != "register"
           for v in vectors):
        return False
    return sum(1 for v in ll.bases.get("register", []) if v[-1]) == 1


def _layout_from_bases(bases, dst_shape):
    linear = DistributedLinearLayout(bases.get("register", []), bases.get("lane", []),
                                     bases.get("warp", []), bases.get("block", []), dst_shape)
    return as_blocked(linear, dst_shape) or linear


def _linear_from_bases(ll, move, dst_shape):
    bases = {name: [move(tuple(v)) for v in vectors] for name, vectors in ll.bases.items()}
    linear = DistributedLinearLayout(bases.get("register", []), bases.get("lane", []),
                                     bases.get("warp", []), bases.get("block", []), dst_shape)
    return as_blocked(linear, dst_shape) or linear


def as_blocked(layout, shape) -> Optional[BlockedLayout]:
    """The BlockedLayout placing elements exactly like `layout` for `shape`, if there is one.

    Readers (and the Gluon converter) know blocked layouts; a derived linear layout that is
    secretly blocked is printed as one. The candidate is read off the bases (registers below
    the first lane step of a dim form the per-thread block, lanes and warps count per dim,
    the order is the order dims first appear in) and kept only if it matches exactly."""
    ll = to_linear_layout(layout, shape)
    bases = ll.bases
    if bases.get("block"):
        return None
    rank = len(shape)
    dims_seen: List[int] = []
    counts = {name: [0] * rank for name in ("register", "lane", "warp")}
    first_thread_step = [None] * rank
    for name in ("register", "lane", "warp"):
        for vec in bases.get(name, []):
            nonzero = [d for d, c in enumerate(vec) if c]
            if len(nonzero) != 1:
                return None
            d = nonzero[0]
            if d not in dims_seen:
                dims_seen.append(d)
            if name != "register" and first_thread_step[d] is None:
                first_thread_step[d] = vec[d]
    for vec in bases.get("register", []):
        d = next(i for i, c in enumerate(vec) if c)
        if first_thread_step[d] is None or vec[d] < first_thread_step[d]:
            counts["register"][d] += 1
    for name in ("lane", "warp"):
        for vec in bases.get(name, []):
            counts[name][next(i for i, c in enumerate(vec) if c)] += 1
    order = dims_seen + [d for d in reversed(range(rank)) if d not in dims_seen]
    try:
        candidate = BlockedLayout([1 << n for n in counts["register"]],
                                  [1 << n for n in counts["lane"]],
                                  [1 << n for n in counts["warp"]], order)
    except ValueError:
        return None
    return candidate if equivalent(candidate, layout, shape) else None


def equivalent(a, b, shape) -> bool:
    """Whether two layouts place every element of `shape` in the same place."""
    if a == b:
        return True
    try:
        return to_linear_layout(a, shape) == to_linear_layout(b, shape)
    except ValueError:
        return False


# ---- relations -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Same:
    """Every value listed shares one layout."""

    op: object
    values: Tuple


@dataclass(frozen=True, eq=False)
class Slice:
    """a (the sliced value) has `SliceLayout(axis, b's layout)`."""

    op: object
    a: object
    b: object
    axis: int

    def forward(self, la):
        # Only a slice along this axis names its parent.
        if isinstance(la, SliceLayout) and la.dim == self.axis:
            return la.parent
        return None

    def backward(self, lb):
        return SliceLayout(self.axis, lb)


@dataclass(frozen=True, eq=False)
class Trans:
    """b = trans(a, order), its layout a register rename of a's."""

    op: object
    a: object
    b: object
    order: Tuple[int, ...]

    def forward(self, la):
        return transposed_layout(la, self.order, self.a.type.shape)

    def backward(self, lb):
        return transposed_layout(lb, inverse_order(self.order), self.b.type.shape)


@dataclass(frozen=True, eq=False)
class Reshape:
    """b = reshape(a), its layout a register rename of a's."""

    op: object
    a: object
    b: object

    def forward(self, la):
        return reshaped_layout(la, self.a.type.shape, self.b.type.shape)

    def backward(self, lb):
        return reshaped_layout(lb, self.b.type.shape, self.a.type.shape)


@dataclass(frozen=True, eq=False)
class Prefer:
    """a would rather have b's layout; the op converts when they differ."""

    op: object
    a: object
    b: object

    def forward(self, la):
        return la

    def backward(self, lb):
        return lb


@dataclass(frozen=True, eq=False)
class Join:
    """b = join(a, other): b's layout adds a register bit for the new minor dim to a's."""

    op: object
    a: object
    b: object

    def forward(self, la):
        return joined_layout(la, self.a.type.shape)

    def backward(self, lb):
        # Only a result holding both halves in one thread names its operands' layout.
        return _halves_layout(lb, self.b.type.shape)


@dataclass(frozen=True, eq=False)
class Split:
    """b is one half of split(a): b's layout drops a's register bit of the last dim."""

    op: object
    a: object
    b: object

    def forward(self, la):
        # An operand spreading the pair over threads names no good half layout: the halves
        # get their own and the operand is converted (`operand_layout`).
        return _halves_layout(la, self.a.type.shape)

    def backward(self, lb):
        return joined_layout(lb, self.b.type.shape)

    def operand_layout(self):
        """The layout split's operand must have for b's layout (None: it has it)."""
        src = self.a.type
        if split_dim_in_registers(src.layout, src.shape):
            return None
        return joined_layout(self.b.type.layout, self.b.type.shape)


def _halves_layout(layout, shape):
    if not split_dim_in_registers(layout, shape):
        return None
    return split_layout(layout, shape)


STRUCTURAL = (Slice, Trans, Reshape, Join, Split)


# ---- layout rules: the relations one kind of op imposes --------------------------------------


@dataclass(frozen=True)
class LayoutRule:
    """A named rule: `relations(op)` lists the relations between the op's tensors."""

    name: str
    relations: Callable[[object], List]

    def __repr__(self) -> str:
        return f"<layout rule {self.name}>"


def _no_relations(op) -> List:
    return []


def _all_same(op) -> List:
    return [Same(op, (*op.operands, *op.results))]


def _expand_dims(op) -> List:
    return [Slice(op, op.operands[0], op.result, op.attrs["axis"])]


def _reduce(op) -> List:
    relations = [Same(op, tuple(op.operands))]
    for res in op.results:
        relations.append(Slice(op, res, op.operands[0], op.attrs["axis"]))
    return relations


def _trans(op) -> List:
    return [Trans(op, op.operands[0], op.result, tuple(op.attrs["order"]))]


def _reshape(op) -> List:
    return [Reshape(op, op.operands[0], op.result)]


def _join(op) -> List:
    return [Same(op, tuple(op.operands)), Join(op, op.operands[0], op.result)]


def _split(op) -> List:
    return [Same(op, tuple(op.results))] + [Split(op, op.operands[0], r) for r in op.results]


def _gather(op) -> List:
    # The result is indexed like the index tensor; the source is read through shared memory.
    return [Same(op, (op.operands[1], op.result))]


def _histogram(op) -> List:
    # The input and its mask are read together; the bins take any layout.
    return [Same(op, tuple(op.operands))]


SAME_LAYOUT = LayoutRule("same layout", _all_same)
EXPAND_DIMS = LayoutRule("expand_dims", _expand_dims)
REDUCE = LayoutRule("reduce", _reduce)
TRANS = LayoutRule("trans", _trans)
RESHAPE = LayoutRule("reshape", _reshape)
JOIN = LayoutRule("join", _join)
SPLIT = LayoutRule("split", _split)
GATHER = LayoutRule("gather", _gather)
HISTOGRAM = LayoutRule("histogram", _histogram)
# A source (range, constant, splat): any layout will do, it takes its users'.
ANY_LAYOUT = LayoutRule("any layout", _no_relations)
# convert_layout: its two sides are unrelated, that is its point.
UNRELATED = LayoutRule("unrelated", _no_relations)
# The op fixes its tensors' layouts itself (MMA operands, shared-memory loads): no relation.
OWN_LAYOUTS = LayoutRule("own layouts", _no_relations)
# The op takes tensors of any layouts, each independent of the others (`print`).
NO_RELATION = LayoutRule("no relation", _no_relations)
# A region terminator: the op owning the region relates the values it yields.
TERMINATOR = LayoutRule("terminator", _no_relations)


@dataclass(frozen=True)
class PointerAccess:
    """The layout rule of a global access through a tensor of pointers: the pointers, the mask
    and the load's `other` share one layout; the operands at `preferred` (a stored value, an
    atomic's operands) and the results would rather have it too but can be converted."""

    name: str
    preferred: Tuple[int, ...] = ()

    def relations(self, op) -> List:
        ptr = op.operands[0]
        bound = [v for i, v in enumerate(op.operands) if i not in self.preferred]
        relations: List = [Same(op, tuple(bound))]
        relations += [Prefer(op, op.operands[i], ptr) for i in self.preferred]
        relations += [Prefer(op, res, ptr) for res in op.results]
        return relations


__all__ = ["ANY_LAYOUT", "EXPAND_DIMS", "GATHER", "HISTOGRAM", "JOIN", "Join", "SPLIT", "Split",
           "joined_layout", "split_dim_in_registers", "split_layout", "OWN_LAYOUTS", "REDUCE",
           "RESHAPE", "SAME_LAYOUT", "NO_RELATION", "STRUCTURAL", "TERMINATOR", "TRANS",
           "UNRELATED", "LayoutRule", "PointerAccess", "Prefer",
           "Reshape", "Same", "Slice", "Trans", "as_blocked", "equivalent", "inverse_order",
           "reshaped_layout", "transposed_layout"]
