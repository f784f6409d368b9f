"""Shared-memory banks: Gluon's ``bank_conflicts``, swizzle choice and wavefront counting.

Everything here works on *flattened* layouts: each hardware bit (``register``, ``lane``,
``warp`` bases; ``offset`` for shared memory) is one int, the flattened tensor index of its
basis vector, ``dim0`` in the low bits (Triton's ``flattenOuts``). Sets of such ints are
subspaces of GF(2)^n, and the questions asked of shared memory are questions about them:

- A warp-wide access is split into *phases* of 128 bytes (32 lanes of 4 bytes, 16 lanes of
  8 bytes or 8 lanes of 16 bytes). Inside one phase every bank (``word % 32``) serves one
  distinct 32-bit word per wavefront, so a phase costs the largest number of distinct words
  that land in one bank. ``count_wavefronts`` measures this on concrete addresses.
- Triton 3.6 predicts the same thing linearly: after the vector and bank bits (the first
  1024 bits of shared memory) come the *segment* bits; a lane basis that falls in the segment
  span moves to another row of the same bank, so ``2**dim(segment & lanes) - 1`` extra
  wavefronts. ``bank_conflicts`` returns that number, as ``gl.bank_conflicts`` does.
- ``optimal_swizzling`` chooses the shared layout for a register-to-register conversion the
  way Triton's ``GenericSwizzling.cpp`` does (vector bases first, segment bases chosen so that
  as few source/destination lane bases as possible fall into them, the rest are banks).

GF(2) work is done on Python ints (one bit per coordinate bit): the matrices are at most
about 20x20 and this keeps planning in microseconds, where sympy would take milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shared_codegen.layouts.gf2 import int_echelon, int_rank

__all__ = [
    "FlatLayout",
    "SharedSwizzle",
    "bank_conflicts",
    "count_wavefronts",
    "dtype_bits",
    "flatten_layout",
    "optimal_swizzling",
    "span_intersection",
]

BANK_BITS = 32 * 32  # one wavefront: 32 banks of 32 bits

_DTYPE_BITS = {
    "i1": 8, "int1": 8, "bool": 8,
    "i8": 8, "int8": 8, "u8": 8, "uint8": 8,
    "fp8": 8, "fp8e4nv": 8, "fp8e5": 8, "fp8e4b15": 8, "float8_e4m3fn": 8, "float8_e5m2": 8,
    "e4m3": 8, "e5m2": 8,
    "i16": 16, "int16": 16, "u16": 16, "uint16": 16,
    "fp16": 16, "f16": 16, "float16": 16, "half": 16, "bf16": 16, "bfloat16": 16,
    "i32": 32, "int32": 32, "u32": 32, "uint32": 32, "fp32": 32, "f32": 32, "float32": 32,
    "float": 32, "tf32": 32,
    "i64": 64, "int64": 64, "u64": 64, "uint64": 64, "fp64": 64, "f64": 64, "float64": 64,
}


def dtype_bits(dtype) -> int:
    """Element width in bits from an int, a name (``"fp16"``) or a dtype object."""
    if isinstance(dtype, bool):
        raise ValueError(f"not a dtype: {dtype!r}")
    if isinstance(dtype, (int, np.integer)):
        bits = int(dtype)
    elif isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("tl.").removeprefix("gl.")
        if key not in _DTYPE_BITS:
            raise ValueError(f"unknown dtype {dtype!r}; use a bit width or one of "
                             f"fp8, fp16, bf16, fp32, fp64, i8, i16, i32, i64")
        bits = _DTYPE_BITS[key]
    elif hasattr(dtype, "primitive_bitwidth"):
        bits = int(dtype.primitive_bitwidth)
    elif hasattr(dtype, "itemsize"):
        bits = 8 * int(dtype.itemsize)
    else:
        raise ValueError(f"cannot tell the width of dtype {dtype!r}")
    if bits not in (8, 16, 32, 64):
        raise ValueError(f"element width must be 8, 16, 32 or 64 bits, got {bits}")
    return bits


# -- GF(2) on ints ---------------------------------------------------------------------------

def rank(vectors) -> int:
    return int_rank(vectors)


def span_intersection(a, b) -> list[int]:
    """A basis of span(a) & span(b). Unit-vector inputs keep ``a``'s order (Triton's
    heuristic); otherwise Zassenhaus: reduce rows (a|a) and (b|0) and keep the right halves
    of rows whose left half vanished."""
    a = [x for x in a if x]
    b = [x for x in b if x]
    if all(x & (x - 1) == 0 for x in a + b):
        bset = set(b)
        seen = []
        for x in a:
            if x in bset and x not in seen:
                seen.append(x)
        return seen
    width = max([x.bit_length() for x in a + b] + [1])
    rows = [(x << width) | x for x in a] + [x << width for x in b]
    reduced = int_echelon(rows)
    mask = (1 << width) - 1
    return [v & mask for top, v in sorted(reduced.items()) if top < width and v & mask]


def complement_basis(basis, dim: int) -> list[int]:
    """Unit vectors completing ``basis`` to all of GF(2)^dim, lowest bits first. Pivots are
    taken at the lowest set bit so the complement avoids the low (contiguous) bits."""
    rows: dict[int, int] = {}
    for v in basis:
        while v:
            low = (v & -v).bit_length() - 1
            if low not in rows:
                rows[low] = v
                break
            v ^= rows[low]
    return [1 << i for i in range(dim) if i not in rows]


# -- flattened layouts ------------------------------------------------------------------------

@dataclass(frozen=True)
class FlatLayout:
    """A layout with its out dims flattened (``dim0`` minor): per in dim, one int per bit."""

    bases: tuple[tuple[str, tuple[int, ...]], ...]
    out_dims: tuple[tuple[str, int], ...]

    def dim(self, name: str) -> tuple[int, ...]:
        for n, vecs in self.bases:
            if n == name:
                return vecs
        return ()

    @property
    def numel_log2(self) -> int:
        return sum(int(s).bit_length() - 1 for _, s in self.out_dims)


def flatten_layout(layout) -> FlatLayout:
    """Flatten a ``LinearLayout`` (public API only: ``bases``, ``out_dims``,
    ``out_dim_sizes``)."""
    sizes = layout.out_dim_sizes
    names = list(layout.out_dims)
    shifts = []
    shift = 0
    for name in names:
        shifts.append(shift)
        shift += int(sizes[name]).bit_length() - 1
    flat = []
    for in_dim, vectors in layout.bases.items():
        packed = []
        for vector in vectors:
            value = 0
            for component, s in zip(vector, shifts):
                value |= int(component) << s
            packed.append(value)
        flat.append((in_dim, tuple(packed)))
    return FlatLayout(tuple(flat), tuple((n, int(sizes[n])) for n in names))


def span_table(vectors) -> np.ndarray:
    """Value of every input index: entry i is the XOR of ``vectors[b]`` over set bits b of i
    (built by doubling, one vectorized XOR per bit)."""
    table = np.zeros(1, dtype=np.int64)
    for v in vectors:
        table = np.concatenate([table, table ^ np.int64(v)])
    return table


def inverse_table(offset_bits, numel_log2: int) -> np.ndarray:
    """For a bijective flat shared layout (offset bit -> element), element -> offset."""
    elements = span_table(offset_bits)
    table = np.empty(1 << numel_log2, dtype=np.int64)
    table[elements] = np.arange(elements.size, dtype=np.int64)
    return table


# -- wavefronts ------------------------------------------------------------------------------

def wavefronts_of(lane_addresses, access_bytes: int) -> int:
    """``count_wavefronts`` for one access, in plain Python (planning counts one access per
    candidate swizzle, where numpy's per-call overhead would dominate)."""
    words_per_lane = max(1, access_bytes // 4)
    per_phase = len(lane_addresses) // words_per_lane
    total = 0
    for start in range(0, len(lane_addresses), per_phase):
        words = {addr // 4 + k for addr in lane_addresses[start:start + per_phase]
                 if addr >= 0 for k in range(words_per_lane)}
        counts = [0] * 32
        for word in words:
            counts[word & 31] += 1
        total += max(max(counts), 1)
    return total


def count_wavefronts(byte_addresses: np.ndarray, access_bytes: int) -> np.ndarray:
    """Wavefronts of each warp-wide access. ``byte_addresses``: (n_accesses, 32) start
    address of each lane (-1 = lane inactive); each lane reads ``access_bytes`` contiguous
    bytes. Returns (n_accesses,) ints. PTX ISA / CUDA guide: an access is served in phases of
    128 bytes; a phase costs the most distinct 32-bit words any one bank must deliver."""
    addrs = np.asarray(byte_addresses, dtype=np.int64)
    n, lanes = addrs.shape
    words_per_lane = max(1, access_bytes // 4)
    lanes_per_phase = lanes // words_per_lane
    phases = lanes // lanes_per_phase
    grouped = addrs.reshape(n * phases, lanes_per_phase)
    base = grouped[:, :, None] // 4 + np.arange(words_per_lane)[None, None, :]
    words = base.reshape(n * phases, -1)
    active = np.repeat(grouped >= 0, words_per_lane, axis=1)
    words = np.where(active, words, -1)
    words.sort(axis=1)
    distinct = np.ones_like(words, dtype=bool)
    distinct[:, 1:] = words[:, 1:] != words[:, :-1]
    distinct &= words >= 0
    rows = np.broadcast_to(np.arange(words.shape[0])[:, None], words.shape)
    keys = (rows * 32 + words % 32)[distinct]
    counts = np.bincount(keys, minlength=words.shape[0] * 32).reshape(-1, 32)
    per_phase = np.maximum(counts.max(axis=1), 1)
    return per_phase.reshape(n, phases).sum(axis=1)


# -- Gluon's bank_conflicts --------------------------------------------------------------------

def _largest_vector(reg_to_offset, other_to_offset, bits: int) -> int:
    """Triton's ``largestVectorisation``: the largest v (elements, at most 128 bits) such that
    some registers map to offsets 1, 2, .., v/2 and nothing else touches offset bits < v."""
    v = 128 // bits
    while v > 1:
        need = [1 << i for i in range(v.bit_length() - 1)]
        if all(n in reg_to_offset for n in need):
            rest = [x for x in reg_to_offset if x not in need] + list(other_to_offset)
            if not any(x & (v - 1) for x in rest):
                return v
        v //= 2
    return 1


def bank_conflicts(register_layout, shared_layout, shape, dtype) -> int:
    """Extra wavefronts of storing a register tensor into shared memory (``gl.bank_conflicts``).

    Same definition as Triton 3.6's ``bankConflictsMemDesc``: drop broadcast registers, find
    the widest vector ``st.shared`` can use, split shared offsets into vector / bank /
    segment bits, drop the lane bases a wide access serves in later phases, and return
    ``2**dim(span(segment) & span(lanes)) - 1``. Layouts are family objects or LinearLayouts.
    """
    from shared_codegen.layouts.planner import (
        as_linear_layout,  # one conversion rule for every entry point
    )

    bits = dtype_bits(dtype)
    shape = tuple(int(s) for s in shape)
    reg = flatten_layout(as_linear_layout(register_layout, shape))
    smem = flatten_layout(as_linear_layout(shared_layout, shape))
    if "offset" not in dict(smem.bases):
        raise ValueError("bank_conflicts: the shared layout must have an 'offset' input dim")
    if "register" not in dict(reg.bases):
        raise ValueError("bank_conflicts: the register layout must have a 'register' dim")
    if reg.out_dims != smem.out_dims:
        raise ValueError(f"register layout covers {reg.out_dims}, shared layout "
                         f"{smem.out_dims}: shapes must match")
    offset_bits = list(smem.dim("offset")) + list(smem.dim("block"))
    n = smem.numel_log2
    if rank(offset_bits) != len(offset_bits) or len(offset_bits) != n:
        raise ValueError("bank_conflicts: shared layout must be a bijection onto the tensor")
    table = inverse_table(offset_bits, n)

    def to_offset(v):
        return int(table[v])

    regs = [v for v in reg.dim("register") if v]
    others = [v for name in ("lane", "warp", "block") for v in reg.dim(name)]
    vec = _largest_vector([to_offset(v) for v in regs], [to_offset(v) for v in others], bits)
    total = 1 << len(offset_bits)
    bank_size = min(BANK_BITS // (vec * bits), total)
    log_vec = vec.bit_length() - 1
    log_bank = bank_size.bit_length() - 1
    segment = offset_bits[log_vec + log_bank:]
    lanes = list(reg.dim("lane"))
    drop = (max(vec * bits // 32, 1)).bit_length() - 1
    if drop:
        lanes = lanes[:len(lanes) - drop]
    return (1 << len(span_intersection(segment, lanes))) - 1


# -- swizzle choice for a conversion --------------------------------------------------------

@dataclass(frozen=True)
class SharedSwizzle:
    """The scratch layout of a conversion: offset bit -> flattened element, in four groups.

    ``vector`` bits are the elements one access moves, ``bank`` bits spread one wavefront over
    the 32 banks, ``segment`` bits stack rows of 1024 bits, and ``reps`` bits are rounds: data
    in registers on both sides, moved in turn through a scratch buffer ``2**len(reps)`` times
    smaller (Triton's ``buildReps``).
    """

    vector: tuple[int, ...]
    bank: tuple[int, ...]
    segment: tuple[int, ...]
    reps: tuple[int, ...]

    @property
    def offset_bits(self) -> tuple[int, ...]:
        return self.vector + self.bank + self.segment

    def all_bits(self) -> tuple[int, ...]:
        return self.offset_bits + self.reps


def _vector_prefix(regs, vbasis) -> int:
    """How many leading vbasis entries are registers of this side (registers may be renamed
    freely, so membership is enough)."""
    count = 0
    rset = set(regs)
    for v in vbasis:
        if v not in rset:
            break
        count += 1
    return count


def _vector_basis(reg_src, reg_dst, lane_src, lane_dst, bits) -> list[int]:
    """Triton's ``getVbasis``: registers shared by both sides, then fill a 32-bit word from
    one side, then registers of that side that are lanes of the other (wider accesses there
    cost nothing: the other side reads them as broadcast-free neighbours)."""
    vb = span_intersection(reg_src, reg_dst)[: (128 // bits).bit_length() - 1]
    per_word = 0 if bits > 32 else (32 // bits).bit_length() - 1
    max_extra = (128 // max(bits, 32)).bit_length() - 1

    def extra(regs, base, other_lanes):
        out = []
        other = set(other_lanes)
        for r in regs:
            if len(out) == max_extra:
                break
            if r not in base and r in other:
                out.append(r)
        return out

    def fill(regs, base):
        out = list(base)
        for r in regs:
            if len(out) >= per_word:
                break
            if r not in out:
                out.append(r)
        return out

    use_src = True
    if (1 << len(vb)) * bits < 32:
        src_fill = fill(reg_src, vb)
        dst_fill = fill(reg_dst, vb)
        use_src = len(extra(reg_src, src_fill, lane_dst)) >= len(extra(reg_dst, dst_fill,
                                                                     lane_src))
        vb = src_fill if use_src else dst_fill
    if use_src:
        return vb + extra(reg_src, vb, lane_dst)
    return vb + extra(reg_dst, vb, lane_src)


def _segment_basis(bank_src, bank_dst, dim, length) -> list[int]:
    """Triton's ``computeSegment``: segment bits are where same-bank rows stack, so prefer
    bits neither side's lanes use; then pair a source-only lane bit with a destination-only
    one (their XOR conflicts with neither); only then accept conflicts."""
    set_src = {b for b in bank_src if b}
    set_dst = {b for b in bank_dst if b}
    segment = [1 << b for b in range(dim) if (1 << b) not in set_src and
               (1 << b) not in set_dst]
    if len(segment) >= length:
        return segment[:length]
    a = sorted(v for v in set_src if v not in set_dst)
    b = sorted(v for v in set_dst if v not in set_src)
    if len(a) > len(b):
        a, b = b, a
    log_conflicts = min(max(0, length - len(a) - len(segment)), len(a))
    segment += [a[i] ^ b[i] for i in range(log_conflicts, len(a))]
    segment += a[:log_conflicts] + b[:log_conflicts]
    return segment[:length]


def _split_reps(segment, reg_src, reg_dst, leave: int = 0):
    """Segment bits that are registers on both sides become rounds (``reps``)."""
    keep, reps = [], []
    both = set(reg_src) & set(reg_dst)
    for s in segment:
        if s in both:
            if leave > 0:
                leave -= 1
                keep.append(s)
            else:
                reps.append(s)
        else:
            keep.append(s)
    return keep, reps


def swizzle_from_tiles(dim, bits, vbasis, tile_src, tile_dst, reg_src, reg_dst,
                       leave_reps=0) -> SharedSwizzle:
    """Triton's ``optimalSwizzling`` core: vector bits, then the segment, banks are the rest."""
    bank_src = list(vbasis) + list(tile_src)
    bank_dst = list(vbasis) + list(tile_dst)
    len_bank = min((BANK_BITS // ((1 << len(vbasis)) * bits)).bit_length() - 1,
                   dim - len(vbasis))
    len_seg = dim - len_bank - len(vbasis)
    segment = _segment_basis(bank_src, bank_dst, dim, len_seg)
    bank = complement_basis(list(vbasis) + segment, dim)
    keep, reps = _split_reps(segment, reg_src, reg_dst, leave_reps)
    return SharedSwizzle(tuple(vbasis), tuple(bank), tuple(keep), tuple(reps))


def predicted_conflicts(swizzle: SharedSwizzle, tile_src, tile_dst) -> tuple[int, int]:
    """(read, write) extra wavefronts as Triton's ``bankConflicts`` predicts them."""
    seg = list(swizzle.segment)
    write = (1 << len(span_intersection(seg, tile_src))) - 1
    read = (1 << len(span_intersection(seg, tile_dst))) - 1
    return read, write


def optimal_swizzling(src: FlatLayout, dst: FlatLayout, bits: int, capped: bool = False):
    """Shared layout for a src -> dst round trip through ``st.shared`` / ``ld.shared``.

    Returns (swizzle, tile_src, tile_dst): the lane bases each access spreads over banks.
    Broadcast registers must already be dropped from ``src`` and ``dst``. ``capped=False`` is
    Triton's choice (vector bases may exceed the 128 bits one access moves; the lane bases
    served by later phases are found from the registers in order); ``capped=True`` keeps the
    vector within 128 bits and lets registers be renamed, which often leaves more bank bits.
    """
    dim = src.numel_log2
    reg_src = [v for v in src.dim("register") if v]
    reg_dst = [v for v in dst.dim("register") if v]
    lane_src = list(src.dim("lane"))
    lane_dst = list(dst.dim("lane"))
    vbasis = _vector_basis(reg_src, reg_dst, lane_src, lane_dst, bits)
    max_vec = (128 // bits).bit_length() - 1
    if capped:
        vbasis = vbasis[:max(max_vec, 0)]
    tiles = []
    for regs, lanes in ((reg_src, lane_src), (reg_dst, lane_dst)):
        if capped:
            vec = min(_vector_prefix(regs, vbasis), max_vec)
        else:
            vec = 0
            while vec < min(len(regs), len(vbasis)) and regs[vec] == vbasis[vec]:
                vec += 1
        tile = list(lanes)
        if (1 << vec) * bits > 32:
            # a 64/128-bit access is served by 16/8 lanes per phase: the top lane bases land
            # in other phases and cannot conflict.
            drop = ((1 << vec) * bits // 32).bit_length() - 1
            tile = tile[:max(0, len(tile) - drop)]
        tiles.append([t for t in tile if t not in vbasis])
    swizzle = swizzle_from_tiles(dim, bits, vbasis, tiles[0], tiles[1], reg_src, reg_dst)
    return swizzle, tiles[0], tiles[1]


def matrix_forms(regs, lanes):
    """stmatrix/ldmatrix forms a side can use (16-bit elements): (suffix, row, addr). An 8x8
    b16 matrix row is 16 contiguous bytes: (register 0, lane 0, lane 1) hold it in the plain
    form, lanes (2, 3, 4) in ``.trans``; the other three bases give the 8 row addresses."""
    if len(lanes) < 5 or not regs or not all(lanes):
        return []
    plain = ("", [regs[0], lanes[0], lanes[1]], [lanes[2], lanes[3], lanes[4]])
    trans = (".trans", [lanes[2], lanes[3], lanes[4]], [regs[0], lanes[0], lanes[1]])
    return [f for f in (plain, trans) if rank(f[1] + f[2]) == 6]


def _plain_tile(regs, lanes, vbasis, bits):
    vec = min(_vector_prefix(regs, vbasis), (128 // bits).bit_length() - 1)
    tile = list(lanes)
    if (1 << vec) * bits > 32:
        drop = ((1 << vec) * bits // 32).bit_length() - 1
        tile = tile[:max(0, len(tile) - drop)]
    return [t for t in tile if t not in vbasis]


def matrix_swizzling(src: FlatLayout, dst: FlatLayout, bits: int):
    """Swizzles for every pairing that uses stmatrix and/or ldmatrix (16-bit only): the
    matrix side fixes the 16-byte row as the vector bits; the other side, matrix or plain
    ld/st, must agree on them. Returns [(store_form, load_form, swizzle, tile_src,
    tile_dst)] with forms ``None`` for plain ld/st or (suffix, row, addr)."""
    if bits != 16:
        return []
    reg_src = [v for v in src.dim("register") if v]
    reg_dst = [v for v in dst.dim("register") if v]
    lane_src, lane_dst = list(src.dim("lane")), list(dst.dim("lane"))
    src_forms = [None] + matrix_forms(reg_src, lane_src)
    dst_forms = [None] + matrix_forms(reg_dst, lane_dst)
    dim = src.numel_log2
    out = []
    for sf in src_forms:
        for df in dst_forms:
            if sf is None and df is None:
                continue
            if sf is not None and df is not None and sf[1] != df[1]:
                continue
            row = sf[1] if sf is not None else df[1]
            tile_src = sf[2] if sf is not None else _plain_tile(reg_src, lane_src, row, bits)
            tile_dst = df[2] if df is not None else _plain_tile(reg_dst, lane_dst, row, bits)
            leave = 2 if sf is not None and df is not None else 0
            swz = swizzle_from_tiles(dim, bits, row, tile_src, tile_dst, reg_src, reg_dst,
                                     leave_reps=leave)
            out.append((sf, df, swz, tile_src, tile_dst))
    return out


def log2(x: int) -> int:
    return int(math.log2(x))
