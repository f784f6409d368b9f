"""Distributed (register) layout families, with Gluon 3.6's names and parameters.

Each is a frozen dataclass that validates itself and builds its ``LinearLayout`` for a tensor
shape with ``to_linear_layout(shape)``; the result has input dims ``register, lane, warp,
block`` and output dims ``dim0..dim{rank-1}``, basis for basis what Triton 3.6 produces.
``repr`` is the constructor call, so printed IR can be pasted back into Python.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from shared_codegen.layouts import _validate as check
from shared_codegen.layouts._building import (BLOCK, LANE, REGISTER, WARP,
                                              combine_cta_cga_with_shape, identity_nd, matrix_order,
                                              standard_out_dims)
from shared_codegen.layouts.linear_layout import LinearLayout

__all__ = [
    "DistributedLayout",
    "BlockedLayout",
    "SliceLayout",
    "DistributedLinearLayout",
    "NVMMADistributedLayout",
    "DotOperandLayout",
    "default_blocked_layout",
]

WARP_SIZE = 32


class DistributedLayout:
    """Base of layouts for tensors held in registers."""

    alias_prefix = "linear"

    def to_linear_layout(self, shape) -> LinearLayout:
        return _cached_linear_layout(self, check.check_shape(type(self).__name__, shape,
                                                             self.rank))

    def _build(self, shape: tuple[int, ...]) -> LinearLayout:
        raise NotImplementedError

    def _any_linear_layout(self) -> LinearLayout:
        # Lane, warp and block counts do not depend on the shape as long as it is large
        # enough to hold one tile; a shape of 1s would broadcast but keep their sizes.
        return self.to_linear_layout([1] * self.rank)

    @property
    def num_warps(self) -> int:
        return self._any_linear_layout().in_dim_size(WARP)

    @property
    def warp_size(self) -> int:
        return self._any_linear_layout().in_dim_size(LANE)

    @property
    def num_ctas(self) -> int:
        return self._any_linear_layout().in_dim_size(BLOCK)


@functools.lru_cache(maxsize=4096)
def _cached_linear_layout(layout: DistributedLayout, shape: tuple[int, ...]) -> LinearLayout:
    return layout._build(shape)


@dataclass(frozen=True, repr=False)
class BlockedLayout(DistributedLayout):
    """Each thread holds a ``size_per_thread`` block; threads then warps tile the tensor,
    walking dims in ``order`` (most minor first); the whole pattern repeats to cover the
    shape. ``cga_layout`` bases say how the CTAs of a cluster tile the tensor."""

    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]
    cga_layout: tuple[tuple[int, ...], ...] = field(default_factory=tuple)

    alias_prefix = "blocked"

    def __post_init__(self):
        owner = "BlockedLayout"
        size_per_thread = check.int_tuple(owner, "size_per_thread", self.size_per_thread)
        threads_per_warp = check.int_tuple(owner, "threads_per_warp", self.threads_per_warp)
        warps_per_cta = check.int_tuple(owner, "warps_per_cta", self.warps_per_cta)
        order = check.int_tuple(owner, "order", self.order)
        rank = len(size_per_thread)
        if rank == 0:
            raise ValueError(f"{owner}: size_per_thread must have at least one entry")
        check.same_rank(owner, "size_per_thread", rank, threads_per_warp=threads_per_warp,
                        warps_per_cta=warps_per_cta, order=order)
        check.powers_of_two(owner, "size_per_thread", size_per_thread)
        check.powers_of_two(owner, "threads_per_warp", threads_per_warp)
        check.powers_of_two(owner, "warps_per_cta", warps_per_cta)
        if math.prod(threads_per_warp) != WARP_SIZE:
            raise ValueError(f"{owner}: threads_per_warp must multiply to {WARP_SIZE} (the "
                             f"warp size), got {list(threads_per_warp)} "
                             f"(product {math.prod(threads_per_warp)})")
        check.permutation(owner, "order", order, rank)
        cga = check.cga_bases(owner, self.cga_layout, rank)
        for name, value in [("size_per_thread", size_per_thread),
                            ("threads_per_warp", threads_per_warp),
                            ("warps_per_cta", warps_per_cta), ("order", order),
                            ("cga_layout", cga)]:
            object.__setattr__(self, name, value)

    def __repr__(self):
        return check.constructor_repr(self, ["size_per_thread", "threads_per_warp",
                                             "warps_per_cta", "order", "cga_layout"],
                                      {"cga_layout": ()})

    @property
    def rank(self) -> int:
        return len(self.order)

    @property
    def num_warps(self) -> int:
        return math.prod(self.warps_per_cta)

    @property
    def warp_size(self) -> int:
        return math.prod(self.threads_per_warp)

    def _build(self, shape):
        cta = (identity_nd(REGISTER, self.size_per_thread, self.order)
               * identity_nd(LANE, self.threads_per_warp, self.order)
               * identity_nd(WARP, self.warps_per_cta, self.order))
        return combine_cta_cga_with_shape(cta, self.cga_layout, shape)


def default_blocked_layout(shape, num_warps: int, threads_per_warp: int = WARP_SIZE,
                           order=None) -> BlockedLayout:
    """Triton's default blocked encoding (``getDefaultBlockedEncoding``): one element per
    thread; walking dims from most minor (``order``, default last dim first), each dim takes
    as many threads of the CTA as it has elements, lanes before warps; the most major dim
    takes whatever lanes and warps are left."""
    owner = "default_blocked_layout"
    shape = [int(s) for s in shape]
    rank = len(shape)
    if rank == 0:
        raise ValueError(f"{owner}: shape must have at least one dim")
    order = list(range(rank - 1, -1, -1)) if order is None else list(order)
    check.permutation(owner, "order", order, rank)
    check.power_of_two(owner, "num_warps", num_warps)
    check.power_of_two(owner, "threads_per_warp", threads_per_warp)
    lanes, warps = distribute_threads(shape, [1] * rank, order, num_warps, threads_per_warp)
    return BlockedLayout([1] * rank, lanes, warps, order)


def distribute_threads(shape, size_per_thread, order, num_warps, threads_per_warp=32):
    """Lanes and warps per dim for a blocked layout (Triton's `BlockedEncodingAttr::get`).

    Walking dims fastest first, each takes as many threads as it has per-thread blocks (lanes
    before warps, never more than remain); the slowest dim takes the lanes and warps left over,
    so every layout uses exactly `num_warps * threads_per_warp` threads."""
    rank = len(shape)
    lanes, warps = [1] * rank, [1] * rank
    left_lanes, left_warps = threads_per_warp, num_warps
    left_threads = num_warps * threads_per_warp
    used_lanes = used_warps = 1
    for d in order[:-1]:
        blocks = max(1, shape[d] // size_per_thread[d])
        threads = max(1, min(left_threads, blocks))
        lanes[d] = max(1, min(threads, left_lanes))
        warps[d] = max(1, min(threads // lanes[d], left_warps))
        left_warps //= warps[d]
        left_lanes //= lanes[d]
        left_threads //= threads
        used_lanes *= lanes[d]
        used_warps *= warps[d]
    lanes[order[-1]] = threads_per_warp // used_lanes
    warps[order[-1]] = num_warps // used_warps
    return lanes, warps


def _unwrap_parent(layout) -> None:
    """A parent given as `gl.constexpr(layout)` (a module-level Gluon constant) is the layout
    itself, as Triton's layouts unwrap it."""
    parent = layout.parent
    if type(parent).__name__ == "constexpr" and hasattr(parent, "value"):
        object.__setattr__(layout, "parent", parent.value)


@dataclass(frozen=True, repr=False)
class SliceLayout(DistributedLayout):
    """``parent`` with dim ``dim`` removed: the layout of a reduction's result along ``dim``."""

    dim: int
    parent: DistributedLayout

    alias_prefix = "slice"

    def __post_init__(self):
        owner = "SliceLayout"
        _unwrap_parent(self)
        if not isinstance(self.parent, DistributedLayout):
            raise ValueError(f"{owner}: parent must be a distributed layout, got "
                             f"{self.parent!r}")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int):
            raise ValueError(f"{owner}: dim must be an int, got {self.dim!r}")
        if not 0 <= self.dim < self.parent.rank:
            raise ValueError(f"{owner}: dim must be in [0, {self.parent.rank}) for a rank "
                             f"{self.parent.rank} parent, got {self.dim}")

    def __repr__(self):
        return f"SliceLayout(dim={self.dim}, parent={self.parent!r})"

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    @property
    def cga_layout(self):
        return tuple(b[:self.dim] + b[self.dim + 1:] for b in getattr(self.parent,
                                                                      "cga_layout", ()))

    def _build(self, shape):
        parent_shape = list(shape)
        parent_shape.insert(self.dim, 1)
        parent = self.parent.to_linear_layout(parent_shape)
        names = standard_out_dims(len(shape))
        bases = {}
        for in_dim, vectors in parent.bases.items():
            sliced = [v[:self.dim] + v[self.dim + 1:] for v in vectors]
            if in_dim == REGISTER:
                # Registers that differed only along the removed dim now repeat data.
                sliced = [v for v in sliced if any(v)]
            bases[in_dim] = sliced
        sizes = [(name, parent.out_dim_size(f"dim{i + (i >= self.dim)}"))
                 for i, name in enumerate(names)]
        return LinearLayout(bases, sizes, require_surjective=False)


