"""The planner's `warp_shuffle` plans: convert_layout inside each warp with `shfl.sync.idx`.

The planner (`shared_codegen.layouts.planner.WarpShuffle`) hands out rounds. In round k, destination
lane `l` reads source lane `src_lane[l]`; that lane sends the source registers
`src_regs[src_lane]` packed into one 32-bit word (several elements when they are narrower),
and lane `l` writes what it got into its registers `dst_regs[l]`. Everything in a round is
affine over GF(2) in the lane id, because the layouts are linear:

    src_lane(l)    = a_k ^ L(l)           which lane to read (the shfl.sync.idx operand)
    sent(l')[q]    = s_k ^ S_q ^ H(l')    the register a source lane puts in slot q
    written(l)[q]  = d_k ^ D_q ^ D(l)     the register a destination lane fills from slot q

`L`, `H`, `D` are linear maps, each the XOR of one mask per set lane bit. When `H` or `D` is
non-zero a lane picks *which* register to send or to fill by its own lane bits: a tree of
`select`s on those bits, as in Triton's `transferWithinWarp` (one level per lane bit that
matters). `schedule_shuffle` fits these maps to the plan's tables in pure Python (and checks
them against every lane), so a plan that does not fit is refused before any IR is emitted.

Sub-32-bit elements travel packed as the plan packs them (slot q in bits [q*w, (q+1)*w));
64-bit elements (pointers included) as two 32-bit words, each its own shuffle. No shared
memory and no barrier: shfl.sync synchronizes the warp itself (PTX ISA 9.7.9.6 shfl.sync; the
selects become `selp`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from llvmlite import ir

from shared_codegen.lowering.context import I32, I64

LANE_BITS = 5


# ---- affine maps over GF(2) (pure Python) ---------------------------------------------------

@dataclass(frozen=True)
class Affine:
    """x -> const ^ XOR of masks[j] over the set bits j of x."""

    const: int
    masks: Tuple[int, ...]

    def __call__(self, x: int) -> int:
        out = self.const
        for j, m in enumerate(self.masks):
            if x >> j & 1:
                out ^= m
        return out


def fit_affine(table: Dict[int, int], nbits: int) -> Optional[Affine]:
    """The affine map agreeing with `table` (defined on some inputs < 2**nbits), or None.

    The defined inputs need not be a whole space (a broadcast source has lanes nobody reads):
    fit on differences from one defined input, leave the undefined directions zero, then
    check every entry."""
    if not table:
        return Affine(0, (0,) * nbits)
    origin = min(table)
    rows: Dict[int, Tuple[int, int]] = {}   # top bit -> (input difference, output difference)
    for x, y in table.items():
        dx, dy = x ^ origin, y ^ table[origin]
        while dx:
            top = dx.bit_length() - 1
            if top not in rows:
                rows[top] = (dx, dy)
                break
            rx, ry = rows[top]
            dx ^= rx
            dy ^= ry
    # Reduce to a basis of unit vectors where possible: solve each unit bit j.
    masks = []
    for j in range(nbits):
        v, acc, ok = 1 << j, 0, True
        while v:
            top = v.bit_length() - 1
            if top not in rows:
                ok = False
                break
            rx, ry = rows[top]
            v ^= rx
            acc ^= ry
        masks.append(acc if ok else 0)
    # Unit bits outside the span got 0; that is only right if the span is all of it or the
    # table never needs them: re-derive the constant and check every entry.
    linear = Affine(0, tuple(masks))
    const = table[origin] ^ linear(origin)
    fitted = Affine(const, tuple(masks))
    if any(fitted(x) != y for x, y in table.items()):
        return None
    return fitted


# ---- the schedule --------------------------------------------------------------------------

@dataclass(frozen=True)
class RoundSchedule:
    src_lane: Affine                 # dst lane -> src lane to read
    send: Affine                     # src lane -> src register of slot 0
    send_slots: Tuple[int, ...]      # per slot q: register XOR from slot 0 (S_q)
    recv_slots: Tuple[int, ...]      # per slot q: dst register constant d_k ^ D_q


@dataclass(frozen=True)
class ShuffleSchedule:
    rounds: Tuple[RoundSchedule, ...]
    recv: Tuple[int, ...]            # D: per dst lane bit, the dst register XOR
    elem_bits: int                   # bits per element on the wire (i1 as 8, pointers 64)
    words: int                       # 32-bit shuffles per element (2 for 64-bit)
    dst_registers: int
    broadcast_mask: int              # dst register bits that only copy (zero bases)

    @property
    def shuffles(self) -> int:
        return len(self.rounds) * self.words


def schedule_shuffle(plan, dst_reg_bases: Sequence[tuple], n_src_regs: int
                     ) -> Optional[ShuffleSchedule]:
    """Fit the affine description above to `plan.shuffle`'s rounds; None when it does not
    fit (the caller then takes another path) or the plan's registers disagree with ours."""
    sh = plan.shuffle
    if sh is None or plan.dst_sizes[1] != LANE_BITS or plan.src_sizes[1] != LANE_BITS:
        return None
    n_dst = 1 << plan.dst_sizes[0]
    if n_dst != 1 << len(dst_reg_bases) or n_src_regs != 1 << plan.src_sizes[0]:
        return None
    bmask = 0
    for bit, vec in enumerate(dst_reg_bases):
        if not any(vec):
            bmask |= 1 << bit
    lanes = 1 << LANE_BITS
    rounds = []
    recv_linear = None
    received = set()
    for k in range(1 << len(sh.round_bits)):
        r = sh.round(k)
        src_lane = fit_affine({l: r.src_lane[l] for l in range(lanes)}, LANE_BITS)
        slots = len(r.dst_regs[0])
        sent = {l: regs for l, regs in enumerate(r.src_regs) if regs}
        send = fit_affine({l: regs[0] for l, regs in sent.items()}, LANE_BITS)
        recv = fit_affine({l: r.dst_regs[l][0] for l in range(lanes)}, LANE_BITS)
        if src_lane is None or send is None or recv is None:
            return None
        # Slot q is slot 0 moved by a lane-independent XOR on both sides (so whole packed
        # words can be selected, not element by element).
        some = next(iter(sent), None)
        send_slots = tuple(sent[some][q] ^ send(some) if sent else 0 for q in range(slots))
        if any(regs[q] != send(l) ^ send_slots[q] for l, regs in sent.items()
               for q in range(slots)):
            return None
        # D(l) = recv(l) ^ recv(0); slot q of round k fills d_k ^ D_q ^ D(l).
        recv_slots = tuple(r.dst_regs[0][q] for q in range(slots))
        if any(r.dst_regs[l][q] != recv_slots[q] ^ recv(l) ^ recv.const
               for l in range(lanes) for q in range(slots)):
            return None
        if recv_linear is None:
            recv_linear = recv.masks
        elif recv.masks != recv_linear:
            return None
        if any(c >= n_dst for c in recv_slots) or any(
                send(l) ^ s >= n_src_regs for l in sent for s in send_slots):
            return None
        received.update(recv_slots)
        rounds.append(RoundSchedule(src_lane, send, send_slots, recv_slots))
    if recv_linear is None:
        return None
    # Every real dst register must be fillable in every lane: r ^ D(l) was received.
    d = Affine(0, recv_linear)
    for reg in range(n_dst):
        if reg & bmask:
            continue
        if any(reg ^ d(l) not in received for l in range(lanes)):
            return None
    bits = plan.bits
    return ShuffleSchedule(tuple(rounds), recv_linear, bits, 2 if bits == 64 else 1, n_dst,
                           bmask)


