"""Register layouts for moving a tensor between tensor memory and registers (Blackwell).

``tcgen05.ld`` / ``tcgen05.st`` (PTX ISA "Tensor Memory" and "tcgen05 data movement
shapes") move a fixed *atom* per warp: ``32x32b`` (lane i <-> TMEM lane i, one 32-bit column
per register), ``16x64b``, ``16x128b`` and ``16x256b`` (16 TMEM lanes, 64/128/256 bits of
columns, the lanes of a warp interleaved over rows and columns). Warp ``w`` of a warpgroup
may only reach TMEM lanes ``32*(w%4) .. 32*(w%4)+31``, which is why warps 1 and 2 always land
on rows 32 and 64.

``get_tmem_reg_layout`` answers Gluon 3.6's question: given the tensor-memory layout of a
buffer and an atom, which register layout lets each thread load its elements with that atom
and no data movement? The answer is ``tmem_layout o tile``: ``tile`` maps (register, lane,
warp) to TMEM (row, col), extended with registers and warps until it covers the buffer, and
the TMEM layout maps (row, col) to tensor coordinates. The construction follows Triton 3.6
(``getDistributedLayoutForTmemLdSt``) basis for basis, since the bases are what users print
and compare; ``tests/data/layouts/tmem_reg_golden.json`` holds Triton's own answers.

Example (fp32, a 128x64 buffer, block (128, 64), 4 warps, ``32x32b``): lane ``i`` holds row
``i``, warp ``w`` rows ``32*w ..``, and the 64 registers walk the columns::

    register: [0,1] [0,2] [0,4] [0,8] [0,16] [0,32]
    lane:     [1,0] [2,0] [4,0] [8,0] [16,0]
    warp:     [32,0] [64,0]
"""

from __future__ import annotations

import functools

from shared_codegen.layouts._building import BLOCK, LANE, REGISTER, WARP, log2
from shared_codegen.layouts.distributed import DistributedLinearLayout
from shared_codegen.layouts.linear_layout import LinearLayout
from shared_codegen.layouts.shared import TensorMemoryLayout, TensorMemoryScalesLayout

__all__ = ["get_tmem_reg_layout", "TMEM_INSTR_VARIANTS"]

ROW, COL = "row", "col"
TMEM_INSTR_VARIANTS = ("32x32b", "16x64b", "16x128b", "16x256b", "32x32b_splitn")
_OWNER = "get_tmem_reg_layout"


def get_tmem_reg_layout(element_ty, shape, layout: TensorMemoryLayout, num_warps: int,
                        instr_variant: str = "32x32b", cga_layout=()) -> DistributedLinearLayout:
    """The register layout ``tcgen05.ld/st`` with ``instr_variant`` reads/writes a
    ``shape`` tensor of ``element_ty`` held in tensor memory with ``layout``, for
    ``num_warps`` warps (a multiple of a warpgroup).

    ``32x32b_splitn`` is ``32x32b`` with the column half ``N/2`` moved to the last register
    basis, so that ``split`` of the loaded tensor along N is free.

    Raises ``ValueError`` for parameters Triton 3.6 rejects, and when no layout exists for
    this atom (e.g. ``16x256b`` needs at least 8 32-bit columns).
    """
    bitwidth = _element_bitwidth(element_ty)
    shape = _check_shape(shape)
    if isinstance(layout, TensorMemoryScalesLayout):
        return _scales_reg_layout(bitwidth, shape, layout, num_warps, instr_variant,
                                  cga_layout)
    if not isinstance(layout, TensorMemoryLayout):
        raise ValueError(f"{_OWNER}: layout must be a TensorMemoryLayout or "
                         f"TensorMemoryScalesLayout, got {layout!r}")
    if isinstance(num_warps, bool) or not isinstance(num_warps, int) or num_warps < 4 or \
            num_warps & (num_warps - 1):
        raise ValueError(f"{_OWNER}: num_warps must be a power of two >= 4 (whole "
                         f"warpgroups), got {num_warps!r}")
    if instr_variant == "16x32bx2":
        raise ValueError(f"{_OWNER}: instr_variant '16x32bx2' cannot be requested; it is "
                         f"chosen implicitly for 32x32b when TMEM lanes 16-31 hold nothing")
    if instr_variant not in TMEM_INSTR_VARIANTS:
        raise ValueError(f"{_OWNER}: instr_variant must be one of "
                         f"{', '.join(TMEM_INSTR_VARIANTS)}, got {instr_variant!r}")
    cga = _check_cga_layout(cga_layout)
    if bitwidth * layout.col_stride > 32:
        raise ValueError(f"{_OWNER}: element bitwidth * layout.col_stride must be <= 32 (one "
                         f"TMEM column), got {bitwidth} * {layout.col_stride}")
    split = layout.cta_split_num or (1, 1)
    least = [layout.block[0] * split[0], layout.block[1] * split[1]]
    if shape[0] < least[0] or shape[1] < least[1]:
        raise ValueError(f"{_OWNER}: shape {list(shape)} must be at least block * "
                         f"cta_split_num = {least}")
    result = _tmem_reg_layout(bitwidth, shape, layout, num_warps, instr_variant)
    if cga:  # every CTA holds the whole tensor: the block bases broadcast
        result = result * LinearLayout.zeros_1d(1 << len(cga), BLOCK, "dim0")
    return DistributedLinearLayout.from_linear_layout(result)