@dataclass(frozen=True, repr=False)
class DistributedLinearLayout(DistributedLayout):
    """A register layout given directly by its bases (``reg_bases`` ... ``block_bases``) for
    a tensor of ``shape``."""

    reg_bases: tuple[tuple[int, ...], ...]
    lane_bases: tuple[tuple[int, ...], ...]
    warp_bases: tuple[tuple[int, ...], ...]
    block_bases: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]

    alias_prefix = "linear"

    def __post_init__(self):
        owner = "DistributedLinearLayout"
        shape = check.check_shape(owner, self.shape)
        rank = len(shape)
        for name in ("reg_bases", "lane_bases", "warp_bases", "block_bases"):
            bases = check.bases_tuple(owner, name, getattr(self, name), rank)
            for basis in bases:
                for dim, (component, size) in enumerate(zip(basis, shape)):
                    if component >= size:
                        raise ValueError(f"{owner}: {name} basis {list(basis)} has "
                                         f"dim{dim}={component}, outside shape {list(shape)}")
            object.__setattr__(self, name, bases)
        object.__setattr__(self, "shape", shape)

    def __repr__(self):
        return check.constructor_repr(self, ["reg_bases", "lane_bases", "warp_bases",
                                             "block_bases", "shape"])

    @property
    def rank(self) -> int:
        return len(self.shape)

    def to_linear_layout(self, shape=None) -> LinearLayout:
        if shape is not None and tuple(shape) != self.shape:
            if _fits_inside(shape, self.shape):
                return _restricted_linear_layout(self, tuple(shape))
            raise ValueError(f"DistributedLinearLayout: built for shape {list(self.shape)}, "
                             f"asked for {list(shape)}")
        return _cached_linear_layout(self, self.shape)

    def _any_linear_layout(self):
        return self.to_linear_layout()

    def _build(self, shape):
        return LinearLayout({REGISTER: self.reg_bases, LANE: self.lane_bases,
                             WARP: self.warp_bases, BLOCK: self.block_bases},
                            list(zip(standard_out_dims(len(shape)), shape)),
                            require_surjective=False)

    @classmethod
    def from_linear_layout(cls, layout: LinearLayout) -> DistributedLinearLayout:
        names = standard_out_dims(len(layout.out_dims))
        layout = layout.transpose_outs(names)
        bases = layout.bases
        return cls(bases.get(REGISTER, []), bases.get(LANE, []), bases.get(WARP, []),
                   bases.get(BLOCK, []), [layout.out_dim_size(n) for n in names])


