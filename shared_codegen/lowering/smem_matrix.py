"""ldmatrix / stmatrix: when a register layout can move through shared memory as 8x8 b16
matrices, and the emitter. Used by `ttg.local_load` / `ttg.local_store`
(`ops/shared_memory/lowering.py`) and by convert_layout's scratch round trip (`xthread_swizzle.py`).

The instructions (PTX ISA 9.7.14.5.15 ldmatrix, sm_75+; 9.7.14.5.16 stmatrix, sm_90+):
`{ld,st}matrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` moves one, two or four 8x8
matrices of 16-bit elements per warp. Lane `8i + j` gives the shared address of row `j` of
matrix `i` (16 contiguous bytes, 16-byte aligned; lanes past `8 * count` are ignored), and
lane `T`'s 32-bit word `i` holds matrix `i`'s elements

    plain:   (row T / 4, column 2 (T % 4) + e)      e = 0 in the low half, 1 in the high
    .trans:  (row 2 (T % 4) + e, column T / 4)

Both sides are stated as offset layouts: for every register / lane / warp bit, the offset (in
elements) it adds to the element's shared-memory address. The instruction fits when

    plain:   offsets of (pair register, lane 0, lane 1) = 1, 2, 4   the 16 bytes of a row
             offsets of (lane 2, lane 3, lane 4)                    pick the row
    .trans:  offsets of (lane 2, lane 3, lane 4) = 1, 2, 4
             offsets of (pair register, lane 0, lane 1)             pick the row

where the pair register is the register bit told apart by `e` (the two halves of one word),
and up to two more registers tell the matrices of one instruction apart; any remaining
registers are separate instructions. Every offset that picks a row, a matrix, a warp or an
instruction must be a multiple of 8 elements, so each row starts on a 16-byte boundary.

Worked example: the mma m16n8k16 A operand (`DotOperandLayout(0, mma v2, k_width=2)`) over
a row-major [M, K] fp16 tile has register bits (k+1, m+8, k+8, ...) and lane bits (k+2, k+4,
m+1, m+2, m+4). With K contiguous, k+1, k+2, k+4 are offsets 1, 2, 4 (a row of 8 k's), the
lanes m+1..m+4 pick rows, and registers m+8, k+8 pick the matrices: one `ldmatrix.x4` loads
the whole 16x16 fragment. The B operand over a row-major [K, N] tile has lanes (k+2, k+4, n+1,
n+2, n+4): the contiguous run is along N, so it is `.trans`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from llvmlite import ir

from shared_codegen.lowering.context import I32, VOID
from shared_codegen.lowering.cross_thread import LANE, REGISTER, WARP, _i32, bases
from shared_codegen.lowering.xthread_shuffle import from_bits, pack_words, to_bits, unpack_words

ROW_ELEMENTS = 8            # one 16-byte row of an 8x8 b16 matrix
STMATRIX_ARCH, LDMATRIX_ARCH = 90, 75
ROW_BITS = [1, 2, 4]        # the offsets that make one row contiguous


@dataclass(frozen=True)
class Access:
    round: int                 # which scratch round (the reps bits of its offset)
    offset: int                # constant offset in the scratch, in elements
    regs: Tuple[int, ...]      # plain: the vector's registers in offset order; matrix:
    #                            2 per matrix (word i = regs[2i] low half, regs[2i+1] high)
    full_offset: int           # offset with the reps bits (names the registers on the dst)


@dataclass(frozen=True)
class SidePlan:
    kind: str                  # "plain" or "matrix"
    accesses: Tuple[Access, ...]
    thread_ll: object          # 1-D layout of this thread's offset part (lane, warp)
    thread_mask: int
    width: int                 # plain: elements per access; matrix: matrices (1, 2, 4)
    trans: bool = False

    def instruction(self, op: str, bits: int) -> str:
        """The PTX spelling this side emits (compare with the plan's)."""
        if self.kind == "matrix":
            return f"{op}matrix{'.trans' if self.trans else ''}.x{self.width}.b16"
        total = self.width * bits
        if total > 32:
            return f"{op}.shared.v{total // 32}.b32"
        return f"{op}.shared.b{total}"


def arch_of(ctx) -> int:
    """The SM number of the context's target ("sm_90a" -> 90)."""
    target = getattr(ctx, "target", "sm_90a")
    digits = "".join(ch for ch in target.split("_")[-1] if ch.isdigit())
    return int(digits) if digits else 0


# ---- planning, in pure Python ----------------------------------------------------------------

def matrix_side(off_ll, trans: bool, scratch_log2: Optional[int] = None,
                pair: Optional[int] = None, max_matrices: int = 4) -> Optional[SidePlan]:
    """The ld/stmatrix accesses for the offset layout `off_ll` (register / lane / warp bit ->
    element offset), or None when the fragment does not fit (see the module docstring).

    `pair` is the register bit held in the two halves of a word (default: the first
    non-broadcast register, the planner's convention). `scratch_log2` bounds one round of a
    scratch buffer (offsets above it are rounds, which only registers may carry); None means
    one buffer holds everything."""
    from shared_codegen.layouts import LinearLayout

    reg_off = [v[0] for v in bases(off_ll, REGISTER)]
    lane_off = [v[0] for v in bases(off_ll, LANE)]
    warp_off = [v[0] for v in bases(off_ll, WARP)]
    # A zero offset is a broadcast bit (the shared layout is injective on the view).
    real = [i for i, o in enumerate(reg_off) if o]
    if len(lane_off) != 5 or not all(lane_off) or not real:
        return None
    r0 = real[0] if pair is None else pair
    if r0 not in real:
        return None
    if trans:
        row, addr = lane_off[2:5], [reg_off[r0]] + lane_off[0:2]
    else:
        row, addr = [reg_off[r0]] + lane_off[0:2], lane_off[2:5]
    if row != ROW_BITS:
        return None
    round_log2 = 64 if scratch_log2 is None else scratch_log2
    # The matrices of one instruction are told apart by two more registers. They must be in
    # the same round (no reps bits: the lane gives their address), so registers that are
    # rounds go to the outer loop even where the plan counted them as matrices.
    rest = [i for i in real if i != r0]
    limit = max(0, max_matrices.bit_length() - 1)
    mats = [i for i in rest if not reg_off[i] >> round_log2][:limit]
    outer = [i for i in rest if i not in mats]
    lane_addr = addr + [reg_off[m] for m in mats] + [0] * (2 - len(mats))
    low = (1 << round_log2) - 1
    # Every row must start on a 16-byte boundary, inside this round's buffer.
    thread_parts = lane_addr + warp_off
    if any(o % ROW_ELEMENTS for o in thread_parts + [reg_off[o] for o in outer]):
        return None
    if any(o >> round_log2 for o in thread_parts):
        return None
    thread_ll = LinearLayout({REGISTER: [], LANE: [(o,) for o in lane_addr],
                              WARP: [(o,) for o in warp_off]},
                             list(off_ll.out_dim_sizes.items()), require_surjective=False)
    mask = 0
    for o in thread_parts:
        mask |= o
    accesses = []
    for k in range(1 << len(outer)):
        reg, off = 0, 0
        for j, bit in enumerate(outer):
            if k >> j & 1:
                reg |= 1 << bit
                off ^= reg_off[bit]
        regs = []
        for i in range(1 << len(mats)):
            r = reg
            for j, bit in enumerate(mats):
                if i >> j & 1:
                    r |= 1 << bit
            regs += [r, r | 1 << r0]
        accesses.append(Access(off >> round_log2, off & low, tuple(regs), off))
    return SidePlan("matrix", tuple(accesses), thread_ll, mask, 1 << len(mats), trans)


def find_matrix_side(off_ll) -> Optional[SidePlan]:
    """Any fit of the fragment to `off_ll`, plain or `.trans`, trying each register as the
    pair (first non-broadcast first); the most matrices per instruction wins. (At most one
    orientation can fit: they need 1, 2, 4 from disjoint bits.)"""
    reg_off = [v[0] for v in bases(off_ll, REGISTER)]
    best = None
    for trans in (False, True):
        for pair in (i for i, o in enumerate(reg_off) if o):
            side = matrix_side(off_ll, trans, pair=pair)
            if side is not None and (best is None or side.width > best.width):
                best = side
    return best


def broadcast_mask(ll) -> int:
    """Register bits with a zero basis (in a register layout or its offset layout): those
    registers copy the one with the bits clear."""
    return sum(1 << i for i, v in enumerate(bases(ll, REGISTER)) if not any(v))


# ---- emission ------------------------------------------------------------------------------

def address(b, base, thread_off: ir.Value, const_off: int, thread_mask: int, st,
            xor: Optional[ir.Value] = None):
    """`base + (thread_off ^ const_off ^ xor)` elements of type `st`.

    Without a runtime `xor`, the constant's bits that no thread bit can meet are added after
    the thread's address (`base + (thread_off ^ hit) + free`): every register group of one
    thread then shares one address register and its constant becomes the instruction's
    immediate offset. Folding them into the index instead (`thread_off | const`) gives each
    group its own 64-bit address, loop-invariant values that LLVM hoists out of loops and
    that ptxas then spills where registers are scarce (32 of them for a 64 x 128 fp32 tile)."""
    if xor is not None:
        idx = b.xor(thread_off, _i32(const_off)) if const_off else thread_off
        return b.gep(base, [b.xor(idx, xor)], source_etype=st)
    hit, free = const_off & thread_mask, const_off & ~thread_mask
    idx = b.xor(thread_off, _i32(hit)) if hit else thread_off
    ptr = b.gep(base, [idx], source_etype=st)
    return b.gep(ptr, [_i32(free)], source_etype=st) if free else ptr


def intrinsic_name(op: str, side: SidePlan) -> str:
    """LLVM's NVPTX intrinsic for `op` ("ld" / "st") of this side's width and orientation."""
    return (f"llvm.nvvm.{op}matrix.sync.aligned.m8n8.x{side.width}"
            f"{'.trans' if side.trans else ''}.b16.p3")


def store_matrix(ctx, side: SidePlan, acc: Access, addr, regs: Sequence[ir.Value]) -> None:
    """stmatrix of `acc`'s registers (values of any 16-bit type) at the lane's row `addr`."""
    b = ctx.builder
    words = []
    for i in range(side.width):
        pair = [to_bits(b, regs[r], 16) for r in acc.regs[2 * i: 2 * i + 2]]
        words += pack_words(b, pair, 16)
    ctx.intrinsic(intrinsic_name("st", side), VOID, [addr] + words)


def load_matrix(ctx, side: SidePlan, acc: Access, addr, lty: ir.Type) -> Dict[int, ir.Value]:
    """ldmatrix at the lane's row `addr`; returns {register: value of type `lty`}."""
    b = ctx.builder
    n = side.width
    ret = I32 if n == 1 else ir.LiteralStructType([I32] * n)
    got = ctx.intrinsic(intrinsic_name("ld", side), ret, [addr])
    out = {}
    for i in range(n):
        word = got if n == 1 else b.extract_value(got, i)
        lo, hi = unpack_words(b, [word], 16, 2)
        out[acc.regs[2 * i]] = from_bits(b, lo, lty)
        out[acc.regs[2 * i + 1]] = from_bits(b, hi, lty)
    return out


def gather_registers(by_register: Dict[int, ir.Value], ll) -> List[ir.Value]:
    """Every register of the layout from the loaded ones (broadcast registers are copies)."""
    bmask = broadcast_mask(ll)
    n = 1 << len(bases(ll, REGISTER))
    return [by_register[r & ~bmask] for r in range(n)]


__all__ = ["Access", "SidePlan", "ROW_ELEMENTS", "STMATRIX_ARCH", "LDMATRIX_ARCH", "arch_of",
           "matrix_side", "find_matrix_side", "broadcast_mask", "address", "intrinsic_name",
           "store_matrix", "load_matrix", "gather_registers"]