def _scales_reg_layout(bitwidth, shape, layout, num_warps, instr_variant, cga_layout):
    """MX scale factors (``TensorMemoryScalesLayout``) move with ``tcgen05.st/ld.32x32b``:
    Triton 3.6's ``getScaleTMEMStoreLinearLayout``. A thread packs the four K scales of one
    TMEM column in a register word (replicated when K < 4), lane i holds row i, the 32-row
    groups and further K groups follow in registers, and the four warps of a warpgroup hold
    the same data, each storing its own quadrant's copy; with 8 warps the second warpgroup
    takes the last register basis."""
    if bitwidth != 8:
        raise ValueError(f"{_OWNER}: TensorMemoryScalesLayout holds 8-bit scale factors, got a "
                         f"{bitwidth}-bit element_ty")
    if num_warps not in (4, 8):
        raise ValueError(f"{_OWNER}: scale factors in tensor memory move with 4 or 8 warps, "
                         f"got num_warps={num_warps!r}")
    if instr_variant != "32x32b":
        raise ValueError(f"{_OWNER}: scale factors in tensor memory move with the '32x32b' "
                         f"instr_variant only, got {instr_variant!r}")
    if _check_cga_layout(cga_layout) or layout.cta_split_num not in (None, (1, 1)):
        raise ValueError(f"{_OWNER}: multi-CTA scale layouts are not supported")
    m, n = shape
    registers = [(0, i) if i < n else (0, 0) for i in (1, 2)]
    registers += [(i, 0) for i in (32, 64, 128, 256) if i < m]
    registers += [(0, 1 << j) for j in range(2, log2(n))]
    warps = [(0, 0), (0, 0)]
    if num_warps == 8:
        warps.append(registers.pop())
    lanes = [(1 << i, 0) for i in range(5)]
    result = LinearLayout({REGISTER: registers, LANE: lanes, WARP: warps},
                          ["dim0", "dim1"], require_surjective=False)
    if m < 32:  # Triton trims lanes past M to copies
        from shared_codegen.layouts._building import ensure_not_larger_than
        result = ensure_not_larger_than(result, {"dim0": m, "dim1": n})
    return DistributedLinearLayout.from_linear_layout(result)


def _element_bitwidth(element_ty) -> int:
    bits = getattr(element_ty, "primitive_bitwidth", element_ty)
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in (8, 16, 32):
        raise ValueError(f"{_OWNER}: element_ty must be an 8-, 16- or 32-bit dtype (or its "
                         f"bit width), got {element_ty!r}")
    return bits


def _check_shape(shape) -> tuple[int, int]:
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(f"{_OWNER}: shape must be [M, N], got {shape!r}") from None
    if len(shape) != 2 or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 or
                              s & (s - 1) for s in shape):
        raise ValueError(f"{_OWNER}: shape must be [M, N] with powers of two, got "
                         f"{list(shape)}")
    return shape


def _check_cga_layout(cga_layout) -> tuple[tuple[int, ...], ...]:
    bases = tuple(tuple(basis) for basis in (cga_layout or ()))
    for basis in bases:
        if len(basis) != 2:
            raise ValueError(f"{_OWNER}: every cga_layout basis must have 2 entries (the "
                             f"rank), got {list(basis)}")
        if any(basis):
            # Triton 3.6 aborts on these (its CGA layout is not surjective), so there is no
            # reference to follow; a CTA-split tensor is described by cta_split_num instead.
            raise ValueError(f"{_OWNER}: cga_layout bases must be [0, 0] (every CTA holds "
                             f"the whole tensor), got {list(basis)}")
    return bases


@functools.lru_cache(maxsize=1024)
def _tmem_reg_layout(bitwidth, shape, layout, num_warps, variant) -> LinearLayout:
    memory = layout.to_linear_layout(list(shape))
    atom = "32x32b" if variant == "32x32b_splitn" else variant
    result = _distributed_for(memory, atom, num_warps, bitwidth)
    if result is None:
        raise ValueError(f"{_OWNER}: TMEM instr_variant '{atom}' has no register layout for "
                         f"shape {list(shape)}, {layout!r}, num_warps {num_warps}")
    if variant == "32x32b_splitn":
        result = _move_half_n_to_last_register(result, shape[1], bitwidth)
    return result