def _fits_inside(shape, full) -> bool:
    return len(shape) == len(full) and all(
        isinstance(s, int) and 0 < s <= f and s & (s - 1) == 0 for s, f in zip(shape, full))


@functools.lru_cache(maxsize=None)
def _restricted_linear_layout(layout: DistributedLinearLayout, shape) -> LinearLayout:
    """A linear layout over a smaller shape (`x[:, None]` of a tensor in a linear layout, a
    slice's parent): coordinates wrap into the shape, so lanes and warps broadcast, and
    registers that land on an element already held are dropped, as Triton's
    `ensureLayoutNotLargerThan` does."""
    full = layout.to_linear_layout()
    names = standard_out_dims(len(shape))
    bases = {}
    for in_dim, vectors in full.transpose_outs(names).bases.items():
        wrapped = [tuple(c & (s - 1) for c, s in zip(v, shape)) for v in vectors]
        bases[in_dim] = [v for v in wrapped if any(v)] if in_dim == REGISTER else wrapped
    return LinearLayout(bases, list(zip(names, shape)), require_surjective=False)


@dataclass(frozen=True, repr=False)
class NVMMADistributedLayout(DistributedLayout):
    """Accumulator layout of NVIDIA tensor-core MMA: ``version=[2, 0]`` for mma.sync
    (``instr_shape=[16, 8]``, or ``[1, 16, 8]`` batched) and ``[3, 0]`` for Hopper wgmma
    (``instr_shape=[16, N, K]``; warps of a warpgroup stack along M). PTX ISA "Matrix
    fragments for mma.m16n8k16" and "wgmma register fragments" give the per-lane pattern."""

    version: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    instr_shape: tuple[int, ...]
    cga_layout: tuple[tuple[int, ...], ...] = field(default_factory=tuple)

    alias_prefix = "mma"

    def __post_init__(self):
        owner = "NVMMADistributedLayout"
        version = check.int_tuple(owner, "version", self.version)
        warps = check.int_tuple(owner, "warps_per_cta", self.warps_per_cta)
        instr = check.int_tuple(owner, "instr_shape", self.instr_shape)
        if len(version) != 2 or version[0] not in (2, 3):
            raise ValueError(f"{owner}: version must be [2, 0] (mma.sync) or [3, 0] (wgmma),"
                             f" got {list(version)}")
        rank = len(warps)
        if rank not in (2, 3):
            raise ValueError(f"{owner}: warps_per_cta must have 2 or 3 entries, got "
                             f"{list(warps)}")
        check.powers_of_two(owner, "warps_per_cta", warps)
        if version[0] == 2:
            if len(instr) != rank or instr[-2:] != (16, 8) or any(s != 1 for s in instr[:-2]):
                expected = [1] * (rank - 2) + [16, 8]
                raise ValueError(f"{owner}: version 2 needs instr_shape {expected} for rank "
                                 f"{rank}, got {list(instr)}")
        else:
            if rank != 2:
                raise ValueError(f"{owner}: version 3 (wgmma) is rank 2, got warps_per_cta "
                                 f"{list(warps)}")
            if len(instr) != 3 or instr[0] != 16 or instr[1] % 8 or not 8 <= instr[1] <= 256:
                raise ValueError(f"{owner}: version 3 needs instr_shape [16, N, K] with N a "
                                 f"multiple of 8 in [8, 256], got {list(instr)}")
            if math.prod(warps) % 4:
                raise ValueError(f"{owner}: version 3 needs whole warpgroups (warps_per_cta "
                                 f"multiplying to a multiple of 4), got {list(warps)}")
        cga = check.cga_bases(owner, self.cga_layout, rank)
        for name, value in [("version", version), ("warps_per_cta", warps),
                            ("instr_shape", instr), ("cga_layout", cga)]:
            object.__setattr__(self, name, value)

    def __repr__(self):
        return check.constructor_repr(self, ["version", "warps_per_cta", "instr_shape",
                                             "cga_layout"], {"cga_layout": ()})

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    @property
    def is_hopper(self) -> bool:
        return self.version[0] == 3

    @property
    def num_warps(self) -> int:
        return math.prod(self.warps_per_cta)

    def _build(self, shape):
        rank = self.rank
        tile = list(self.instr_shape[:2]) if self.is_hopper else list(self.instr_shape)
        # The accumulator always looks like a kWidth=2 operand: two adjacent columns/thread.
        order = matrix_order(rank, row_major=True)
        cta = mma_tile(tile, 2, order, rep_order=matrix_order(rank, row_major=True))
        warp_order = matrix_order(rank, row_major=not self.is_hopper)
        cta = cta * identity_nd(WARP, self.warps_per_cta, warp_order).transpose_outs(
            cta.out_dims)
        return combine_cta_cga_with_shape(cta, self.cga_layout, shape)


