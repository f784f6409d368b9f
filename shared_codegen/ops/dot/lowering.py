"""Lowering of register matrix products: `ttg.mma_v2` (mma.sync) and `ttg.dot_fma`.

mma_v2
------
One `mma.sync.aligned.m16n8kK.row.col` instruction multiplies a 16xK tile of A by a Kx8 tile of
B into a 16x8 tile of the accumulator; each of the warp's 32 lanes supplies fixed elements of
each tile (its *fragments*, PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16", and the
m16n8k8 / m16n8k32 sections beside it). The operand layouts (`DotOperandLayout` with
k_width = 32 / element bits, and the parent `NVMMADistributedLayout` v2) are built so that
their lane bases are exactly those fragments, and their register bases then enumerate the
fragment slots followed by the tile repeats. So the lowering is a lookup:

  Step 1. check that lane bases of a, b, acc equal the PTX fragment positions, and that every
          warp sees the same rows of a as of acc and the same columns of b (the warps broadcast
          along K);
  Step 2. group the accumulator's registers into 16x8 tiles (origin = coordinates with the
          lane and slot bits cleared);
  Step 3. for every K step and every tile, find by coordinates the registers of a, b and acc
          that hold each fragment slot (a register's coordinates are the constant
          `L(register)`; the lane/warp part is the same for all operands by Step 1);
  Step 4. pack the slots into 32-bit registers (two f16/bf16, four int8, one tf32) and emit
          the instruction as inline PTX, chaining the accumulator through the K steps.

Steps 1-3 are plain Python (`plan_mma_v2`), so tests can simulate the plan on the CPU against
the PTX fragment formulas below without a GPU.

dot_fma
-------
FMA operands give every thread the whole K extent of its accumulator rows (a) and columns (b),
so each accumulator register is a chain of K fused multiply-adds over registers found by
coordinates (`plan_dot_fma`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import F32, I32, LoweringError, _register_coords, llvm_type
from shared_codegen.ops.dot.definition import DotFmaOp, DotOp, MmaV2Op

Coords = Tuple[int, int]


# ---- PTX fragment tables --------------------------------------------------------------------
# Each function returns the (row, col) inside the instruction's tile of slot `e` of lane `lane`,
# written as in the PTX ISA tables: groupID = lane >> 2, threadID_in_group = lane % 4.

def _a_m16n8k16(lane: int, e: int) -> Coords:
    """A (16x16, .f16/.bf16), a0..a7: rows g / g+8, columns 2t + (i & 1), +8 for i >= 4."""
    g, t = lane >> 2, lane & 3
    return g + 8 * ((e >> 1) & 1), 2 * t + (e & 1) + 8 * (e >> 2)


def _b_m16n8k16(lane: int, e: int) -> Coords:
    """B (16x8, .f16/.bf16), b0..b3: rows 2t + (i & 1), +8 for i >= 2; column g."""
    g, t = lane >> 2, lane & 3
    return 2 * t + (e & 1) + 8 * (e >> 1), g


def _c_m16n8(lane: int, e: int) -> Coords:
    """C/D (16x8, .f32/.s32), c0..c3: row g for i < 2, g+8 otherwise; column 2t + (i & 1)."""
    g, t = lane >> 2, lane & 3
    return g + 8 * (e >> 1), 2 * t + (e & 1)


def _a_m16n8k8_tf32(lane: int, e: int) -> Coords:
    """A (16x8, .tf32), a0..a3: row g for a0, a2 and g+8 for a1, a3; column t, +4 for a2, a3."""
    g, t = lane >> 2, lane & 3
    return g + 8 * (e & 1), t + 4 * (e >> 1)


def _b_m16n8k8_tf32(lane: int, e: int) -> Coords:
    """B (8x8, .tf32), b0..b1: row t (b0) or t+4 (b1); column g."""
    g, t = lane >> 2, lane & 3
    return t + 4 * e, g


def _a_m16n8k32_s8(lane: int, e: int) -> Coords:
    """A (16x32, .s8/.u8), a0..a15: row g for i in [0, 4) or [8, 12), else g+8; column
    4t + (i & 3), +16 for i >= 8."""
    g, t = lane >> 2, lane & 3
    return g + 8 * ((e >> 2) & 1), 4 * t + (e & 3) + 16 * (e >> 3)


def _b_m16n8k32_s8(lane: int, e: int) -> Coords:
    """B (32x8, .s8/.u8), b0..b7: row 4t + (i & 3), +16 for i >= 4; column g."""
    g, t = lane >> 2, lane & 3
    return 4 * t + (e & 3) + 16 * (e >> 2), g


@dataclass(frozen=True)
class MmaShape:
    """One mma.sync variant: its PTX name, K, element counts and fragment tables."""

    ptx: str
    k: int
    per_reg: int               # a/b elements packed into one 32-bit register
    a_pos: Callable[[int, int], Coords]
    b_pos: Callable[[int, int], Coords]
    c_pos: Callable[[int, int], Coords] = _c_m16n8
    m: int = 16
    n: int = 8

    @property
    def a_slots(self) -> int:
        return self.m * self.k // 32

    @property
    def b_slots(self) -> int:
        return self.k * self.n // 32


MMA_SHAPES: Dict[Tuple[str, str], MmaShape] = {
    ("fp16", "fp32"): MmaShape("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16, 2,
                               _a_m16n8k16, _b_m16n8k16),
    ("fp16", "fp16"): MmaShape("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 16, 2,
                               _a_m16n8k16, _b_m16n8k16),
    ("bf16", "fp32"): MmaShape("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, 2,
                               _a_m16n8k16, _b_m16n8k16),
    ("fp32", "fp32"): MmaShape("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 8, 1,
                               _a_m16n8k8_tf32, _b_m16n8k8_tf32),
    ("i8", "i32"): MmaShape("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 32, 4,
                            _a_m16n8k32_s8, _b_m16n8k32_s8),
    ("u8", "i32"): MmaShape("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32", 32, 4,
                            _a_m16n8k32_s8, _b_m16n8k32_s8),
}


# ---- planning (pure Python) -----------------------------------------------------------------

@dataclass(frozen=True)
class MmaStep:
    """One instruction: the tensor registers feeding each 32-bit fragment register of a and b
    (low bits first), and the accumulator registers of slots c0..c3."""

    a: Tuple[Tuple[int, ...], ...]
    b: Tuple[Tuple[int, ...], ...]
    c: Tuple[int, ...]
    origin: Tuple[int, int, int]  # (m0, n0, k0) of the tile, register part only


def _xor(p: Coords, q: Coords) -> Coords:
    return p[0] ^ q[0], p[1] ^ q[1]


def _in_dim_point(ll, in_dim: str, index: int) -> Coords:
    out = (0, 0)
    for bit, vec in enumerate(ll.bases.get(in_dim, [])):
        if index >> bit & 1:
            out = _xor(out, (vec[0], vec[1]))
    return out


def _register_index(ll) -> Tuple[Dict[Coords, int], List[int]]:
    """coords -> the lowest register holding them, and per register its representative (the
    lowest register with the same coordinates: replicated registers share one value)."""
    first: Dict[Coords, int] = {}
    rep: List[int] = []
    for r, c in enumerate(_register_coords(ll)):
        c = (c[0], c[1])
        rep.append(first.setdefault(c, r))
    return first, rep


def _check_lanes(ll, pos: Callable[[int, int], Coords], what: str, expected: str) -> None:
    for lane in range(ll.in_dim_size("lane")):
        have, want = _in_dim_point(ll, "lane", lane), pos(lane, 0)
        if have != want:
            raise ValueError(f"{what}'s layout puts lane {lane} at {have}, but the mma.sync "
                             f"fragment needs {want}; expected {expected}")


def _check_warps(op_ll, acc_ll, keep: int, acc_dim: int, k_dim: int, what: str) -> None:
    """Each warp must hold the acc rows (a) / columns (b) it computes, for the whole of K."""
    op_w, acc_w = op_ll.bases.get("warp", []), acc_ll.bases.get("warp", [])
    if len(op_w) != len(acc_w):
        raise ValueError(f"{what} and acc are spread over different numbers of warps")
    for bit, (o, c) in enumerate(zip(op_w, acc_w)):
        if o[keep] != c[acc_dim] or o[k_dim]:
            raise ValueError(f"warp bit {bit} places {what} at {list(o)} but acc at {list(c)}:"
                             f" a warp must hold its accumulator's rows/columns for all of K")


def plan_mma_v2(a_ll, b_ll, c_ll, shape: MmaShape, mnk) -> Tuple[List[MmaStep], List[int]]:
    """The instructions that compute acc + a @ b for these layouts (Steps 1-3 of the module
    docstring), and per acc register the register whose result it takes. Raises ValueError
    when a layout does not match the mma.sync fragments."""
    m_size, n_size, k_size = mnk
    expected = "DotOperandLayout(k_width=32 // element bits) of the acc's NVMMADistributedLayout"
    _check_lanes(a_ll, shape.a_pos, "a", expected)
    _check_lanes(b_ll, shape.b_pos, "b", expected)
    _check_lanes(c_ll, shape.c_pos, "acc", "NVMMADistributedLayout(version=[2, 0])")
    _check_warps(a_ll, c_ll, keep=0, acc_dim=0, k_dim=1, what="a")
    _check_warps(b_ll, c_ll, keep=1, acc_dim=1, k_dim=0, what="b")
    a_at, _ = _register_index(a_ll)
    b_at, _ = _register_index(b_ll)
    c_at, c_rep = _register_index(c_ll)

    def find(table, coords, what):
        try:
            return table[coords]
        except KeyError:
            raise ValueError(f"no register of {what} holds element {coords} of the tile this "
                             f"thread computes; the layouts do not match mma.sync fragments") \
                from None

    # Step 2: tile origins, in the order their first register appears.
    origins: List[Coords] = []
    for r, c in enumerate(_register_coords(c_ll)):
        if c_rep[r] == r:
            o = (c[0] & ~(shape.m - 1), c[1] & ~(shape.n - 1))
            if o not in origins:
                origins.append(o)
    covered = set()
    steps: List[MmaStep] = []
    # Step 3, K outermost: consecutive instructions use different accumulators, so the
    # tensor cores pipeline them instead of waiting on each other's results.
    for k0 in range(0, k_size, shape.k):
        for m0, n0 in origins:
            c_regs = tuple(find(c_at, (m0 ^ shape.c_pos(0, e)[0], n0 ^ shape.c_pos(0, e)[1]),
                                "acc") for e in range(4))
            covered.update(c_regs)
            a_slots = [find(a_at, _xor((m0, k0), shape.a_pos(0, e)), "a")
                       for e in range(shape.a_slots)]
            b_slots = [find(b_at, _xor((k0, n0), shape.b_pos(0, e)), "b")
                       for e in range(shape.b_slots)]
            per = shape.per_reg
            steps.append(MmaStep(
                a=tuple(tuple(a_slots[i:i + per]) for i in range(0, len(a_slots), per)),
                b=tuple(tuple(b_slots[i:i + per]) for i in range(0, len(b_slots), per)),
                c=c_regs, origin=(m0, n0, k0)))
    missing = [r for r, rep in enumerate(c_rep) if rep == r and r not in covered]
    if missing and k_size:
        raise ValueError(f"acc registers {missing} are not part of any 16x8 mma tile")
    return steps, c_rep


@dataclass(frozen=True)
class FmaChain:
    """acc register `c` accumulates a[r] * b[s] for the (r, s) pairs of `ks`, K order."""

    c: int
    ks: Tuple[Tuple[int, int], ...]


def _full_register_index(ll) -> Tuple[Dict[tuple, int], List[int]]:
    """As `_register_index`, keyed by every coordinate (batch dims included)."""
    first: Dict[tuple, int] = {}
    rep: List[int] = []
    for r, c in enumerate(_register_coords(ll)):
        rep.append(first.setdefault(tuple(c), r))
    return first, rep


def plan_dot_fma(a_ll, b_ll, c_ll, k_size: int) -> Tuple[List[FmaChain], List[int]]:
    """Per unique acc register, the a and b registers of each k (ValueError on a mismatch).
    Rank 3 is a batch of products: a thread's a, b and acc registers share batch indices."""
    rank = len(c_ll.out_dims)
    m_dim, n_dim = rank - 2, rank - 1
    batch = tuple(range(rank - 2))
    for what, ll, keep, k_dim in (("a", a_ll, m_dim, n_dim), ("b", b_ll, n_dim, m_dim)):
        for in_dim in ("warp", "lane"):
            o_bases, c_bases = ll.bases.get(in_dim, []), c_ll.bases.get(in_dim, [])
            if len(o_bases) != len(c_bases):
                raise ValueError(f"{what} and acc are spread over different numbers of "
                                 f"{in_dim}s")
            for bit, (o, c) in enumerate(zip(o_bases, c_bases)):
                if o[keep] != c[keep] or o[k_dim] or any(o[d] != c[d] for d in batch):
                    why = ("a warp must hold its accumulator's rows/columns for all of K"
                           if in_dim == "warp" else "FMA operands must broadcast along K")
                    raise ValueError(f"{in_dim} bit {bit} places {what} at {list(o)} but acc "
                                     f"at {list(c)}: {why}")
    a_at, _ = _full_register_index(a_ll)
    b_at, _ = _full_register_index(b_ll)
    _, c_rep = _full_register_index(c_ll)
    chains = []
    for r, coords in enumerate(_register_coords(c_ll)):
        if c_rep[r] != r:
            continue
        bat, (m, n) = tuple(coords[:-2]), coords[-2:]
        try:
            ks = tuple((a_at[(*bat, m, k)], b_at[(*bat, k, n)]) for k in range(k_size))
        except KeyError as exc:
            raise ValueError(f"no operand register holds element {exc.args[0]} needed for acc "
                             f"element {tuple(coords)} of this thread") from None
        chains.append(FmaChain(r, ks))
    return chains, c_rep