def _atom_tile(atom: str) -> LinearLayout:
    """(register, lane) -> (row, col) of one warp's message, for 32-bit columns."""
    if atom == "32x32b":
        bases = {REGISTER: [], LANE: [(1 << i, 0) for i in range(5)]}
        rows, cols = 32, 1
    elif atom == "16x64b":  # lane bit 0 picks row 8, bit 1 the column, bits 2-4 rows 1-4
        bases = {REGISTER: [], LANE: [(8, 0), (0, 1), (1, 0), (2, 0), (4, 0)]}
        rows, cols = 16, 2
    elif atom == "16x128b":
        bases = {REGISTER: [(8, 0)], LANE: [(0, 1), (0, 2), (1, 0), (2, 0), (4, 0)]}
        rows, cols = 16, 4
    else:  # 16x256b
        bases = {REGISTER: [(0, 1), (8, 0)],
                 LANE: [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]}
        rows, cols = 16, 8
    return LinearLayout(bases, [(ROW, rows), (COL, cols)], require_surjective=False)


def _divide_left(whole: LinearLayout, part: LinearLayout) -> LinearLayout | None:
    """The ``rest`` with ``part * rest == whole``, or None: ``part`` must be the low bases
    of each of its in dims, and ``rest``'s bases are the remaining ones, shifted down past
    ``part``'s out dims (whose low bits they must not touch)."""
    names = whole.out_dims
    if any(not whole.has_out_dim(d) or whole.out_dim_size(d) % part.out_dim_size(d)
           for d in part.out_dims):
        return None
    shifts = [part.out_dim_size_log2(d) if part.has_out_dim(d) else 0 for d in names]
    rest_bases = {}
    for in_dim, vectors in whole.bases.items():
        taken = part.in_dim_size_log2(in_dim) if part.has_in_dim(in_dim) else 0
        if taken > len(vectors):
            return None
        for index in range(taken):
            expected = part.apply({in_dim: 1 << index})
            if tuple(expected.get(d, 0) for d in names) != vectors[index]:
                return None
        rest = []
        for vector in vectors[taken:]:
            if any(c & ((1 << s) - 1) for c, s in zip(vector, shifts)):
                return None
            rest.append(tuple(c >> s for c, s in zip(vector, shifts)))
        rest_bases[in_dim] = rest
    for in_dim in part.in_dims:
        if not whole.has_in_dim(in_dim) and part.in_dim_size(in_dim) > 1:
            return None
    sizes = [(d, whole.out_dim_size(d) >> s) for d, s in zip(names, shifts)]
    return LinearLayout(rest_bases, sizes, require_surjective=False)


def _fits(inner: LinearLayout, outer: LinearLayout) -> bool:
    return all(inner.out_dim_size(d) <= outer.in_dim_size(d) for d in inner.out_dims)