def mma_tile(tile_shape, k_width: int, order, rep_order) -> LinearLayout:
    """One warp's MMA fragment: ``k_width`` registers then 4 lanes along the inner dim, 8
    lanes along the outer dim, then register repeats (outer dim first)."""
    rank = len(rep_order)
    names = standard_out_dims(rank)
    layout = identity_nd(REGISTER, [1] * rank, rep_order)
    inner, outer = order[0], order[1]
    rows, cols = tile_shape[outer], tile_shape[inner]
    return (layout
            * LinearLayout.identity_1d(k_width, REGISTER, names[inner])
            * LinearLayout.identity_1d(4, LANE, names[inner])
            * LinearLayout.identity_1d(8, LANE, names[outer])
            * LinearLayout.identity_1d(rows // 8, REGISTER, names[outer])
            * LinearLayout.identity_1d(cols // (k_width * 4), REGISTER, names[inner]))


def dot_operand_order(operand_index: int, rank: int) -> list[int]:
    """Dims of an MMA operand from most minor: K first (K-contiguous registers)."""
    k_dim = rank - 1 if operand_index == 0 else rank - 2
    non_k = rank - 2 if operand_index == 0 else rank - 1
    return [k_dim, non_k] + ([0] if rank == 3 else [])


def broadcast_along(sizes, order, broadcast_dim: int, in_dim: str) -> LinearLayout:
    """``identity_nd`` except that ``broadcast_dim`` gets zeros: every warp of an MMA row
    needs the whole K extent of its operand, so warps repeat data along K."""
    names = standard_out_dims(len(sizes))
    layout = LinearLayout.empty()
    for dim in order:
        if dim == broadcast_dim:
            layout = layout * LinearLayout.zeros_1d(sizes[dim], in_dim, names[dim])
        else:
            layout = layout * LinearLayout.identity_1d(sizes[dim], in_dim, names[dim])
    return layout


@dataclass(frozen=True, repr=False)
class DotOperandLayout(DistributedLayout):
    """Register layout of MMA operand ``operand_index`` (0 = A, 1 = B) for MMA ``parent``;
    ``k_width`` consecutive K elements per thread (32 bits worth: 2 for 16-bit types)."""

    operand_index: int
    parent: DistributedLayout
    k_width: int

    alias_prefix = "dot_op"

    def __post_init__(self):
        owner = "DotOperandLayout"
        _unwrap_parent(self)
        if self.operand_index not in (0, 1) or isinstance(self.operand_index, bool):
            raise ValueError(f"{owner}: operand_index must be 0 (A) or 1 (B), got "
                             f"{self.operand_index!r}")
        if not isinstance(self.parent, (NVMMADistributedLayout, BlockedLayout)):
            raise ValueError(f"{owner}: parent must be an NVMMADistributedLayout or "
                             f"BlockedLayout, got {self.parent!r}")
        # FMA operands (blocked parent) carry no packing: Triton uses k_width=0 there.
        check.power_of_two(owner, "k_width", self.k_width,
                           allow_zero=isinstance(self.parent, BlockedLayout))
        if isinstance(self.parent, NVMMADistributedLayout) and self.parent.is_hopper \
                and self.operand_index == 1:
            raise ValueError(f"{owner}: operand_index=1 with a version 3 (wgmma) parent is "
                             f"not a register layout: wgmma reads B from shared memory")

    def __repr__(self):
        return (f"DotOperandLayout(operand_index={self.operand_index}, "
                f"parent={self.parent!r}, k_width={self.k_width})")

    @property
    def rank(self) -> int:
        return self.parent.rank

    @property
    def cga_layout(self):
        k_dim = self.rank - 1 if self.operand_index == 0 else self.rank - 2
        return tuple(tuple(0 if i == k_dim else c for i, c in enumerate(basis))
                     for basis in getattr(self.parent, "cga_layout", ()))

    def _build(self, shape):
        if isinstance(self.parent, BlockedLayout):
            return self._build_fma(shape)
        rank = self.rank
        is_a = self.operand_index == 0
        tile = [1] * rank
        if is_a:
            tile[rank - 2], tile[rank - 1] = 16, self.k_width * 8
        else:
            tile[rank - 2], tile[rank - 1] = self.k_width * 8, 8
        order = dot_operand_order(self.operand_index, rank)
        cta = mma_tile(tile, self.k_width, order, rep_order=order)
        k_dim = rank - 1 if is_a else rank - 2
        warp_order = matrix_order(rank, row_major=not self.parent.is_hopper)
        cta = cta * broadcast_along(self.parent.warps_per_cta, warp_order, k_dim,
                                    WARP).transpose_outs(cta.out_dims)
        return combine_cta_cga_with_shape(cta, self.cga_layout, shape)

    def _build_fma(self, shape):
        """FMA dot operands: each thread holds the whole K extent of its rows/columns."""
        blocked = self.parent
        rank = self.rank
        k_dim = rank - 1 if self.operand_index == 0 else rank - 2
        per_thread = list(blocked.size_per_thread)
        per_thread[k_dim] = shape[k_dim]
        rep_names = [f"dim{d}" for d in blocked.order]
        cta = (identity_nd(REGISTER, per_thread, blocked.order).transpose_outs(rep_names)
               * broadcast_along(blocked.threads_per_warp, blocked.order, k_dim,
                                 LANE).transpose_outs(rep_names)
               * broadcast_along(blocked.warps_per_cta, blocked.order, k_dim,
                                 WARP).transpose_outs(rep_names))
        return combine_cta_cga_with_shape(cta, self.cga_layout, shape)