# ---- emission -------------------------------------------------------------------------------

def _pack(ctx, values: Sequence[ir.Value], elem) -> ir.Value:
    """Step 4: one 32-bit fragment register from `values`, the first in the low bits."""
    b = ctx.builder
    if elem.bits == 32:
        # cvt.rna.tf32.f32 (PTX ISA 9.7.9.21) gives mma a well-defined tf32 input; the
        # interpreter rounds the same way (`round_to_tf32`).
        return ctx.inline_asm("cvt.rna.tf32.f32 $0, $1;", "=r,f", I32, [values[0]])
    # A <n x iK> vector bitcast to i32 becomes one `mov.b32 %r, {lo, hi}` (no shifts), and
    # LLVM folds it away entirely when the halves came from one 32-bit load.
    lane_ty = ir.IntType(elem.bits)
    vec = ir.Constant(ir.VectorType(lane_ty, len(values)), None)
    for i, v in enumerate(values):
        if v.type != lane_ty:
            v = b.bitcast(v, lane_ty)
        vec = b.insert_element(vec, v, ir.Constant(I32, i))
    return b.bitcast(vec, I32)


@lowering_rule(MmaV2Op)
def lower_mma_v2(op, ctx):
    a, bm, acc = op.operands
    a_ty, b_ty, c_ty = a.type, bm.type, acc.type
    shape = MMA_SHAPES[(a_ty.element.name, c_ty.element.name)]
    m_size, k_size = a_ty.shape
    n_size = b_ty.shape[1]
    try:
        steps, c_rep = plan_mma_v2(ctx.linear_layout(a_ty), ctx.linear_layout(b_ty),
                                   ctx.linear_layout(c_ty), shape, (m_size, n_size, k_size))
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    a_regs, b_regs, acc_regs = ctx.get(a), ctx.get(bm), ctx.get(acc)
    packed: Dict[tuple, ir.Value] = {}

    def fragment(which, regs, idx):
        key = (which, idx)
        if key not in packed:
            packed[key] = _pack(ctx, [regs[r] for r in idx], a_ty.element)
        return packed[key]

    if c_ty.element.bits == 16:
        return _lower_mma_v2_f16_acc(ctx, shape, steps, c_rep, fragment, a_regs, b_regs,
                                     acc_regs)
    c_lty = llvm_type(c_ty.element)
    out_constraint = "=f" if c_lty == F32 else "=r"
    constraints = ",".join([out_constraint] * 4 + ["r"] * 6 + ["0", "1", "2", "3"])
    asm = f"{shape.ptx} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, " \
          f"{{$10, $11, $12, $13}};"
    ret = ir.LiteralStructType([c_lty] * 4)
    current: Dict[int, ir.Value] = {}
    for step in steps:
        args = [fragment("a", a_regs, idx) for idx in step.a]
        args += [fragment("b", b_regs, idx) for idx in step.b]
        args += [current.get(r, acc_regs[r]) for r in step.c]
        res = ctx.inline_asm(asm, constraints, ret, args)
        for i, r in enumerate(step.c):
            current[r] = ctx.builder.extract_value(res, i)
    return [[current.get(c_rep[r], acc_regs[r]) for r in range(len(acc_regs))]]