def _distributed_for(memory: LinearLayout, atom: str, num_warps: int,
                     bitwidth: int) -> LinearLayout | None:
    """``memory``: TMEM (row, col) -> tensor, ``col`` counting ``bitwidth``-bit halves or
    quarters of a 32-bit column. Returns (register, lane, warp) -> tensor or None."""
    if bitwidth != 32:
        return _distributed_for_narrow(memory, atom, num_warps, bitwidth)
    tile = _atom_tile(atom)
    cols_missing = memory.in_dim_size(COL) // tile.out_dim_size(COL)
    if cols_missing == 0:
        return None
    whole_warp_rows = atom == "32x32b"
    # TMEM lanes 16-31 of each warp's quadrant unused (M=64 blocks): row bit 4 is zero.
    rows_16 = memory.in_dim_size(ROW) > 16 and \
        memory.bases[ROW][4] == (0,) * len(memory.out_dims)
    if not _fits(tile, memory):
        return None
    # The lowering inverts the memory layout on the loaded values; only if no two
    # (register, lane) of one message alias does it recover the atom.
    probe = tile
    if whole_warp_rows:  # lane 16 is served by the 16x32bx2 form, so it may alias
        bases = tile.bases
        bases[LANE] = bases[LANE][:4]
        probe = LinearLayout(bases, [(ROW, 16), (COL, 1)], require_surjective=False)
    if not probe.compose(memory).is_injective():
        return None
    # A 16-row atom on 32-row data leaves row 16 to a warp (a second warpgroup) if there
    # is one, else to a register.
    row16 = None
    if not whole_warp_rows and not rows_16:
        row16 = WARP if num_warps > 4 else REGISTER
    warps_to_tile = num_warps // (8 if row16 == WARP else 4)
    warp_broadcast = warps_to_tile // min(cols_missing, warps_to_tile)
    warps_to_tile //= warp_broadcast
    cols_missing //= warps_to_tile
    bases = tile.bases
    cols = tile.out_dim_size(COL)
    if cols_missing > 1:
        if whole_warp_rows and rows_16:
            # Lanes 16-31 would read the empty rows: give them the next column instead.
            bases[REGISTER] += [(0, cols << i) for i in range(log2(cols_missing // 2))]
            bases[LANE] = bases[LANE][:4] + [(0, cols * cols_missing // 2)]
        else:
            bases[REGISTER] += [(0, cols << i) for i in range(log2(cols_missing))]
        cols *= cols_missing
    bases[WARP] = [(32, 0), (64, 0)]
    if row16 is not None:
        bases[row16].append((16, 0))
    bases[WARP] += [(0, cols << i) for i in range(log2(warps_to_tile))]
    bases[WARP] += [(0, 0)] * log2(warp_broadcast)
    cols *= warps_to_tile
    full = LinearLayout(bases, [(ROW, 128), (COL, cols)], require_surjective=False)
    if not _fits(full, memory):
        return None
    result = full.compose(memory)
    for vectors in result.bases.values():
        if any(sum(1 for c in vector if c) > 1 for vector in vectors):
            return None
    distinct = [v for vectors in result.bases.values() for v in vectors if any(v)]
    if LinearLayout({REGISTER: distinct}, [(d, result.out_dim_size(d))
                                           for d in result.out_dims],
                    require_surjective=False).matrix_rank != len(distinct) or \
            len(distinct) != result.num_out_bits:
        return None
    return result


def _distributed_for_narrow(memory, atom, num_warps, bitwidth):
    """8/16-bit elements: pack neighbours into one 32-bit column (registers hold the
    packed neighbours), or drop the unused halves of unpacked columns."""
    best, quotient = 1, memory
    contig = 2
    while bitwidth * contig <= 32:
        candidate = _divide_left(memory, LinearLayout.identity_1d(contig, COL, "dim1"))
        if candidate is None:
            break
        best, quotient = contig, candidate
        contig *= 2
    if best > 1:
        inner = _distributed_for(quotient, atom, num_warps, bitwidth * best)
        if inner is None:
            return None
        return LinearLayout.identity_1d(best, REGISTER, "dim1") * inner
    pad = LinearLayout.zeros_1d(32 // bitwidth, COL, "dim1")
    unpacked = _divide_left(memory, pad * LinearLayout.identity_1d(2, COL, "dim1"))
    if bitwidth == 16 and unpacked is not None:
        inner = _distributed_for(unpacked, atom, num_warps, 32)
        if inner is None:
            return None
        return LinearLayout.identity_1d(2, REGISTER, "dim1") * inner
    padded = _divide_left(memory, pad)
    if padded is not None:
        return _distributed_for(padded, atom, num_warps, 32)
    if memory.in_dim_size(COL) == 1:
        return _distributed_for(memory, atom, num_warps, 32)
    return None


def _move_half_n_to_last_register(layout: LinearLayout, n: int, bitwidth: int):
    """``32x32b_splitn``: make the last register basis ``[0, N/2]`` (swapping it with the
    lane or warp basis that holds it) so the two halves of N sit in separate registers."""
    half = tuple(n // 2 if d == "dim1" else 0 for d in layout.out_dims)
    bases = layout.bases
    registers = bases.get(REGISTER, [])
    if not registers:
        if not bases[LANE] or bases[LANE][-1] != half:
            raise ValueError(f"{_OWNER}: 32x32b_splitn with one register needs the last lane "
                             f"basis to be [0, N/2]; this layout has none")
        bases[REGISTER] = [half]
        bases[LANE][-1] = (0,) * len(half)
    elif registers[-1] != half:
        if 2 ** len(registers) <= 32 // bitwidth:
            raise ValueError(f"{_OWNER}: 32x32b_splitn needs more than {32 // bitwidth} "
                             f"{bitwidth}-bit registers per thread (it issues 32x32b.x1 "
                             f"twice); load with '32x32b' and convert_layout instead")
        for dim in (LANE, WARP):
            if half in bases.get(dim, []):
                index = bases[dim].index(half)
                registers[-1], bases[dim][index] = bases[dim][index], registers[-1]
                break
        else:
            raise ValueError(f"{_OWNER}: 32x32b_splitn needs a lane or warp basis [0, N/2] "
                             f"to move into registers; this layout has none")
    return LinearLayout(bases, [(d, layout.out_dim_size(d)) for d in layout.out_dims],
                        require_surjective=False)
