"""Shared-memory and tensor-memory layout families, with Gluon 3.6's names and parameters.

Shared layouts map ``offset`` (element index in the allocation) and ``block`` (CTA of the
cluster) to tensor coordinates ``dim0..``; tensor-memory layouts map ``row`` (TMEM lane) and
``col`` to ``dim0, dim1``, where ``col`` counts element-wide columns (like Triton: a packed
16-bit layout has two ``col`` per 32-bit TMEM column, an unpacked one a zero basis first).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from shared_codegen.layouts import _validate as check
from shared_codegen.layouts._building import (OFFSET, combine_cta_cga_with_shape,
                                              ensure_not_larger_than,
                                              ensure_not_smaller_than, shape_per_cta,
                                              standard_out_dims)
from shared_codegen.layouts.linear_layout import LinearLayout

__all__ = [
    "SharedLayout",
    "NVMMASharedLayout",
    "SwizzledSharedLayout",
    "SharedLinearLayout",
    "TensorMemoryLayout",
    "TensorMemoryScalesLayout",
]


class SharedLayout:
    """Base of shared-memory layouts."""

    alias_prefix = "shared"

    def to_linear_layout(self, shape) -> LinearLayout:
        return _cached_shared(self, check.check_shape(type(self).__name__, shape))


@functools.lru_cache(maxsize=4096)
def _cached_shared(layout, shape):
    return layout._build(shape)


def _swizzled_tile(rows: int, cols: int, vec: int, per_phase: int, max_phase: int):
    """Offsets walk a row of ``cols`` elements, then rows; row ``r`` XORs its columns with
    ``vec * ((r // per_phase) % max_phase)`` so that a column of a row-major tile spreads
    over shared-memory banks."""
    bases = [(0, col) for col in _powers_below(cols)]
    bases += [(row, (vec * ((row // per_phase) % max_phase)) % cols)
              for row in _powers_below(rows)]
    return bases


def _powers_below(limit: int):
    value = 1
    while value < limit:
        yield value
        value *= 2


@dataclass(frozen=True, repr=False)
class SwizzledSharedLayout(SharedLayout):
    """Row-major tile over ``order[0]`` (columns) and ``order[1]`` (rows), columns XOR-ed in
    units of ``vec`` elements by the row's phase ``(row // per_phase) % max_phase``."""

    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...]
    cga_layout: tuple[tuple[int, ...], ...] = field(default_factory=tuple)

    alias_prefix = "shared"

    def __post_init__(self):
        owner = "SwizzledSharedLayout"
        for name in ("vec", "per_phase", "max_phase"):
            check.power_of_two(owner, name, getattr(self, name))
        order = check.int_tuple(owner, "order", self.order)
        if not order:
            raise ValueError(f"{owner}: order must have at least one entry")
        check.permutation(owner, "order", order, len(order))
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "cga_layout", check.cga_bases(owner, self.cga_layout,
                                                               len(order)))

    def __repr__(self):
        return check.constructor_repr(self, ["vec", "per_phase", "max_phase", "order",
                                             "cga_layout"], {"cga_layout": ()})

    @property
    def rank(self) -> int:
        return len(self.order)

    def _build(self, shape):
        if len(shape) != self.rank:
            raise ValueError(f"SwizzledSharedLayout: shape {list(shape)} has rank "
                             f"{len(shape)} but order {list(self.order)} has {self.rank}")
        names = standard_out_dims(len(shape))
        per_cta = shape_per_cta(shape, self.cga_layout)
        if len(shape) == 1:
            cta = LinearLayout.identity_1d(per_cta[0], OFFSET, "dim0")
            return combine_cta_cga_with_shape(cta, self.cga_layout, shape)
        col_dim, row_dim = self.order[0], self.order[1]
        tile = _swizzled_tile(per_cta[row_dim], per_cta[col_dim], self.vec, self.per_phase,
                              self.max_phase)
        cta = LinearLayout({OFFSET: tile}, [names[row_dim], names[col_dim]])
        for dim in self.order[2:]:
            cta = cta * LinearLayout.identity_1d(per_cta[dim], OFFSET, names[dim])
        return combine_cta_cga_with_shape(cta, self.cga_layout, shape)