def _lower_mma_v2_f16_acc(ctx, shape, steps, c_rep, fragment, a_regs, b_regs, acc_regs):
    """The f16-accumulator form (PTX ISA 9.7.14.5.8, m16n8k16 .f16): C and D are two 32-bit
    registers, each holding the pair (c0, c1) / (c2, c3) as f16x2, low half first."""
    b = ctx.builder
    half2 = ir.VectorType(ir.HalfType(), 2)
    constraints = ",".join(["=r"] * 2 + ["r"] * 6 + ["0", "1"])
    asm = f"{shape.ptx} {{$0, $1}}, {{$2, $3, $4, $5}}, {{$6, $7}}, {{$8, $9}};"
    ret = ir.LiteralStructType([I32, I32])
    current: Dict[int, ir.Value] = {}
    for step in steps:
        args = [fragment("a", a_regs, idx) for idx in step.a]
        args += [fragment("b", b_regs, idx) for idx in step.b]
        c = [current.get(r, acc_regs[r]) for r in step.c]
        for lo, hi in ((c[0], c[1]), (c[2], c[3])):
            vec = b.insert_element(ir.Constant(half2, None), lo, ir.Constant(I32, 0))
            vec = b.insert_element(vec, hi, ir.Constant(I32, 1))
            args.append(b.bitcast(vec, I32))
        res = ctx.inline_asm(asm, constraints, ret, args)
        for j in range(2):
            pair = b.bitcast(b.extract_value(res, j), half2)
            for i in range(2):
                current[step.c[2 * j + i]] = b.extract_element(pair, ir.Constant(I32, i))
    return [[current.get(c_rep[r], acc_regs[r]) for r in range(len(acc_regs))]]