# ---- element <-> bits --------------------------------------------------------------------

def to_bits(b: ir.IRBuilder, v: ir.Value, bits: int) -> ir.Value:
    """`v` as an iN of its wire width (i1 as i8, pointers as i64, floats bitcast)."""
    t = v.type
    if isinstance(t, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(t, ir.IntType):
        return b.zext(v, ir.IntType(bits)) if t.width < bits else v
    return b.bitcast(v, ir.IntType(bits))


def from_bits(b: ir.IRBuilder, v: ir.Value, lty: ir.Type) -> ir.Value:
    if isinstance(lty, ir.PointerType):
        return b.inttoptr(v, lty)
    if isinstance(lty, ir.IntType):
        return b.trunc(v, lty) if lty.width < v.type.width else v
    return b.bitcast(v, lty)


def pack_words(b: ir.IRBuilder, elems: Sequence[ir.Value], bits: int) -> List[ir.Value]:
    """Elements (as iN) into 32-bit words: several per word (slot q at bit q*N, the layout of
    f16x2 and of the mma/ldmatrix fragments), or one 64-bit element as (low, high) words."""
    if bits == 64:
        (e,) = elems
        pair = b.bitcast(e, ir.VectorType(I32, 2))
        return [b.extract_element(pair, ir.Constant(I32, w)) for w in range(2)]
    if bits == 32:
        (e,) = elems
        return [e]
    word = None
    for q, e in enumerate(elems):
        wide = b.zext(e, I32)
        if q:
            wide = b.shl(wide, ir.Constant(I32, q * bits))
        word = wide if word is None else b.or_(word, wide)
    return [word]


def unpack_words(b: ir.IRBuilder, words: Sequence[ir.Value], bits: int, slots: int
                 ) -> List[ir.Value]:
    """The inverse of `pack_words`: per slot, an iN."""
    if bits == 64:
        pair = ir.Constant(ir.VectorType(I32, 2), ir.Undefined)
        for w, word in enumerate(words):
            pair = b.insert_element(pair, word, ir.Constant(I32, w))
        return [b.bitcast(pair, I64)]
    (word,) = words
    if bits == 32:
        return [word]
    out = []
    for q in range(slots):
        part = b.lshr(word, ir.Constant(I32, q * bits)) if q else word
        out.append(b.trunc(part, ir.IntType(bits)))
    return out


# ---- lane-dependent choice ---------------------------------------------------------------

class LaneSelect:
    """`table(x ^ M(lane))` with M linear in the lane bits, as a tree of selects: level j
    swaps entries x and x ^ m_j where lane bit j is set. Entries are built on demand and
    memoized, so tables shared by several lookups cost their selects once."""

    def __init__(self, b: ir.IRBuilder, lane_bit: Callable[[int], ir.Value],
                 masks: Sequence[int], table: Callable[[int], ir.Value]):
        self.b = b
        self.levels = [(j, m) for j, m in enumerate(masks) if m]
        self.lane_bit = lane_bit
        self.table = table
        self.memo: Dict[Tuple[int, int], ir.Value] = {}

    def __call__(self, x: int, level: Optional[int] = None) -> ir.Value:
        level = len(self.levels) if level is None else level
        key = (level, x)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        if level == 0:
            out = self.table(x)
        else:
            j, m = self.levels[level - 1]
            out = self.b.select(self.lane_bit(j), self(x ^ m, level - 1), self(x, level - 1))
        self.memo[key] = out
        return out


def _lane_linear(b: ir.IRBuilder, lane: ir.Value, masks: Sequence[int],
                 lane_bit: Callable[[int], ir.Value]) -> ir.Value:
    """XOR over set lane bits j of masks[j]. Bits that land on one bit move by a shift (bits
    with the same shift share one and/shift); anything else is a select."""
    by_shift: Dict[int, int] = {}
    terms = []
    for j, m in enumerate(masks):
        if not m:
            continue
        if m & (m - 1) == 0:
            s = m.bit_length() - 1 - j
            by_shift[s] = by_shift.get(s, 0) | (1 << j)
        else:
            terms.append(b.select(lane_bit(j), ir.Constant(I32, m), ir.Constant(I32, 0)))
    for s, sel in sorted(by_shift.items()):
        part = b.and_(lane, ir.Constant(I32, sel)) if sel != (1 << LANE_BITS) - 1 else lane
        if s > 0:
            part = b.shl(part, ir.Constant(I32, s))
        elif s < 0:
            part = b.lshr(part, ir.Constant(I32, -s))
        terms.insert(0, part)
    acc = None
    for t in terms:
        acc = t if acc is None else b.xor(acc, t)
    return acc if acc is not None else ir.Constant(I32, 0)


# ---- lowering ----------------------------------------------------------------------------

def lower_shuffle(ctx, sched: ShuffleSchedule, src_regs: Sequence[ir.Value],
                  lty: ir.Type) -> List[ir.Value]:
    """Run `sched` (from `schedule_shuffle`): one `shfl.sync.idx` per round and word, with
    the selects the lane-dependent parts need. Returns the destination registers."""
    b = ctx.builder
    lane = ctx.lane_id()
    bits = sched.elem_bits
    bit_cache: Dict[int, ir.Value] = {}

    def lane_bit(j: int) -> ir.Value:
        if j not in bit_cache:
            bit_cache[j] = b.icmp_unsigned("!=", b.and_(lane, ir.Constant(I32, 1 << j)),
                                           ir.Constant(I32, 0))
        return bit_cache[j]

    as_bits: Dict[int, ir.Value] = {}

    def element(reg: int) -> ir.Value:
        if reg not in as_bits:
            as_bits[reg] = to_bits(b, src_regs[reg], bits)
        return as_bits[reg]

    lane_values: Dict[Tuple[int, ...], ir.Value] = {}
    received: Dict[int, ir.Value] = {}
    words_cache: Dict[Tuple[Tuple[int, ...], int], List[ir.Value]] = {}
    for rnd in sched.rounds:
        slots = rnd.send_slots

        def words_at(x: int, slots=slots) -> List[ir.Value]:
            key = (slots, x)
            if key not in words_cache:
                words_cache[key] = pack_words(b, [element(x ^ s) for s in slots], bits)
            return words_cache[key]

        linear = rnd.src_lane.masks
        if linear not in lane_values:
            lane_values[linear] = _lane_linear(b, lane, linear, lane_bit)
        src_lane = lane_values[linear]
        if rnd.src_lane.const:
            src_lane = b.xor(src_lane, ir.Constant(I32, rnd.src_lane.const))
        got = []
        for w in range(sched.words):
            pick = LaneSelect(b, lane_bit, rnd.send.masks, lambda x, w=w: words_at(x)[w])
            got.append(ctx.shuffle_idx(pick(rnd.send.const), src_lane))
        for c, v in zip(rnd.recv_slots, unpack_words(b, got, bits, len(slots))):
            received[c] = v

    # Each lane files slot values under the register they are for: dst register r of lane l
    # is what arrived under r ^ D(l).
    fill = LaneSelect(b, lane_bit, sched.recv, lambda c: received[c])
    out: List[ir.Value] = []
    for reg in range(sched.dst_registers):
        if reg & sched.broadcast_mask:
            out.append(out[reg & ~sched.broadcast_mask])
        else:
            out.append(from_bits(b, fill(reg), lty))
    return out


def try_lower_shuffle(ctx, plan, src_ll, src_regs, dst_ll, lty) -> Optional[List[ir.Value]]:
    """The `warp_shuffle` path of `lower_convert_layout`; None when the plan does not fit."""
    sched = schedule_shuffle(plan, list(dst_ll.bases.get("register", [])), len(src_regs))
    if sched is None:
        return None
    return lower_shuffle(ctx, sched, src_regs, lty)