@dataclass(frozen=True, repr=False)
class NVMMASharedLayout(SharedLayout):
    """The shared layout TMA and wgmma/tcgen05 read: 8-row core matrices whose 16-byte
    chunks are XOR-swizzled within ``swizzle_byte_width`` bytes (0, 32, 64 or 128; PTX ISA
    "Shared memory matrix layout" / "Tensor-map swizzling modes")."""

    swizzle_byte_width: int
    element_bitwidth: int
    rank: int = 2
    transposed: bool = False
    fp4_padded: bool = False
    cga_layout: tuple[tuple[int, ...], ...] = field(default_factory=tuple)

    alias_prefix = "nvmma_shared"

    def __post_init__(self):
        owner = "NVMMASharedLayout"
        if self.swizzle_byte_width not in (0, 32, 64, 128):
            raise ValueError(f"{owner}: swizzle_byte_width must be 0, 32, 64 or 128, got "
                             f"{self.swizzle_byte_width!r}")
        if self.element_bitwidth not in (8, 16, 32, 64):
            raise ValueError(f"{owner}: element_bitwidth must be 8, 16, 32 or 64, got "
                             f"{self.element_bitwidth!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"{owner}: rank must be a positive int, got {self.rank!r}")
        if self.swizzle_byte_width and self.rank < 2:
            raise ValueError(f"{owner}: swizzle_byte_width {self.swizzle_byte_width} needs "
                             f"rank >= 2 (swizzling permutes rows), got rank {self.rank}")
        if self.fp4_padded and self.element_bitwidth != 8:
            raise ValueError(f"{owner}: fp4_padded needs element_bitwidth 8 (two fp4 values "
                             f"per byte), got {self.element_bitwidth}")
        object.__setattr__(self, "transposed", bool(self.transposed))
        object.__setattr__(self, "fp4_padded", bool(self.fp4_padded))
        object.__setattr__(self, "cga_layout", check.cga_bases(owner, self.cga_layout,
                                                               self.rank))

    def __repr__(self):
        return check.constructor_repr(
            self, ["swizzle_byte_width", "element_bitwidth", "rank", "transposed",
                   "fp4_padded", "cga_layout"],
            {"rank": 2, "transposed": False, "fp4_padded": False, "cga_layout": ()})

    @staticmethod
    def get_default_for(block_shape, dtype, transposed=False, fp4_padded=False,
                        cga_layout=None) -> "NVMMASharedLayout":
        """The layout with the widest swizzle a `block_shape` block of `dtype` allows (Gluon
        3.6's `get_default_for`): the fewest TMA / wgmma messages per block."""
        return default_nvmma_layout(block_shape, dtype, transposed, fp4_padded, cga_layout)

    # Swizzle parameters: 16-byte chunks; phase advances every 128 bytes of rows.
    @property
    def vec(self) -> int:
        return 128 // self.element_bitwidth

    @property
    def per_phase(self) -> int:
        return 128 // self.swizzle_byte_width if self.swizzle_byte_width else 1

    @property
    def max_phase(self) -> int:
        return self.swizzle_byte_width // 16 if self.swizzle_byte_width else 1

    def tma_block_shape(self, per_cta_shape, packed: bool = True) -> list[int]:
        """The box one TMA message moves: at most 256 per dim, the contiguous dim exactly
        one swizzle width."""
        block = list(per_cta_shape)
        contig = 0 if self.transposed else len(block) - 1
        if self.fp4_padded:
            block[contig] *= 2
        block = [min(size, 256) for size in block]
        if self.swizzle_byte_width:
            width = 8 * self.swizzle_byte_width // self.element_bitwidth
            if block[contig] < width:
                raise ValueError(f"NVMMASharedLayout: the contiguous dim holds {block[contig]}"
                                 f" elements, less than one {self.swizzle_byte_width}-byte "
                                 f"swizzle row ({width} elements)")
            block[contig] = width
        if self.fp4_padded and packed:
            block[contig] //= 2
        return block

    def _core_matrix(self) -> LinearLayout:
        tile_cols = 8 * max(16, self.swizzle_byte_width) // self.element_bitwidth
        bases = []
        for col in _powers_below(tile_cols):
            # fp4 padding: 8 real bytes then 8 pad bytes; pads alias the real elements.
            bases.append((0, col // 16 * 8 + col % 8 if self.fp4_padded else col))
        for row in _powers_below(8):
            column = self.vec * ((row // self.per_phase) % self.max_phase)
            if self.fp4_padded:
                column = column // 16 * 8 + column % 8
            bases.append((row, column))
        return LinearLayout({OFFSET: bases}, ["dim0", "dim1"])

    def _build(self, shape):
        rank = len(shape)
        if rank != self.rank:
            raise ValueError(f"NVMMASharedLayout: shape {list(shape)} has rank {rank} but "
                             f"the layout has rank {self.rank}")
        names = standard_out_dims(rank)
        per_cta = shape_per_cta(shape, self.cga_layout)
        tma = self.tma_block_shape(per_cta)
        if self.swizzle_byte_width == 0:
            layout = LinearLayout.identity_1d(tma[-1], OFFSET, names[-1])
            for dim in range(rank - 2, -1, -1):
                layout = layout * LinearLayout.identity_1d(tma[dim], OFFSET, names[dim])
            layout = ensure_not_smaller_than(layout, dict(zip(names, per_cta)))
            return combine_cta_cga_with_shape(layout, self.cga_layout, shape)
        collapsed = [1, tma[-1]]
        for size in tma[:-1]:
            collapsed[0] *= size
        if self.transposed:
            collapsed.reverse()
        tile = self._core_matrix()
        packing = 2 if self.fp4_padded else 1
        if collapsed[1] * packing < tile.out_dim_size("dim1") or \
                collapsed[0] < tile.out_dim_size("dim0"):
            raise ValueError(f"NVMMASharedLayout: shape {list(shape)} is smaller than one "
                             f"swizzle tile [{tile.out_dim_size('dim0')}, "
                             f"{tile.out_dim_size('dim1') // packing}]")
        layout = ensure_not_smaller_than(tile, {"dim0": collapsed[0], "dim1": collapsed[1]})
        unrolled = list(tma)
        if self.transposed:
            unrolled = unrolled[1:] + unrolled[:1]
        layout = _reshape_row_major(layout, unrolled)
        if self.transposed:
            layout = _permute_dims(layout, [rank - 1] + list(range(rank - 1)))
        layout = ensure_not_smaller_than(layout, dict(zip(names, per_cta)))
        return combine_cta_cga_with_shape(layout, self.cga_layout, shape)


def _plain(value):
    """A compile-time wrapper's value (kernels pass `gl.constexpr`s), or the value itself."""
    return getattr(value, "value", value)


def default_nvmma_layout(block_shape, dtype, transposed=False, fp4_padded=False,
                         cga_layout=None) -> NVMMASharedLayout:
    """`NVMMASharedLayout.get_default_for`: the swizzle is the widest of 128, 64, 32 bytes
    that divides the contiguous dim's bytes (0 when none does, or when fewer than 8 rows
    exist to swizzle over). `dtype` is anything with `primitive_bitwidth` (a gl dtype)."""
    shape = [int(_plain(s)) for s in _plain(block_shape)]
    dtype, transposed, fp4_padded = _plain(dtype), bool(_plain(transposed)), \
        bool(_plain(fp4_padded))
    bits = getattr(dtype, "primitive_bitwidth", None)
    if not isinstance(bits, int):
        raise TypeError(f"NVMMASharedLayout.get_default_for: dtype must be a gl dtype "
                        f"(gl.float16, ...), got {dtype!r}")
    cga = tuple(tuple(v) for v in _plain(cga_layout) or ())
    per_cta = shape_per_cta(shape, cga) if cga else list(shape)
    if transposed:
        per_cta = per_cta[1:] + per_cta[:1]
    # fp4 values are packed two to a byte but padded to one byte each in shared memory.
    contig_bytes = per_cta[-1] * (2 if fp4_padded else 1) * bits // 8
    swizzle = next((w for w in (128, 64, 32) if contig_bytes >= w and contig_bytes % w == 0),
                   0)
    rows = 1
    for size in per_cta[:-1]:
        rows *= size
    if len(shape) < 2 or rows < 8:
        swizzle = 0
    return NVMMASharedLayout(swizzle, bits, len(shape), transposed, fp4_padded, cga)


def _reshape_row_major(layout: LinearLayout, shape) -> LinearLayout:
    """Reshape the out dims as a row-major array (last dim fastest), like numpy's reshape."""
    rank = len(shape)
    names = standard_out_dims(rank)
    reversed_old = list(reversed(layout.out_dims))
    reversed_new = [(names[d], shape[d]) for d in range(rank - 1, -1, -1)]
    return (layout.transpose_outs(reversed_old).reshape_outs(reversed_new)
            .transpose_outs(names))


def _permute_dims(layout: LinearLayout, order) -> LinearLayout:
    """New ``dim{i}`` is old ``dim{order[i]}``."""
    names = standard_out_dims(len(order))
    bases = {name: [tuple(v[i] for i in order) for v in vectors]
             for name, vectors in layout.bases.items()}
    sizes = [(names[i], layout.out_dim_size(f"dim{order[i]}")) for i in range(len(order))]
    return LinearLayout(bases, sizes, require_surjective=False)


@dataclass(frozen=True, repr=False)
class SharedLinearLayout(SharedLayout):
    """A shared layout given by its bases: ``offset_bases[i]`` is where offset ``2**i``
    lands; ``alignment`` is the allocation's byte alignment."""

    offset_bases: tuple[tuple[int, ...], ...]
    block_bases: tuple[tuple[int, ...], ...] = field(default_factory=tuple)
    alignment: int = 16

    alias_prefix = "shared_linear"

    def __post_init__(self):
        owner = "SharedLinearLayout"
        offsets = check.bases_tuple(owner, "offset_bases", self.offset_bases, None)
        if not offsets or not offsets[0]:
            raise ValueError(f"{owner}: offset_bases must not be empty")
        rank = len(offsets[0])
        offsets = check.bases_tuple(owner, "offset_bases", offsets, rank)
        blocks = check.bases_tuple(owner, "block_bases", self.block_bases, rank)
        check.power_of_two(owner, "alignment", self.alignment)
        object.__setattr__(self, "offset_bases", offsets)
        object.__setattr__(self, "block_bases", blocks)

    def __repr__(self):
        return check.constructor_repr(self, ["offset_bases", "block_bases", "alignment"],
                                      {"block_bases": (), "alignment": 16})

    @property
    def rank(self) -> int:
        return len(self.offset_bases[0])

    def _build(self, shape):
        names = standard_out_dims(self.rank)
        layout = LinearLayout({OFFSET: self.offset_bases, "block": self.block_bases}, names,
                              require_surjective=False)
        if [layout.out_dim_size(n) for n in names] != list(shape):
            raise ValueError(f"SharedLinearLayout: bases span shape "
                             f"{[layout.out_dim_size(n) for n in names]}, not {list(shape)}")
        return layout


@dataclass(frozen=True, repr=False)
class TensorMemoryLayout:
    """Blackwell tensor memory: a ``block=(M, N)`` tile per CTA with M = 64 or 128 TMEM
    lanes; ``col_stride`` 32-bit columns between logically adjacent columns (1 packed,
    ``32 // bitwidth`` unpacked). PTX ISA "Tensor Memory" and "tcgen05 data path layouts"."""

    block: tuple[int, int]
    col_stride: int
    cta_split_num: tuple[int, int] | None = None
    two_ctas: bool = False

    alias_prefix = "tmem"

    def __post_init__(self):
        owner = "TensorMemoryLayout"
        block = check.int_tuple(owner, "block", self.block)
        if len(block) != 2:
            raise ValueError(f"{owner}: block must be (M, N), got {list(block)}")
        if block[0] not in (64, 128):
            raise ValueError(f"{owner}: block M must be 64 or 128 (TMEM lanes per CTA), got "
                             f"{block[0]}")
        check.power_of_two(owner, "block N", block[1])
        check.power_of_two(owner, "col_stride", self.col_stride)
        split = self.cta_split_num
        if split is not None:
            split = check.int_tuple(owner, "cta_split_num", split)
            if len(split) != 2:
                raise ValueError(f"{owner}: cta_split_num must have 2 entries, got "
                                 f"{list(split)}")
            check.powers_of_two(owner, "cta_split_num", split)
        object.__setattr__(self, "block", block)
        object.__setattr__(self, "cta_split_num", split)
        object.__setattr__(self, "two_ctas", bool(self.two_ctas))

    def __repr__(self):
        text = f"TensorMemoryLayout(block={check.format_value(self.block)}, " \
               f"col_stride={self.col_stride}"
        if self.cta_split_num is not None:
            text += f", cta_split_num={check.format_value(self.cta_split_num)}"
        if self.two_ctas:
            text += ", two_ctas=True"
        return text + ")"

    @property
    def rank(self) -> int:
        return 2

    def to_linear_layout(self, shape) -> LinearLayout:
        shape = check.check_shape("TensorMemoryLayout", shape, 2)
        split = self.cta_split_num or (1, 1)
        return _tmem_linear_layout(shape, self.block[0], self.block[1], self.col_stride,
                                   split[0], split[1], self.two_ctas)


@functools.lru_cache(maxsize=1024)
def _tmem_linear_layout(shape, block_m, block_n, col_stride, split_m, split_n, two_ctas):
    """``row`` = TMEM lane, ``col`` = TMEM column. CTA splits tile the columns last."""
    if split_n > 1:
        inner = _tmem_linear_layout((shape[0], shape[1] // split_n), block_m, block_n,
                                    col_stride, split_m, 1, two_ctas)
        return inner * LinearLayout.identity_1d(split_n, "col", "dim1")
    if split_m > 1:
        m64_two_cta = block_m == 64 and two_ctas
        if m64_two_cta:  # laid out as the transpose of a 128 x N tile (data path layout B)
            block_m, split_m = block_m * 2, split_m // 2
        inner = _tmem_linear_layout((shape[0] // split_m, shape[1]), block_m, block_n,
                                    col_stride, 1, 1, two_ctas)
        result = inner * LinearLayout.identity_1d(split_m, "col", "dim0")
        if m64_two_cta:
            bases = result.bases
            bases["row"][-1], bases["col"][-1] = bases["col"][-1], bases["row"][-1]
            result = LinearLayout(bases, [(n, result.out_dim_size(n)) for n in
                                          result.out_dims], require_surjective=False)
        return result
    block_n = min(block_n, shape[1])
    tile = LinearLayout.zeros_1d(col_stride, "col", "dim1")
    if block_m == 64:
        tile = tile * LinearLayout.identity_1d(16, "row", "dim0") \
            * LinearLayout.identity_1d(block_n, "col", "dim1")
        # The product lists dim1 first; name the order so the bases appended below, written
        # as (dim0, dim1), land on the dims they mean.
        bases = tile.transpose_outs(["dim0", "dim1"]).bases
        # Rows 16..63 of a 64-lane block: lanes 16-31 of each 32-lane quadrant hold the
        # next rows or the next column block, or nothing (a zero basis: undefined).
        if shape[0] > block_m:
            bases["row"].append((64, 0))
        elif shape[1] > block_n:
            bases["row"].append((0, block_n))
        else:
            bases["row"].append((0, 0))
        bases["row"] += [(16, 0), (32, 0)]
        tile = LinearLayout(bases, ["dim0", "dim1"], require_surjective=False)
    else:
        tile = tile * LinearLayout.identity_1d(block_m, "row", "dim0") \
            * LinearLayout.identity_1d(block_n, "col", "dim1")
    reps_m = max(1, shape[0] // tile.out_dim_size("dim0"))
    reps_n = max(1, shape[1] // tile.out_dim_size("dim1"))
    return tile * LinearLayout.identity_1d(reps_m, "col", "dim0") \
        * LinearLayout.identity_1d(reps_n, "col", "dim1")


@dataclass(frozen=True, repr=False)
class TensorMemoryScalesLayout:
    """Tensor memory holding MX scale factors (tcgen05.mma block scaling)."""

    cta_split_num: tuple[int, int] | None = None

    alias_prefix = "tmem_scales"

    def __post_init__(self):
        if self.cta_split_num is not None:
            split = check.int_tuple("TensorMemoryScalesLayout", "cta_split_num",
                                    self.cta_split_num)
            if len(split) != 2:
                raise ValueError("TensorMemoryScalesLayout: cta_split_num must have 2 "
                                 f"entries, got {list(split)}")
            object.__setattr__(self, "cta_split_num", split)

    def __repr__(self):
        if self.cta_split_num is None:
            return "TensorMemoryScalesLayout()"
        return f"TensorMemoryScalesLayout(cta_split_num={list(self.cta_split_num)})"

    @property
    def rank(self) -> int:
        return 2

    # Every element is held once per 32-lane quadrant: `tcgen05.cp ... 32x128b.warpx4` writes
    # the same 32 lanes to all four, and each warp of a warpgroup stores its quadrant's copy.
    LANE_COPIES = (0, 32, 64, 96)

    def to_linear_layout(self, shape) -> LinearLayout:
        shape = check.check_shape("TensorMemoryScalesLayout", shape, 2)
        split = self.cta_split_num or (1, 1)
        return _tmem_scales_linear_layout(tuple(shape), split[0], split[1])


@functools.lru_cache(maxsize=256)
def _tmem_scales_linear_layout(shape, split_m, split_n):
    """(row, col) -> (dim0, dim1) of MX scale factors in tensor memory, ``col`` counting bytes
    (one 8-bit scale each), as Triton 3.6 (``tensorMemoryScalesToLinearLayout``) places them
    after the PTX ISA's scale-factor figures ("tcgen05 Matrix A/B scale factor layout", 1X):
    row r of a [M, K/VEC] scale matrix sits on lane r % 32 of every quadrant (lane bits 5-6
    are zero bases), 32-row group r // 32 in the next 32-bit column, and four consecutive K
    scales in the four bytes of that column; further 4-scale K groups follow after all the
    row groups. CTA splits tile the columns last, N before M."""
    if split_n > 1:
        inner = _tmem_scales_linear_layout((shape[0], shape[1] // split_n), split_m, 1)
        return inner * LinearLayout.identity_1d(split_n, "col", "dim1")
    if split_m > 1:
        inner = _tmem_scales_linear_layout((shape[0] // split_m, shape[1]), 1, 1)
        return inner * LinearLayout.identity_1d(split_m, "col", "dim0")
    tile = LinearLayout.identity_1d(32, "row", "dim0") \
        * LinearLayout.zeros_1d(4, "row", "dim0") \
        * LinearLayout.identity_1d(4, "col", "dim1") \
        * LinearLayout.identity_1d(2, "col", "dim0")
    reps_m = -(-shape[0] // tile.out_dim_size("dim0"))
    reps_n = -(-shape[1] // tile.out_dim_size("dim1"))
    tile = tile * LinearLayout.identity_1d(reps_m, "col", "dim0") \
        * LinearLayout.identity_1d(reps_n, "col", "dim1")
    # Shapes under 64 x 4 zero the bases past them (those bytes alias smaller ones).
    return ensure_not_larger_than(tile, {"dim0": shape[0], "dim1": shape[1]})
