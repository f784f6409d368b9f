"""Building blocks shared by the layout families: standard dim names, N-D identities, fitting a
layout to a tensor shape, and tiling it across the CTAs of a cluster.

These mirror the helpers of Triton's ``LinearLayoutConversions.cpp`` / ``LayoutUtils.cpp``
because the bases they produce (and their order) are part of the compatibility promise: a
printed layout must match what Triton prints for the same layout and shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared_codegen.layouts.linear_layout import LinearLayout

REGISTER, LANE, WARP, BLOCK, OFFSET = "register", "lane", "warp", "block", "offset"


def is_power_of_two(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        and value & (value - 1) == 0


def log2(value: int) -> int:
    return value.bit_length() - 1


def standard_out_dims(rank: int) -> list[str]:
    return [f"dim{i}" for i in range(rank)]


def identity_nd(in_dim: str, sizes: Sequence[int], order: Sequence[int]) -> LinearLayout:
    """``in_dim`` walks the dims in ``order`` (most minor first), ``sizes[d]`` steps each.

    The out dims come out in ``order`` order, not ``dim0..``; callers transpose at the end.
    """
    names = standard_out_dims(len(sizes))
    layout = LinearLayout.empty()
    for dim in order:
        layout = layout * LinearLayout.identity_1d(sizes[dim], in_dim, names[dim])
    return layout


def matrix_order(rank: int, row_major: bool) -> list[int]:
    """Dims from most minor to most major for a batch of matrices ``[..., m, n]``."""
    order = list(range(rank - 1, -1, -1))
    if not row_major:
        order[0], order[1] = order[1], order[0]
    return order


def ensure_not_smaller_than(layout: LinearLayout, shape: dict[str, int]) -> LinearLayout:
    """Repeat the layout along its first input dim (register or offset) until every out dim
    covers ``shape``."""
    first_in = layout.in_dims[0]
    for out_dim in layout.out_dims:
        actual = layout.out_dim_size(out_dim)
        desired = shape[out_dim]
        if desired > actual:
            layout = layout * LinearLayout.identity_1d(desired // actual, first_in, out_dim)
    return layout


def ensure_not_larger_than(layout: LinearLayout, shape: dict[str, int],
                           remove_registers: bool = False) -> LinearLayout:
    """Shrink out dims larger than ``shape`` by zeroing their highest bases, so those
    registers, lanes, warps or blocks hold broadcast copies (Triton keeps duplicate
    registers in layouts; ``remove_registers`` drops them instead)."""
    bases = {name: [list(v) for v in vectors] for name, vectors in layout.bases.items()}
    removed_registers: set[int] = set()
    for out_index, out_dim in enumerate(layout.out_dims):
        actual = layout.out_dim_size(out_dim)
        desired = shape[out_dim]
        if actual <= desired:
            continue
        contributors = []
        for in_dim, vectors in bases.items():
            for basis_index, vector in enumerate(vectors):
                if vector[out_index] != 0:
                    contributors.append((in_dim, basis_index, vector[out_index]))
        contributors.sort(key=lambda item: -item[2])  # stable: ties keep in-dim order
        for in_dim, basis_index, _ in contributors:
            if actual <= desired:
                break
            if in_dim == REGISTER and remove_registers:
                removed_registers.add(basis_index)
            else:
                bases[in_dim][basis_index][out_index] = 0
            actual //= 2
    if REGISTER in bases:
        bases[REGISTER] = [v for i, v in enumerate(bases[REGISTER]) if i not in removed_registers]
    sizes = []
    for out_index, out_dim in enumerate(layout.out_dims):
        largest = max((v[out_index] for vs in bases.values() for v in vs), default=0)
        sizes.append((out_dim, 1 << largest.bit_length()))
    return LinearLayout(bases, sizes, require_surjective=False)


def cga_linear_layout(cga_layout: Sequence[Sequence[int]], rank: int) -> LinearLayout:
    """The ``block`` -> tile map of a cluster; bases count whole CTA tiles per dim."""
    names = standard_out_dims(rank)
    sizes = []
    for dim in range(rank):
        largest = max((basis[dim] for basis in cga_layout), default=0)
        sizes.append((names[dim], 1 << int(largest).bit_length()))
    return LinearLayout({BLOCK: [tuple(b) for b in cga_layout]}, sizes,
                        require_surjective=False)


def cga_split(cga_layout: Sequence[Sequence[int]], rank: int) -> list[int]:
    """How many CTA tiles the cluster spans along each dim."""
    layout = cga_linear_layout(cga_layout, rank)
    return [layout.out_dim_size(name) for name in standard_out_dims(rank)]


def shape_per_cta(shape: Sequence[int], cga_layout) -> list[int]:
    return [max(1, size // split) for size, split in zip(shape, cga_split(cga_layout,
                                                                          len(shape)))]


def combine_cta_cga_with_shape(cta_layout: LinearLayout, cga_layout,
                               shape: Sequence[int]) -> LinearLayout:
    """Fit one CTA's layout to its share of ``shape`` and tile it over the cluster.

    The CTA layout is repeated along its first input dim (more registers / offsets) when the
    tensor is larger than one tile, and shrunk with broadcasting when it is smaller.
    """
    rank = len(shape)
    names = standard_out_dims(rank)
    labeled = dict(zip(names, (int(s) for s in shape)))
    cga = ensure_not_larger_than(cga_linear_layout(cga_layout, rank), labeled)
    cga = cga.transpose_outs(cta_layout.out_dims)
    cta_shape = {name: max(1, labeled[name] // cga.out_dim_size(name))
                 for name in cta_layout.out_dims}
    cta = ensure_not_smaller_than(cta_layout, cta_shape)
    cta = ensure_not_larger_than(cta, cta_shape)
    return (cta * cga).transpose_outs(names)
