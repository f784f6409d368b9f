"""Planning ``convert_layout`` between two register layouts (Triton 3.6's lowering logic).

The conversion is read off one linear map. For a destination location ``x = (register, lane,
warp)`` the element it must hold sits in the source at ``C(x) = src^-1(dst(x))`` (the *pull*
map; Triton's ``dst.invertAndCompose(src)``). Users are shown its inverse view, the
*conversion matrix* ``dst^-1 o src`` (``src.invert_and_compose(dst)``): where each source bit
lands. Quotienting ``C`` by the slowest dims first (block, warp, lane: a dim goes when ``C`` is
the identity on it and nothing else maps into or out of it, Triton's ``minimalCvtLayout``) leaves
the dims that really move data, which picks the plan kind, cheapest first:

==========================  ===========================================================
``noop``                    every dim quotients away: same placement
``register_permutation``    only ``register`` is left: rename registers inside a thread
``warp_shuffle``            ``register`` + ``lane`` left: ``shfl.sync.idx`` rounds
``shared_memory``           ``warp`` is left: store to a swizzled scratch buffer, barrier,
                            load back (``st.shared``/``ld.shared`` or stmatrix/ldmatrix)
==========================  ===========================================================

Shuffle rounds: take a subspace ``U`` of (dst register, dst lane) that meets every dst lane
once and whose image under ``C`` meets each src lane with a single register; then every coset
``t + U`` (``t`` a dst register index) is one round in which each dst lane reads exactly one
src lane, and the src lanes agree on what they send. ``U`` = the dst lanes themselves works
whenever lanes only permute; otherwise lane bits are mixed with register bits (a register is
then chosen per lane with a select, as in Triton's ``transferWithinWarp``).

When a src bit is a broadcast copy at the same place in dst, ``C`` keeps it in place (any
preimage is valid; "stay put" is the one that makes identical layouts a ``noop``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from shared_codegen.layouts.bank_conflicts import (FlatLayout, SharedSwizzle, dtype_bits,
                                                   flatten_layout, inverse_table, matrix_swizzling,
                                                   optimal_swizzling, predicted_conflicts,
                                                   span_table, wavefronts_of)

__all__ = ["ConversionPlan", "PlanCost", "ShuffleRound", "as_linear_layout",
           "conversion_matrix", "plan_conversion", "placement", "simulate"]

HW_DIMS = ("register", "lane", "warp", "block")
# A shared-memory conversion runs in one round (no barrier between rounds) when its whole
# scratch is at most this: Triton (buildReps) always moves the bits that are registers on
# both sides in rounds, a barrier pair each, to keep the scratch small, which for a
# decode loop's 16x32 fp16 P tile (512 B a round, 1 KB in one) bought nothing but two of
# the loop's barriers. Larger conversions (accumulator epilogues) keep their rounds.
ONE_ROUND_SCRATCH_BYTES = 4096
KINDS = ("noop", "register_permutation", "warp_shuffle", "shared_memory")


# -- inputs -----------------------------------------------------------------------------------

def _to_ll_uncached(layout, shape):
    from shared_codegen.layouts.linear_layout import LinearLayout
    if isinstance(layout, LinearLayout):
        return layout
    try:
        from shared_codegen.layouts import to_linear_layout
    except ImportError:
        to_linear_layout = None
    if to_linear_layout is not None:
        return to_linear_layout(layout, list(shape))
    # Families carry their own builder (gluon.layouts.to_linear_layout delegates to it).
    if hasattr(layout, "to_linear_layout"):
        return layout.to_linear_layout(list(shape))
    raise TypeError(f"cannot convert {layout!r} to a LinearLayout")


@functools.lru_cache(maxsize=4096)
def _to_ll_cached(layout, shape):
    return _to_ll_uncached(layout, shape)


def as_linear_layout(layout, shape):
    """A family object or a LinearLayout as a LinearLayout over ``shape``."""
    shape = tuple(int(s) for s in shape)
    try:
        return _to_ll_cached(layout, shape)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return _to_ll_uncached(layout, shape)


def _hw_layout(flat: FlatLayout):
    """(dims, sizes_log2, vectors): the hardware bits in register, lane, warp, block order."""
    sizes = tuple(len(flat.dim(d)) for d in HW_DIMS)
    vectors = tuple(v for d in HW_DIMS for v in flat.dim(d))
    return sizes, vectors


def _offsets(sizes):
    out, acc = [], 0
    for s in sizes:
        out.append(acc)
        acc += s
    return out


# -- the pull map ------------------------------------------------------------------------------

def _solver(vectors):
    """Echelon rows keyed by top bit, each with the mask of source bits that built it;
    columns are taken in order, so the solution uses the earliest independent bits (the
    free-variables-zero solution of Triton's ``lstsq``)."""
    rows = {}
    for index, v in enumerate(vectors):
        combo = 1 << index
        while v:
            top = v.bit_length() - 1
            if top not in rows:
                rows[top] = (v, combo)
                break
            rv, rc = rows[top]
            v ^= rv
            combo ^= rc
    return rows


def _solve(rows, v):
    combo = 0
    while v:
        top = v.bit_length() - 1
        if top not in rows:
            return None
        rv, rc = rows[top]
        v ^= rv
        combo ^= rc
    return combo


def _compose(src_vectors, dst_vectors, src_sizes, dst_sizes, what):
    """For each dst hw bit, the mask of src hw bits holding its element (stay put when the
    src bit at the same place holds the same vector)."""
    rows = _solver(src_vectors)
    src_off, dst_off = _offsets(src_sizes), _offsets(dst_sizes)
    out = []
    for d, (so, do, ss, ds) in enumerate(zip(src_off, dst_off, src_sizes, dst_sizes)):
        for i in range(ds):
            v = dst_vectors[do + i]
            if i < ss and src_vectors[so + i] == v:
                out.append(1 << (so + i))
                continue
            combo = _solve(rows, v)
            if combo is None:
                raise ValueError(f"{what}: {HW_DIMS[d]} bit {i} of the destination holds an "
                                 f"element the source layout never holds")
            out.append(combo)
    return tuple(out)


def _dim_mask(sizes, d):
    off = _offsets(sizes)[d]
    return ((1 << sizes[d]) - 1) << off


def _quotient(pull, src_sizes, dst_sizes):
    """Dims that still move data after quotienting block, warp, lane (in that order)."""
    remaining = [d for d in range(4)]
    src_off, dst_off = _offsets(src_sizes), _offsets(dst_sizes)
    for d in (3, 2, 1, 0):
        if src_sizes[d] != dst_sizes[d]:
            break
        identity = all(pull[dst_off[d] + i] == 1 << (src_off[d] + i)
                       for i in range(dst_sizes[d]))
        into = _dim_mask(src_sizes, d)
        crossing = any(pull[dst_off[e] + i] & into for e in remaining if e != d
                       for i in range(dst_sizes[e]))
        if not identity or crossing:
            break
        remaining.remove(d)
    return tuple(HW_DIMS[d] for d in remaining)


# -- plan records -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlanCost:
    """What a conversion costs, per thread / per warp-wide instruction."""

    kind: str
    register_moves: int = 0        # values renamed or copied inside a thread
    shuffles: int = 0              # shfl.sync.idx per thread
    selects: bool = False          # lane-dependent register choice around the shuffles
    smem_bytes: int = 0            # scratch per CTA
    rounds: int = 0                # store/barrier/load rounds through that scratch
    store_instructions: int = 0    # per thread, all rounds
    load_instructions: int = 0
    store_wavefronts: float = 0.0  # average per warp-wide store (ideal: one per 128 bytes)
    load_wavefronts: float = 0.0
    barriers: int = 0

    def __str__(self) -> str:
        if self.kind == "noop":
            return "free (no data moves)"
        if self.kind == "register_permutation":
            return f"{self.register_moves} register moves per thread"
        if self.kind == "warp_shuffle":
            sel = ", lane-dependent selects" if self.selects else ""
            return f"{self.shuffles} shuffles per thread{sel}"
        return (f"{self.smem_bytes} B scratch, {self.rounds} round(s), "
                f"{self.store_instructions} stores + {self.load_instructions} loads per "
                f"thread, {self.store_wavefronts:g}/{self.load_wavefronts:g} wavefronts per "
                f"store/load, {self.barriers} barrier(s)")


@dataclass(frozen=True)
class ShuffleRound:
    """One ``shfl.sync.idx`` round: dst lane ``l`` reads src lane ``src_lane[l]``; the value
    carries src registers ``src_regs[src_lane[l]]`` (several when packed into 32 bits) and
    lands in dst registers ``dst_regs[l]``."""

    src_lane: tuple[int, ...]
    src_regs: tuple[tuple[int, ...], ...]
    dst_regs: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class WarpShuffle:
    pull: tuple[int, ...]          # dst (register, lane) bit -> src hw mask
    src_sizes: tuple[int, ...]
    dst_sizes: tuple[int, ...]
    lane_subspace: tuple[int, ...]  # U: per dst lane bit, a dst (reg | lane << nreg) mask
    lane_images: tuple[int, ...]   # where each U vector reads in the src (reg | lane << nreg)
    round_bits: tuple[int, ...]    # dst register bits enumerated by rounds
    pack_bits: tuple[int, ...]     # dst register bits packed into one 32-bit shuffle
    words: int                     # 32-bit shuffles per value (2 for 64-bit elements)

    @property
    def rounds(self) -> int:
        return (1 << len(self.round_bits)) * self.words

    def round(self, k: int) -> ShuffleRound:
        """Round ``k`` (0 <= k < 2**len(round_bits)); 64-bit values repeat it per word."""
        nreg = self.dst_sizes[0]
        t = 0
        for j, b in enumerate(self.round_bits):
            if (k >> j) & 1:
                t |= 1 << b
        packs = []
        for q in range(1 << len(self.pack_bits)):
            p = 0
            for j, b in enumerate(self.pack_bits):
                if (q >> j) & 1:
                    p |= 1 << b
            packs.append(p)
        s_nreg = self.src_sizes[0]
        lanes = 1 << self.dst_sizes[1]
        src_lane, dst_regs = [], []
        offered: dict[int, tuple[int, ...]] = {}
        for lane in range(lanes):
            u = image = 0
            for j, basis in enumerate(self.lane_subspace):
                if (lane >> j) & 1:
                    u ^= basis
                    image ^= self.lane_images[j]
            regs_here, src_here, sl = [], [], None
            for p in packs:
                v = t ^ p ^ u
                c = _apply_mask(self.pull, t ^ p) ^ image
                sl = c >> s_nreg
                regs_here.append(v & ((1 << nreg) - 1))
                src_here.append(c & ((1 << s_nreg) - 1))
            src_lane.append(sl)
            dst_regs.append(tuple(regs_here))
            prev = offered.setdefault(sl, tuple(src_here))
            assert prev == tuple(src_here), "shuffle round asks one lane for two values"
        src_regs = tuple(offered.get(lane, ()) for lane in range(1 << self.src_sizes[1]))
        return ShuffleRound(tuple(src_lane), src_regs, tuple(dst_regs))


def _apply_mask(columns, v):
    out, i = 0, 0
    while v:
        if v & 1:
            out ^= columns[i]
        v >>= 1
        i += 1
    return out


@dataclass(frozen=True)
class SharedRoundTrip:
    swizzle: SharedSwizzle
    store_instruction: str        # st.shared.vN.bM or stmatrix[.trans]
    load_instruction: str
    store_vector: int             # elements per access (per row for the matrix forms)
    load_vector: int
    predicted_extra_wavefronts: tuple[int, int]  # (store, load), Triton's formula
    store_wavefronts: float
    load_wavefronts: float
    store_instructions: int
    load_instructions: int


@dataclass(frozen=True)
class ConversionPlan:
    """How ``convert_layout(src -> dst)`` moves data; ``describe()`` explains it."""

    kind: str
    shape: tuple[int, ...]
    bits: int
    num_warps: int
    moving_dims: tuple[str, ...]
    pull: tuple[int, ...] = field(repr=False)
    src_sizes: tuple[int, ...] = ()
    dst_sizes: tuple[int, ...] = ()
    permutation: tuple[int, ...] | None = None   # dst register -> src register
    shuffle: WarpShuffle | None = None
    shared: SharedRoundTrip | None = None
    note: str = ""
    cost: PlanCost = field(default_factory=lambda: PlanCost("noop"))

    def describe(self) -> str:
        lines = [f"plan: {self.kind}  (tensor {'x'.join(map(str, self.shape))}, "
                 f"{self.bits}-bit elements, {self.num_warps} warps)",
                 f"dims that move data: {', '.join(self.moving_dims) or 'none'}"]
        if self.kind == "noop":
            lines.append("source and destination place every element identically")
        elif self.kind == "register_permutation":
            perm = self.permutation
            shown = ", ".join(f"{d}<-{s}" for d, s in enumerate(perm[:16]))
            more = f", ... ({len(perm)} registers)" if len(perm) > 16 else ""
            lines.append(f"dst register <- src register: {shown}{more}")
        elif self.kind == "warp_shuffle":
            sh = self.shuffle
            lines.append(f"{sh.rounds} shuffle round(s), {1 << len(sh.pack_bits)} element(s) "
                         f"per 32-bit shuffle" + (", 2 words per element" if sh.words == 2
                                                  else ""))
            for k in range(min(2, 1 << len(sh.round_bits))):
                r = sh.round(k)
                lines.append(f"round {k}: dst lanes 0-7 read src lanes {list(r.src_lane[:8])}")
                lines.append(f"  src lanes 0-7 send registers "
                             f"{[list(x) for x in r.src_regs[:8]]}")
                lines.append(f"  dst lanes 0-7 write registers "
                             f"{[list(x) for x in r.dst_regs[:8]]}")
        elif self.kind == "shared_memory":
            sm = self.shared
            sw = sm.swizzle
            eb = self.bits // 8
            lines += [
                f"store: {sm.store_instruction}, {sm.store_vector} elements "
                f"({sm.store_vector * eb} B) per access, {sm.store_instructions} per thread, "
                f"{sm.store_wavefronts:g} wavefronts each",
                f"load:  {sm.load_instruction}, {sm.load_vector} elements "
                f"({sm.load_vector * eb} B) per access, {sm.load_instructions} per thread, "
                f"{sm.load_wavefronts:g} wavefronts each",
                f"swizzle (offset bit -> flat element, dim0 minor): vector {list(sw.vector)} "
                f"bank {list(sw.bank)} segment {list(sw.segment)}",
                f"scratch: {self.cost.smem_bytes} B, {self.cost.rounds} round(s)"
                + (f" over reps {list(sw.reps)}" if sw.reps else ""),
                f"stmatrix: {'yes' if sm.store_instruction.startswith('stmatrix') else 'no'}, "
                f"ldmatrix: {'yes' if sm.load_instruction.startswith('ldmatrix') else 'no'}",
            ]
        if self.note:
            lines.append(f"note: {self.note}")
        lines.append(f"cost: {self.cost}")
        return "\n".join(lines)


# -- planning -------------------------------------------------------------------------------

def plan_conversion(src_layout, dst_layout, shape, dtype_bits_or_dtype, num_warps=None
                    ) -> ConversionPlan:
    """Plan ``convert_layout`` of a ``shape`` tensor from ``src_layout`` to ``dst_layout``.

    Layouts are Gluon family objects or ``LinearLayout``s with register/lane/warp(/block) in
    dims. ``num_warps``, when given, must agree with the layouts. Plans are cached.
    """
    bits = dtype_bits(dtype_bits_or_dtype)
    shape = tuple(int(s) for s in shape)
    src = _flat_cached(src_layout, shape)
    dst = _flat_cached(dst_layout, shape)
    return _plan_cached(src, dst, shape, bits, num_warps)


def _flat_uncached(layout, shape):
    flat = flatten_layout(as_linear_layout(layout, shape))
    names = [n for n, _ in flat.bases]
    if "register" not in names or "lane" not in names:
        raise ValueError(f"{layout!r} is not a register (distributed) layout: in dims {names}")
    return flat


@functools.lru_cache(maxsize=4096)
def _flat_hashable(layout, shape):
    return _flat_uncached(layout, shape)


def _flat_cached(layout, shape):
    try:
        return _flat_hashable(layout, shape)
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return _flat_uncached(layout, shape)


def conversion_matrix(src_layout, dst_layout, shape):
    """``dst^-1 o src`` as a LinearLayout: src (register, lane, warp, block) -> dst's."""
    shape = tuple(int(s) for s in shape)
    src = as_linear_layout(src_layout, shape)
    dst = as_linear_layout(dst_layout, shape)
    return src.invert_and_compose(dst)


@functools.lru_cache(maxsize=2048)
def _plan_cached(src: FlatLayout, dst: FlatLayout, shape, bits, num_warps):
    if src.out_dims != dst.out_dims:
        raise ValueError(f"layouts cover different tensors: {src.out_dims} vs {dst.out_dims}")
    src_sizes, src_vecs = _hw_layout(src)
    dst_sizes, dst_vecs = _hw_layout(dst)
    warps = 1 << src_sizes[2]
    if dst_sizes[2] != src_sizes[2]:
        raise ValueError(f"source uses {warps} warps, destination {1 << dst_sizes[2]}")
    if num_warps is not None and num_warps != warps:
        raise ValueError(f"num_warps={num_warps} but the layouts use {warps} warps")
    pull = _compose(src_vecs, dst_vecs, src_sizes, dst_sizes, "convert_layout")
    moving = _quotient(pull, src_sizes, dst_sizes)
    base = dict(shape=shape, bits=bits, num_warps=warps, moving_dims=moving, pull=pull,
                src_sizes=src_sizes, dst_sizes=dst_sizes)
    if "block" in moving:
        raise NotImplementedError("conversions that move data between CTAs are not planned")
    if not moving:
        return ConversionPlan("noop", **base, cost=PlanCost("noop"))
    if moving == ("register",):
        perm = tuple(_apply_mask(pull, r) for r in range(1 << dst_sizes[0]))
        moves = sum(1 for d, s in enumerate(perm) if d != s)
        return ConversionPlan("register_permutation", **base, permutation=perm,
                              cost=PlanCost("register_permutation", register_moves=moves))
    note = ""
    if moving == ("register", "lane"):
        shuffle = _plan_shuffle(pull, src_sizes, dst_sizes, dst_vecs, src_vecs, bits)
        if shuffle is not None:
            selects = any(img & ((1 << src_sizes[0]) - 1) or u & ((1 << dst_sizes[0]) - 1)
                          for u, img in zip(shuffle.lane_subspace, shuffle.lane_images))
            cost = PlanCost("warp_shuffle", shuffles=shuffle.rounds, selects=selects)
            return ConversionPlan("warp_shuffle", **base, shuffle=shuffle, cost=cost)
        note = "no shuffle schedule found; going through shared memory"
    shared = _plan_shared(src, dst, bits, warps)
    sw = shared.swizzle
    cost = PlanCost("shared_memory", smem_bytes=(1 << len(sw.offset_bits)) * bits // 8,
                    rounds=1 << len(sw.reps), store_instructions=shared.store_instructions,
                    load_instructions=shared.load_instructions,
                    store_wavefronts=shared.store_wavefronts,
                    load_wavefronts=shared.load_wavefronts,
                    barriers=2 * (1 << len(sw.reps)) - 1)
    return ConversionPlan("shared_memory", **base, shared=shared, note=note, cost=cost)


# -- warp shuffles ----------------------------------------------------------------------------

def _span(vectors):
    out = [0]
    for v in vectors:
        out += [x ^ v for x in out]
    return out


def _lane_subspace_ok(images, s_nreg):
    """Each src lane hit by the span of ``images`` is asked for a single register."""
    need: dict[int, int] = {}
    for c in _span(images):
        lane, reg = c >> s_nreg, c & ((1 << s_nreg) - 1)
        if need.setdefault(lane, reg) != reg:
            return False
    return True


def _plan_shuffle(pull, src_sizes, dst_sizes, dst_vecs, src_vecs, bits):
    nreg, nlane = dst_sizes[0], dst_sizes[1]
    s_nreg = src_sizes[0]
    if src_sizes[1] != nlane:
        return None
    local = pull[: nreg + nlane]
    real_regs = [i for i in range(nreg) if dst_vecs[i]]
    reg_space = _span([1 << i for i in real_regs])
    # Source bits holding nothing new (broadcast copies) may be added to any source location:
    # reading lane l ^ b instead of l is how a broadcast source feeds more destination lanes.
    src_free = _span([1 << i for i in range(s_nreg + nlane) if not src_vecs[i]][:6])
    chosen, images = [], []
    for j in range(nlane):
        lane_bit = 1 << (nreg + j)
        found = None
        for r in reg_space:
            base = _apply_mask(local, lane_bit ^ r)
            for k in src_free:
                if _lane_subspace_ok(images + [base ^ k], s_nreg):
                    found = (lane_bit ^ r, base ^ k)
                    break
            if found:
                break
        if found is None:
            return None
        chosen.append(found[0])
        images.append(found[1])
    pack_bits, round_bits = [], []
    max_pack = 0 if bits >= 32 else (32 // bits).bit_length() - 1
    for i in real_regs:
        if len(pack_bits) < max_pack and local[i] >> s_nreg == 0:
            pack_bits.append(i)
        else:
            round_bits.append(i)
    return WarpShuffle(pull=local, src_sizes=src_sizes, dst_sizes=dst_sizes,
                       lane_subspace=tuple(chosen), lane_images=tuple(images),
                       round_bits=tuple(round_bits), pack_bits=tuple(pack_bits),
                       words=2 if bits == 64 else 1)


# -- shared memory ---------------------------------------------------------------------------

def _drop_broadcast_regs(flat: FlatLayout) -> FlatLayout:
    return FlatLayout(tuple((n, tuple(v for v in vecs if v) if n == "register" else vecs)
                            for n, vecs in flat.bases), flat.out_dims)


def _ld_st_vector(regs, vbasis, bits):
    count = 0
    for v in vbasis:
        if v not in regs or (1 << (count + 1)) * bits > 128:
            break
        count += 1
    return 1 << count


def _plan_shared(src: FlatLayout, dst: FlatLayout, bits: int, warps: int) -> SharedRoundTrip:
    """Try Triton's ld/st swizzle (as Triton computes it, and with the vector capped at 128
    bits) and every stmatrix/ldmatrix pairing; keep the fewest wavefronts in total (stores +
    loads), then the fewest instructions, then the matrix instructions (Triton's preference).
    """
    src_nb, dst_nb = _drop_broadcast_regs(src), _drop_broadcast_regs(dst)
    trips = [_ld_st_trip(src_nb, dst_nb, bits, capped) for capped in (False, True)]
    for sf, df, swizzle, tile_src, tile_dst in matrix_swizzling(src_nb, dst_nb, bits):
        trips.append(_mixed_trip(src_nb, dst_nb, bits, sf, df, swizzle, tile_src, tile_dst))

    def key(trip):
        uses_matrix = "matrix" in trip.store_instruction + trip.load_instruction
        return (trip.store_wavefronts * trip.store_instructions +
                trip.load_wavefronts * trip.load_instructions,
                trip.store_instructions + trip.load_instructions, not uses_matrix)

    best = min(trips, key=key)
    sw = best.swizzle
    if sw.reps and (1 << len(sw.all_bits())) * bits // 8 <= ONE_ROUND_SCRATCH_BYTES:
        best = replace(best, swizzle=SharedSwizzle(sw.vector, sw.bank, sw.segment + sw.reps,
                                                   ()))
    return best


def _side(flat, swizzle, form, op, bits):
    """(instruction, vector elements, wavefronts, instructions) for one side."""
    if form is None:
        vec = _ld_st_vector(set(flat.dim("register")), swizzle.vector, bits)
        waves, count = _ld_st_access(flat, swizzle, vec, bits)
        return _ld_st_name(op, vec, bits), vec, waves, count
    suffix, row, addr = form
    waves, count = _matrix_access(flat, swizzle, row, addr, bits)
    name = ("stmatrix" if op == "st" else "ldmatrix") + suffix + ".x4.b16"
    return name, 8, waves, count


def _mixed_trip(src_nb, dst_nb, bits, sf, df, swizzle, tile_src, tile_dst):
    s_name, s_vec, s_waves, s_count = _side(src_nb, swizzle, sf, "st", bits)
    d_name, d_vec, d_waves, d_count = _side(dst_nb, swizzle, df, "ld", bits)
    read, write = predicted_conflicts(swizzle, tile_src, tile_dst)
    return SharedRoundTrip(swizzle, s_name, d_name, s_vec, d_vec, (write, read), s_waves,
                           d_waves, s_count, d_count)


def _ld_st_trip(src_nb, dst_nb, bits, capped) -> SharedRoundTrip:
    swizzle, tile_src, tile_dst = optimal_swizzling(src_nb, dst_nb, bits, capped)
    return _mixed_trip(src_nb, dst_nb, bits, None, None, swizzle, tile_src, tile_dst)


def _ld_st_name(op, vec, bits):
    total = vec * bits
    if total >= 32:
        return f"{op}.shared.v{total // 32}.b32" if total > 32 else f"{op}.shared.b32"
    return f"{op}.shared.b{total}"


@functools.lru_cache(maxsize=64)
def _offset_lookup(swizzle: SharedSwizzle, numel_log2):
    table = inverse_table(list(swizzle.all_bits()), numel_log2)
    table.flags.writeable = False
    return table


def _offsets_of(swizzle: SharedSwizzle, vectors):
    """Scratch offset of each element vector. The swizzle is linear, so only basis vectors
    need solving; the reps bits (rounds) are dropped."""
    rows = _swizzle_solver(swizzle)
    mask = (1 << len(swizzle.offset_bits)) - 1
    return [_solve(rows, v) & mask for v in vectors]


@functools.lru_cache(maxsize=256)
def _swizzle_solver(swizzle: SharedSwizzle):
    return _solver(swizzle.all_bits())


def _ld_st_access(flat: FlatLayout, swizzle, vec, bits):
    """(wavefronts per instruction, instructions per thread) of the plain ld/st side.

    Only one instruction is counted: any other instruction (other registers, other warp)
    XORs one constant into every lane's offset, which permutes banks and rows alike and
    leaves the conflict pattern unchanged.
    """
    vec_log = vec.bit_length() - 1
    vbits = set(swizzle.vector[:vec_log])
    outer = [r for r in flat.dim("register") if r not in vbits]
    addrs = [o * (bits // 8) for o in _span(_offsets_of(swizzle, flat.dim("lane")))]
    access = max(vec * bits // 8, bits // 8)
    return float(wavefronts_of(addrs, access)), 1 << len(outer)


def _matrix_access(flat: FlatLayout, swizzle, row, addr, bits):
    """stmatrix/ldmatrix .x4: each lane gives one 16-byte row address (8 rows of up to 4
    matrices, the matrices told apart by the next two registers)."""
    regs = [r for r in flat.dim("register") if r not in row]
    mats, outer = regs[:2], regs[2:]
    rows = [o * (bits // 8) for o in _span(_offsets_of(swizzle, list(addr) + mats))]
    rows += [-1] * (32 - len(rows))
    return float(wavefronts_of(rows, 16)), 1 << len(outer)


# -- simulation -------------------------------------------------------------------------------

def placement(layout, shape) -> np.ndarray:
    """Element (flat index, dim0 minor) held at [warp, lane, register]."""
    flat = _flat_cached(layout, tuple(int(s) for s in shape))
    return _placement_flat(flat)


def _placement_flat(flat: FlatLayout) -> np.ndarray:
    w = span_table(flat.dim("warp"))
    lane = span_table(flat.dim("lane"))
    r = span_table(flat.dim("register"))
    return w[:, None, None] ^ lane[None, :, None] ^ r[None, None, :]


def simulate(plan: ConversionPlan, src, dst, shape) -> np.ndarray:
    """Move tagged elements the way ``plan`` says; returns the element at each dst
    [warp, lane, register] (-1 where nothing arrived). Equal to ``placement(dst, shape)``
    when the plan is right."""
    shape = tuple(int(s) for s in shape)
    sflat, dflat = _flat_cached(src, shape), _flat_cached(dst, shape)
    data = _placement_flat(sflat)           # the tags the source threads hold
    warps, lanes, _ = data.shape
    nreg_dst = 1 << plan.dst_sizes[0]
    out = np.full((warps, 1 << plan.dst_sizes[1], nreg_dst), -1, dtype=np.int64)
    if plan.kind == "noop":
        out[...] = data[:, :, :nreg_dst]
    elif plan.kind == "register_permutation":
        out[...] = data[:, :, list(plan.permutation)]
    elif plan.kind == "warp_shuffle":
        sh = plan.shuffle
        for k in range(1 << len(sh.round_bits)):
            rnd = sh.round(k)
            for lane in range(out.shape[1]):
                sl = rnd.src_lane[lane]
                sent = data[:, sl, list(rnd.src_regs[sl])]   # what src lane sl offers
                out[:, lane, list(rnd.dst_regs[lane])] = sent
        _fill_broadcast_regs(out, dflat)
    else:
        _simulate_shared(plan, sflat, dflat, data, out)
        _fill_broadcast_regs(out, dflat)
    return out


def _fill_broadcast_regs(out, dflat):
    """Broadcast registers are copies of the one with the broadcast bits cleared."""
    mask = 0
    for bit, v in enumerate(dflat.dim("register")):
        if not v:
            mask |= 1 << bit
    if mask:
        regs = np.arange(out.shape[2])
        out[...] = out[:, :, regs & ~mask]


def _hw_offsets(flat: FlatLayout, table):
    """Shared offset each (warp, lane, register) addresses: computed from the hardware
    index through the layout and the swizzle, never from the data."""
    return table[_placement_flat(flat)]


def _simulate_shared(plan, sflat, dflat, data, out):
    sw = plan.shared.swizzle
    table = _offset_lookup(sw, sflat.numel_log2)
    scratch_bits = len(sw.offset_bits)
    src_off = _hw_offsets(sflat, table)
    dst_off = _hw_offsets(dflat, table)
    for rnd in range(1 << len(sw.reps)):
        buffer = np.full(1 << scratch_bits, -1, dtype=np.int64)
        mine = (src_off >> scratch_bits) == rnd
        buffer[src_off[mine] & ((1 << scratch_bits) - 1)] = data[mine]
        # barrier
        take = (dst_off >> scratch_bits) == rnd
        out[take] = buffer[dst_off[take] & ((1 << scratch_bits) - 1)]