def _widen(ctx, x, src, dst):
    if src == dst:
        return x
    b = ctx.builder
    if dst.is_floating():
        from shared_codegen.ops.arith.lowering import convert_float
        return convert_float(ctx, [x], src, dst)[0]
    lty = llvm_type(dst)
    return b.sext(x, lty) if src.is_int_signed() else b.zext(x, lty)


@lowering_rule(DotFmaOp)
def lower_dot_fma(op, ctx):
    a, bm, acc = op.operands
    elem, c_elem = a.type.element, acc.type.element
    try:
        chains, c_rep = plan_dot_fma(ctx.linear_layout(a.type), ctx.linear_layout(bm.type),
                                     ctx.linear_layout(acc.type), a.type.shape[-1])
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    a_regs, b_regs, acc_regs = ctx.get(a), ctx.get(bm), ctx.get(acc)
    wide: Dict[tuple, ir.Value] = {}

    def operand(which, regs, r):
        if (which, r) not in wide:
            wide[(which, r)] = _widen(ctx, regs[r], elem, c_elem)
        return wide[(which, r)]

    b = ctx.builder
    lty = llvm_type(c_elem)
    if c_elem.is_floating():
        from shared_codegen.ops.arith.lowering import _suffix
        fma_name = f"llvm.fma.{_suffix(lty)}"
    out: Dict[int, ir.Value] = {}
    for chain in chains:
        total = acc_regs[chain.c]
        for ra, rb in chain.ks:
            x, y = operand("a", a_regs, ra), operand("b", b_regs, rb)
            if c_elem.is_floating():
                total = ctx.intrinsic(fma_name, lty, [x, y, total])
            else:
                total = b.add(b.mul(x, y), total)
        out[chain.c] = total
    return [[out[c_rep[r]] for r in range(len(acc_regs))]]


@lowering_rule(DotOp)
def lower_tile_dot(op, ctx):
    # tt.dot has no layouts of its own; the tile layout pass always replaces it.
    raise LoweringError("tt.dot reached the lowering: the tile layout pass (dot acceleration) "
                        "must rewrite it into warp_group_dot, mma_v2 or dot_fma first", op)


__all__ = ["MMA_SHAPES", "MmaShape", "MmaStep", "FmaChain", "plan_mma_v2", "plan_dot_fma",
           "lower_mma_v2", "lower_dot_fma"]
