"""Lowering of `ttng.warp_group_dot` (wgmma.mma_async, sm_90a) and `ttng.warp_group_dot_wait`.

One `wgmma.mma_async.sync.aligned.m64nNkK` multiplies a 64xK tile of A by a KxN tile of B into
a 64xN accumulator tile held by the 128 threads of a warpgroup (PTX ISA 9.7.15.5). A comes
from registers or, like B, from shared memory through a 64-bit *matrix descriptor*; the
instruction runs asynchronously until `wgmma.commit_group` + `wgmma.wait_group` retire it.

  Step 1. Accumulator (`plan_acc`): the acc layout's lane and first two warp bases must be the
          PTX fragment of D (PTX ISA 9.7.15.5.1.1.1, Figure 149: lane -> row g = lane / 4,
          columns 2t, 2t + 1 with t = lane % 4; warp w of the warpgroup -> rows 16w), so its
          registers enumerate, per 64xN tile, d0 .. d(N/2 - 1) found by coordinates. Further
          warp bits place whole warpgroups along M or N.
  Step 2. A in registers (`plan_a_registers`): lanes must be the A fragment (Figures 148, 150,
          152, the same per-warp pattern as mma.sync's m16n8kK A), registers found by
          coordinates and packed four per instruction into 32-bit registers.
  Step 3. Shared operands (`plan_smem_operand`): the shared layout gives each coordinate bit a
          byte offset (swizzle included). Undoing the hardware swizzle (a GF(2)-linear XOR of
          address bits [4, 7) with [7, 10)) must leave one of the canonical layouts of PTX ISA
          9.7.15.5.1.2.1.3 (K- or MN-major, interleaved or 32/64/128-byte swizzled), whose two
          strides (leading / stride byte offset) are read off the bits. Every element of every
          instruction tile is then checked against a model of the hardware's address
          generation (`hardware_offsets`), so a layout wgmma cannot read is an error here,
          never wrong numbers on the GPU. The descriptor (PTX ISA 9.7.15.5.1.2.2 "Matrix
          Descriptor Format"): start address >> 4 in bits 0-13, leading byte offset >> 4 in
          16-29, stride byte offset >> 4 in 32-45, swizzle mode in 62-63 (1 = 128B, 2 = 64B,
          3 = 32B).
  Step 4. Emission: `wgmma.fence` (register operands are about to be read asynchronously),
          one `wgmma.mma_async` per (tile, K step) with the accumulator registers as tied
          operands and scale-d = use_acc for the first K step, `wgmma.commit_group`, and for
          a synchronous op `wgmma.wait_group 0` that takes every accumulator register as a
          tied operand, so no instruction can read them before the wait.

Steps 1-3 are plain Python, so tests simulate the plan on the CPU against the PTX formulas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import SharedMemoryType, TensorType
from shared_codegen.layouts.distributed import DotOperandLayout
from shared_codegen.lowering.context import F32, I32, LoweringError, _register_coords
from shared_codegen.ops.dot.lowering import (MMA_SHAPES, _check_warps, _in_dim_point, _pack,
                                             _register_index)
from shared_codegen.ops.wgmma.definition import (PTX_TYPES, WARPGROUP_ROWS, WarpGroupDotOp,
                                                 WarpGroupDotWaitOp, wgmma_instr_k)

Coords = Tuple[int, int]
I64 = ir.IntType(64)
SWIZZLE_MODES = (128, 64, 32, 0)
SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}


# ---- PTX fragment formulas ----------------------------------------------------------------------

def acc_pos(lane: int, j: int) -> Coords:
    """(row, col) of d_j of `lane` inside warp 0's 16 rows of an m64nN tile (Figure 149):
    d(4i)..d(4i+3) cover columns 8i .. 8i+7; rows g and g+8."""
    g, t = lane >> 2, lane & 3
    return g + 8 * ((j >> 1) & 1), 8 * (j >> 2) + 2 * t + (j & 1)


def a_shape(elem_bits: int):
    """The mma.sync shape whose A fragment is wgmma's per-warp A fragment (same figures)."""
    return MMA_SHAPES[{16: ("fp16", "fp32"), 32: ("fp32", "fp32"), 8: ("i8", "i32")}[elem_bits]]


def swizzle(addr, mode: int):
    """The hardware's swizzle of a byte address (an involution): bits [4, 4 + b) ^= bits
    [7, 7 + b), b = log2(mode / 16). Works on ints and numpy arrays."""
    if not mode:
        return addr
    mask = mode // 16 - 1
    return addr ^ (((addr >> 7) & mask) << 4)


# ---- Step 1: accumulator ------------------------------------------------------------------------

@dataclass(frozen=True)
class AccTile:
    origin: Coords                # register part of the tile's (m0, n0)
    regs: Tuple[int, ...]         # acc register of d0, d1, ... (PTX order)


def _check_acc_threads(c_ll) -> None:
    for lane in range(c_ll.in_dim_size("lane")):
        have, want = _in_dim_point(c_ll, "lane", lane), acc_pos(lane, 0)
        if have != want:
            raise ValueError(f"acc's layout puts lane {lane} at {have}, but the wgmma "
                             f"accumulator fragment needs {want}; expected "
                             f"NVMMADistributedLayout(version=[3, 0])")
    warps = c_ll.bases.get("warp", [])
    if len(warps) < 2 or tuple(warps[0]) != (16, 0) or tuple(warps[1]) != (32, 0):
        raise ValueError(f"the 4 warps of a warpgroup must hold rows 16w of the 64-row tile; "
                         f"acc's warp bases are {[list(w) for w in warps]}")


def plan_acc(c_ll, instr_n: int) -> Tuple[List[AccTile], List[int]]:
    """Per 64 x instr_n tile of this thread, its accumulator registers in d order; and per acc
    register its representative (replicated registers share one value)."""
    _check_acc_threads(c_ll)
    c_at, c_rep = _register_index(c_ll)
    tiles: List[AccTile] = []
    seen = set()
    for r, c in enumerate(_register_coords(c_ll)):
        if c_rep[r] != r:
            continue
        origin = (c[0] & ~(WARPGROUP_ROWS - 1), c[1] & ~(instr_n - 1))
        if origin in seen:
            continue
        seen.add(origin)
        regs = []
        for j in range(instr_n // 2):
            dm, dn = acc_pos(0, j)
            key = (origin[0] ^ dm, origin[1] ^ dn)
            if key not in c_at:
                raise ValueError(f"no acc register holds element {key} of the 64x{instr_n} "
                                 f"tile at {origin}; the layout does not match wgmma")
            regs.append(c_at[key])
        tiles.append(AccTile(origin, tuple(regs)))
    return tiles, c_rep


def warpgroup_offsets(c_ll) -> List[Coords]:
    """(m, n) offset of each warp bit above the warpgroup's own two."""
    return [(w[0], w[1]) for w in c_ll.bases.get("warp", [])[2:]]


# ---- Step 2: A in registers ---------------------------------------------------------------------

def plan_a_registers(a_ll, c_ll, elem_bits: int, tile_m0: int, k0: int):
    """The a registers feeding the four 32-bit A registers of the instruction at (m0, k0)."""
    shape = a_shape(elem_bits)
    for lane in range(a_ll.in_dim_size("lane")):
        have, want = _in_dim_point(a_ll, "lane", lane), shape.a_pos(lane, 0)
        if have != want:
            raise ValueError(f"a's layout puts lane {lane} at {have}, but the wgmma A fragment "
                             f"needs {want}; expected DotOperandLayout(0, acc layout, "
                             f"k_width=32 // element bits)")
    _check_warps(a_ll, c_ll, keep=0, acc_dim=0, k_dim=1, what="a")
    a_at, _ = _register_index(a_ll)
    slots = []
    for e in range(shape.a_slots):
        pm, pk = shape.a_pos(0, e)
        key = (tile_m0 ^ pm, k0 ^ pk)
        if key not in a_at:
            raise ValueError(f"no register of a holds element {key}; the layouts do not match "
                             f"the wgmma A fragment")
        slots.append(a_at[key])
    per = shape.per_reg
    return tuple(tuple(slots[i:i + per]) for i in range(0, len(slots), per))


# ---- Step 3: shared-memory descriptors ----------------------------------------------------------

@dataclass(frozen=True)
class SmemPlan:
    """How wgmma reads one shared operand: canonical form and the descriptor's constant part."""

    swizzle: int                  # 0, 32, 64 or 128 bytes
    k_major: bool
    lbo: int                      # leading dimension byte offset
    sbo: int                      # stride dimension byte offset
    itemsize: int

    @property
    def atom_bytes(self) -> int:
        """The alignment the view's base needs: the swizzle pattern repeats every 8 rows."""
        return 8 * self.swizzle if self.swizzle else 16

    def descriptor_hi(self) -> int:
        """Descriptor bits above the start address (PTX ISA 9.7.15.5.1.2.2)."""
        return ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | \
            (SWIZZLE_CODE[self.swizzle] << 62)


def hardware_offsets(plan: SmemPlan, start: int, mn: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Byte addresses wgmma reads for elements (mn, k) of an instruction tile whose descriptor
    starts at `start`: the canonical layouts of PTX ISA 9.7.15.5.1.2.1.3 in bytes (T elements
    per 16 bytes), then the swizzle."""
    s, w = plan.itemsize, plan.swizzle
    t = 16 // s
    if plan.k_major:
        if w:   # ((8, m), (T, 2)) : ((W, SBO), (1, T)), rows of one swizzle width
            off = (mn % 8) * w + (mn // 8) * plan.sbo + k * s
        else:   # ((8, m), (T, 2)) : ((16, SBO), (1, LBO)), 8x16-byte core matrices
            off = (mn % 8) * 16 + (mn // 8) * plan.sbo + (k % t) * s + (k // t) * plan.lbo
    else:
        if w:   # ((T, W/16, m), (8, k)) : ((1, T, LBO), (W, SBO))
            row = w // s
            off = (mn % row) * s + (mn // row) * plan.lbo + (k % 8) * w + (k // 8) * plan.sbo
        else:   # ((T, 1, m), (8, k)) : ((1, T, SBO), (16, LBO))
            off = (mn % t) * s + (mn // t) * plan.sbo + (k % 8) * 16 + (k // 8) * plan.lbo
    return swizzle(start + off, w)


def _xor_table(bits: Sequence[int]) -> np.ndarray:
    out = np.zeros(1 << len(bits), dtype=np.int64)
    for j, v in enumerate(bits):
        out[1 << j:2 << j] = out[:1 << j] ^ v
    return out


def _bit(bits: Sequence[int], size: int, default: int) -> int:
    """The offset of the coordinate bit worth `size`, or `default` when the tile is smaller
    (the hardware never uses that stride then)."""
    j = size.bit_length() - 1
    return bits[j] if j < len(bits) and size & (size - 1) == 0 else default


def _candidates(cm, ck, itemsize, instr_mn, instr_k):
    t = 16 // itemsize
    k_major = ck[:1] == [itemsize]
    if not k_major and cm[:1] != [itemsize]:
        return
    for w in SWIZZLE_MODES:
        u_mn = [swizzle(v, w) for v in cm]
        u_k = [swizzle(v, w) for v in ck]
        if k_major and w:
            lbo, sbo = 16, _bit(u_mn, 8, 8 * w)
        elif k_major:
            lbo, sbo = _bit(u_k, t, 0), _bit(u_mn, 8, 0)
        elif w:
            lbo, sbo = _bit(u_mn, w // itemsize, 0), _bit(u_k, 8, 0)
        else:
            lbo, sbo = _bit(u_k, 8, 0), _bit(u_mn, t, 0)
        yield SmemPlan(w, k_major, lbo, sbo, itemsize)


def plan_smem_operand(bits_mn: Sequence[int], bits_k: Sequence[int], itemsize: int,
                      instr_mn: int, instr_k: int, origins: Sequence[Coords],
                      what: str) -> SmemPlan:
    """The descriptor form under which wgmma reads, for every instruction tile at `origins`
    ((mn0, k0) pairs), exactly the bytes the layout puts there. `bits_*` are the byte offsets
    of each coordinate bit of the view (MN dim, K dim). ValueError when no form does."""
    bits_mn, bits_k = [int(v) for v in bits_mn], [int(v) for v in bits_k]
    l_mn, l_k = _xor_table(bits_mn), _xor_table(bits_k)
    mn, k = np.meshgrid(np.arange(instr_mn), np.arange(instr_k), indexing="ij")
    tried = []
    for plan in _candidates(bits_mn, bits_k, itemsize, instr_mn, instr_k):
        ok = max(plan.lbo, plan.sbo) < (1 << 18) and not (plan.lbo | plan.sbo) & 15
        for mn0, k0 in origins if ok else ():
            start = swizzle(int(l_mn[mn0] ^ l_k[k0]), plan.swizzle)
            if start & 15 or not np.array_equal(hardware_offsets(plan, start, mn, k),
                                                l_mn[mn0 + mn] ^ l_k[k0 + k]):
                ok = False
                break
        if ok:
            return plan
        tried.append(plan.swizzle)
    major = "K" if bits_k[:1] == [itemsize] else ("M/N" if bits_mn[:1] == [itemsize] else None)
    if major is None:
        raise ValueError(f"wgmma cannot read {what}: neither K nor M/N is contiguous in its "
                         f"shared layout")
    raise ValueError(f"wgmma cannot read {what} ({major}-major): its shared layout is none of "
                     f"the wgmma canonical layouts (interleaved or 32/64/128-byte swizzled, "
                     f"PTX ISA 9.7.15.5.1.2); use an NVMMASharedLayout with "
                     f"swizzle_byte_width 32, 64 or 128 whose swizzled dim is "
                     f"{major.split('/')[0]}")


def smem_start(plan_bits, plan: SmemPlan, mn0: int, k0: int) -> int:
    """Descriptor start offset (bytes from the view base) of the tile at (mn0, k0)."""
    bits_mn, bits_k = plan_bits
    off = 0
    for j, v in enumerate(bits_mn):
        if mn0 >> j & 1:
            off ^= v
    for j, v in enumerate(bits_k):
        if k0 >> j & 1:
            off ^= v
    return swizzle(off, plan.swizzle)


def operand_bits(ty: SharedMemoryType, k_dim: int) -> Tuple[List[int], List[int]]:
    """Byte offset of each coordinate bit of a shared view: (MN dim bits, K dim bits)."""
    from shared_codegen.ops.shared_memory.definition import offset_map
    bits = offset_map(ty).linear_bits()
    if bits is None:
        raise ValueError(f"a {list(ty.shape)} view with a non-power-of-two buffer stride cannot "
                         f"be a wgmma operand; index the buffer dim first")
    s = ty.element.itemsize
    return [v * s for v in bits[1 - k_dim]], [v * s for v in bits[k_dim]]


# ---- the whole op -------------------------------------------------------------------------------

@dataclass(frozen=True)
class WgmmaStep:
    tile: int                                  # index into the acc tiles
    k0: int
    a_regs: Optional[Tuple[Tuple[int, ...], ...]]
    a_start: Optional[int]                     # bytes from a's view base (register part)
    b_start: int


@dataclass
class WgmmaPlan:
    tiles: List[AccTile]
    c_rep: List[int]
    steps: List[WgmmaStep]
    a: Optional[SmemPlan]
    b: SmemPlan
    a_warp: List[int]     # per warpgroup bit: start offset added to a's descriptors
    b_warp: List[int]


def plan_wgmma(a_ty, b_ty, c_ty, a_ll, c_ll) -> WgmmaPlan:
    """Steps 1-3 for `acc + a @ b` (a_ll None when a is in shared memory)."""
    instr_n = c_ty.layout.instr_shape[1]
    elem = a_ty.element
    instr_k = wgmma_instr_k(elem)
    k_size = a_ty.shape[1]
    tiles, c_rep = plan_acc(c_ll, instr_n)
    wg = warpgroup_offsets(c_ll)
    combos = [(0, 0)]
    for dm, dn in wg:
        combos += [(m ^ dm, n ^ dn) for m, n in combos]
    b_bits = operand_bits(b_ty, 0)
    b_origins = [(t.origin[1] ^ dn, k0) for t in tiles for _, dn in combos
                 for k0 in range(0, k_size, instr_k)]
    b_plan = plan_smem_operand(*b_bits, elem.itemsize, instr_n, instr_k, b_origins, "b")
    a_plan, a_bits = None, None
    if isinstance(a_ty, SharedMemoryType):
        a_bits = operand_bits(a_ty, 1)
        a_origins = [(t.origin[0] ^ dm, k0) for t in tiles for dm, _ in combos
                     for k0 in range(0, k_size, instr_k)]
        a_plan = plan_smem_operand(*a_bits, elem.itemsize, WARPGROUP_ROWS, instr_k, a_origins,
                                   "a")
    steps = []
    for i, t in enumerate(tiles):
        m0, n0 = t.origin
        for k0 in range(0, k_size, instr_k):
            a_regs = plan_a_registers(a_ll, c_ll, elem.bits, m0, k0) if a_plan is None else None
            a_start = smem_start(a_bits, a_plan, m0, k0) if a_plan else None
            steps.append(WgmmaStep(i, k0, a_regs, a_start,
                                   smem_start(b_bits, b_plan, n0, k0)))
    a_warp = [smem_start(a_bits, a_plan, dm, 0) for dm, _ in wg] if a_plan else []
    b_warp = [smem_start(b_bits, b_plan, dn, 0) for _, dn in wg]
    return WgmmaPlan(tiles, c_rep, steps, a_plan, b_plan, a_warp, b_warp)


# ---- Step 4: emission ---------------------------------------------------------------------------

def _asm(ctx, text: str, constraints: str = "", ret=None, args=()):
    return ctx.inline_asm(text, constraints, ret or ir.VoidType(), list(args), side_effects=True)


def _warp_part(ctx, offsets: List[int]) -> Optional[ir.Value]:
    """XOR of the warpgroup bits' start offsets for this thread's warpgroup (None if none)."""
    if not any(offsets):
        return None
    b = ctx.builder
    wg = b.lshr(ctx.warp_id(), ctx.i32(2))
    out = ctx.i32(0)
    for j, off in enumerate(offsets):
        if off:
            bit = b.and_(b.lshr(wg, ctx.i32(j)), ctx.i32(1))
            out = b.xor(out, b.mul(bit, ctx.i32(off)))
    return out


class _Descriptors:
    """Descriptors of one shared operand: the base one is built once, each step adds its start
    offset >> 4 (the start field cannot overflow: shared addresses are below 256 KB)."""

    def __init__(self, ctx, op, value, plan: SmemPlan, warp_offsets: List[int]):
        from shared_codegen.ops.shared_memory.lowering import _is_zero, base_alignment
        base, xor = ctx.get(value)
        if not _is_zero(xor):
            raise LoweringError("wgmma operands cannot be column subslices inside a swizzle "
                                "pattern (the view carries a runtime XOR)", op)
        align = base_alignment(value)
        if align < plan.atom_bytes:
            raise LoweringError(f"wgmma reads a {plan.swizzle}-byte-swizzled operand whose "
                                f"view starts {align}-byte aligned; it must start on a "
                                f"{plan.atom_bytes}-byte boundary (a whole swizzle pattern)",
                                op)
        b = ctx.builder
        self.ctx = ctx
        self.warp = _warp_part(ctx, warp_offsets)
        self.warp_mask = 0
        for off in warp_offsets:
            self.warp_mask |= off
        self.addr = b.ptrtoint(base, I32)
        self.hi = ir.Constant(I64, plan.descriptor_hi())
        self.base = self._make(self.addr if self.warp is None else b.add(self.addr, self.warp))

    def _make(self, addr):
        b = self.ctx.builder
        field = b.and_(b.lshr(addr, self.ctx.i32(4)), self.ctx.i32(0x3FFF))
        return b.or_(b.zext(field, I64), self.hi)

    def at(self, start: int):
        """The descriptor of the step that starts `start` bytes into the operand."""
        value, add = self.at_parts(start)
        return value if not add else self.ctx.builder.add(value, ir.Constant(I64, add))

    def at_parts(self, start: int):
        """(descriptor, constant) whose sum is `at(start)`. Where the start's bits miss the
        warp's (XOR == ADD) the constant is left for the wgmma's asm to add, so that each
        operand keeps one loop-invariant register: descriptors summed in LLVM are hoisted
        out of loops as one 64-bit value per K step, which ptxas spills when the
        accumulators fill the register file."""
        if not start:
            return self.base, 0
        if not start & self.warp_mask:
            return self.base, start >> 4
        off = self.ctx.builder.xor(self.warp, self.ctx.i32(start))
        return self._make(self.ctx.builder.add(self.addr, off)), 0


def _tie(ctx, values: Sequence[ir.Value], asm: str):
    """Run `asm` with `values` as tied in/out operands; return the values it gives back."""
    if not values:
        _asm(ctx, asm)
        return []
    b = ctx.builder
    regs, kinds = [], []
    for v in values:
        ty = v.type
        if isinstance(ty, ir.FloatType):
            regs.append(v), kinds.append("f")
        elif isinstance(ty, ir.DoubleType):
            regs.append(v), kinds.append("d")
        elif isinstance(ty, ir.IntType) and ty.width in (32, 64):
            regs.append(v), kinds.append("r" if ty.width == 32 else "l")
        elif isinstance(ty, ir.IntType):
            regs.append(b.zext(v, I32)), kinds.append("r")
        else:  # 16-bit floats travel as 16-bit integers ("h")
            regs.append(b.bitcast(v, ir.IntType(16))), kinds.append("h")
    # One tied value comes back as itself (LLVM rejects a one-field struct return).
    ret = regs[0].type if len(regs) == 1 else ir.LiteralStructType([r.type for r in regs])
    cons = ",".join([f"={k}" for k in kinds] + [str(i) for i in range(len(regs))] + ["~{memory}"])
    res = _asm(ctx, asm, cons, ret, regs)
    out = []
    for i, v in enumerate(values):
        x = res if len(regs) == 1 else b.extract_value(res, i)
        if x.type != v.type:
            x = b.trunc(x, v.type) if isinstance(v.type, ir.IntType) else b.bitcast(x, v.type)
        out.append(x)
    return out


def wait_group(ctx, pendings: int, values: Sequence[ir.Value]) -> List[ir.Value]:
    """`wgmma.wait_group.sync.aligned n` (PTX ISA 9.7.15.7) holding `values` until it returns,
    so nothing reads an accumulator register the tensor cores may still write."""
    return _tie(ctx, values, f"wgmma.wait_group.sync.aligned {int(pendings)};")


def _keep_alive(ctx, regs: Sequence[ir.Value]) -> None:
    """A register A operand given to `warpgroup_mma_wait` in `deps` stays in its registers
    until the wait: ptxas does not always protect registers an in-flight wgmma reads (it may
    give them to other values once the PTX value is dead, when the wait is in another basic
    block), so the values get a use here: stores behind a branch that is always taken
    (%dynamic_smem_size is never 1), which ptxas cannot drop. Cost: a compare and a
    branch; the stores never run."""
    if not regs:
        return
    bits = regs[0].type.width if isinstance(regs[0].type, ir.IntType) else 16
    if bits == 16 and len(regs) % 2 == 0:
        # In pairs, as the wgmma packs them: the b32 registers it reads, no half moves.
        regs = [_pack_f16_pairs(ctx, regs[i], regs[i + 1]) for i in range(0, len(regs), 2)]
        bits = 32
    kind, cons = {8: ("b8", "c"), 16: ("b16", "h")}.get(bits, ("b32", "r"))
    # One branch around scalar stores: no vector register quads to assemble.
    lines = ["{", ".reg .pred p;", ".reg .u32 t;", "mov.u32 t, %dynamic_smem_size;",
             "setp.ne.u32 p, t, 1;", "@p bra.uni SC_KEEP_ALIVE_${:uid};"]
    # Stores to one address are dead but for the last, and ptxas drops them. 8-bit operands
    # get an address each: with those dropped, ptxas packed the next fp8 P into the registers
    # the in-flight PV wgmma was reading (`overlap` in fp8: O off by 1e3). 16-bit operands
    # keep one address: ptxas protects their registers itself (no write to an in-flight A
    # register in any 16-bit attention build's SASS), and keeping each alive here spilled
    # 40-344 bytes at D = 128.
    step = 1 if bits == 8 else 0
    for i in range(len(regs)):
        lines.append(f"st.shared.{kind} [t+{i * step}], ${i};")
    lines += ["SC_KEEP_ALIVE_${:uid}:", "}"]
    ctx.inline_asm("\n".join(lines), ",".join([cons] * len(regs) + ["~{memory}"]),
                   ir.VoidType(), list(regs), side_effects=True)


def _pack_f16_pairs(ctx, lo, hi):
    b = ctx.builder
    vec = ir.Constant(ir.VectorType(lo.type, 2), None)
    vec = b.insert_element(vec, lo, ctx.i32(0))
    vec = b.insert_element(vec, hi, ctx.i32(1))
    return b.bitcast(vec, I32)


def _unpack_f16_pair(ctx, reg, half_ty):
    b = ctx.builder
    vec = b.bitcast(reg, ir.VectorType(half_ty, 2))
    return b.extract_element(vec, ctx.i32(0)), b.extract_element(vec, ctx.i32(1))


def _mma_asm(instr: str, n_out: int, n_a: int, trans: str, a_add: int = 0, b_add: int = 0):
    """One wgmma; `a_add` / `b_add` are added to the A / B descriptor operands first."""
    outs = ", ".join(f"${i}" for i in range(n_out))
    b_idx, p_idx = n_out + n_a, n_out + n_a + 1
    lines = ["{", ".reg .pred p;"]
    if n_a == 1:
        a_text = f"${n_out}"
        if a_add:
            lines += [".reg .b64 da;", f"add.s64 da, ${n_out}, {a_add};"]
            a_text = "da"
    else:
        a_text = "{" + ", ".join(f"${n_out + i}" for i in range(n_a)) + "}"
    b_text = f"${b_idx}"
    if b_add:
        lines += [".reg .b64 db;", f"add.s64 db, ${b_idx}, {b_add};"]
        b_text = "db"
    lines += [f"setp.ne.b32 p, ${p_idx}, 0;",
              f"{instr} {{{outs}}}, {a_text}, {b_text}, p, 1, 1{trans};", "}"]
    return "\n".join(lines)


@lowering_rule(WarpGroupDotOp)
def lower_warp_group_dot(op, ctx):
    from shared_codegen.ops.shared_memory.lowering import sync_shared
    a, bm, acc, use_acc = op.operands
    a_ty, b_ty, c_ty = a.type, bm.type, acc.type
    a_in_regs = isinstance(a_ty, TensorType)
    try:
        plan = plan_wgmma(a_ty, b_ty, c_ty, ctx.linear_layout(a_ty) if a_in_regs else None,
                          ctx.linear_layout(c_ty))
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    if not a_in_regs:
        sync_shared(ctx, op, a, "read")
    sync_shared(ctx, op, bm, "read")
    b_desc = _Descriptors(ctx, op, bm, plan.b, plan.b_warp)
    a_desc = None if a_in_regs else _Descriptors(ctx, op, a, plan.a, plan.a_warp)

    elem, c_elem = a_ty.element, c_ty.element
    instr_n = c_ty.layout.instr_shape[1]
    f16_acc = c_elem.bits == 16
    instr = (f"wgmma.mma_async.sync.aligned.m64n{instr_n}k{wgmma_instr_k(elem)}."
             f"{'f16' if f16_acc else 'f32'}.{PTX_TYPES[elem.name]}.{PTX_TYPES[b_ty.element.name]}")
    trans = ""
    if elem.bits == 16:  # imm-trans exists for .f16/.bf16 only (PTX ISA 9.7.15.5.2)
        t_b = "0" if plan.b.k_major else "1"
        trans = f", {t_b}" if a_in_regs else f", {'0' if plan.a.k_major else '1'}, {t_b}"
    n_out = instr_n // 4 if f16_acc else instr_n // 2
    n_a = 4 if a_in_regs else 1
    out_kind = "=r" if f16_acc else "=f"
    cons = ",".join([out_kind] * n_out + (["r"] * 4 if a_in_regs else ["l"]) + ["l", "r"]
                    + [str(i) for i in range(n_out)] + ["~{memory}"])
    ret = ir.LiteralStructType([I32 if f16_acc else F32] * n_out)

    b = ctx.builder
    acc_regs = ctx.get(acc)
    a_regs = ctx.get(a) if a_in_regs else None
    current: Dict[int, ir.Value] = {}
    packed: Dict[tuple, ir.Value] = {}
    use_val = ctx.get(use_acc)
    # use_acc=False known at compile time: the first K step ignores D's input (scale-d = 0),
    # so it gets undef registers rather than the zero accumulator's. Tying the zeros would
    # keep one zero register as a wgmma output, which later zero-initialisations copy from,
    # and ptxas then waits for the wgmma early (C7517).
    no_acc = isinstance(use_val, ir.Constant) and not use_val.constant
    use = b.zext(use_val, I32)
    if a_in_regs:
        # Pack every A register before the fence, and route them through it: a register an
        # in-flight wgmma reads must not be written after `wgmma.fence` (ptxas would inject a
        # warpgroup.arrive before each wgmma, C7519, and wait for the wgmmas early).
        for step in plan.steps:
            for idx in step.a_regs:
                if idx not in packed:
                    packed[idx] = _pack(ctx, [a_regs[r] for r in idx], elem)
        keys = list(packed)
        n = len(keys)
        fenced = _asm(ctx, "wgmma.fence.sync.aligned;",
                      ",".join(["=r"] * n + [str(i) for i in range(n)] + ["~{memory}"]),
                      ir.LiteralStructType([I32] * n), [packed[k] for k in keys])
        for i, k in enumerate(keys):
            packed[k] = b.extract_value(fenced, i)
    else:
        _asm(ctx, "wgmma.fence.sync.aligned;", "~{memory}")
    half_ty = acc_regs[0].type if f16_acc else None
    for step in plan.steps:
        tile = plan.tiles[step.tile]
        a_add = 0
        if a_in_regs:
            a_args = [packed[idx] for idx in step.a_regs]
        else:
            a_value, a_add = a_desc.at_parts(step.a_start)
            a_args = [a_value]
        b_value, b_add = b_desc.at_parts(step.b_start)
        d_in = [current.get(r, acc_regs[r]) for r in tile.regs]
        if f16_acc:
            d_in = [_pack_f16_pairs(ctx, d_in[2 * i], d_in[2 * i + 1]) for i in range(n_out)]
        if no_acc and step.k0 == 0 and not any(r in current for r in tile.regs):
            d_in = [ir.Constant(v.type, ir.Undefined) for v in d_in]
        scale = use if step.k0 == 0 else ctx.i32(1)
        res = _asm(ctx, _mma_asm(instr, n_out, n_a, trans, a_add, b_add), cons, ret,
                   a_args + [b_value, scale] + d_in)
        outs = [b.extract_value(res, i) for i in range(n_out)]
        if f16_acc:
            outs = [h for reg in outs for h in _unpack_f16_pair(ctx, reg, half_ty)]
        for r, v in zip(tile.regs, outs):
            current[r] = v
    _asm(ctx, "wgmma.commit_group.sync.aligned;", "~{memory}")
    if not op.attrs.get("is_async"):
        keys = list(current)
        for r, v in zip(keys, wait_group(ctx, 0, [current[r] for r in keys])):
            current[r] = v
    return [[current.get(plan.c_rep[r], acc_regs[r]) for r in range(len(acc_regs))]]


@lowering_rule(WarpGroupDotWaitOp)
def lower_warp_group_dot_wait(op, ctx):
    flat: List[ir.Value] = []
    spans = []
    for v in op.operands:
        if isinstance(v.type, TensorType):
            regs = ctx.get(v)
            spans.append((len(flat), len(regs)))
            flat.extend(regs)
        else:
            spans.append(None)  # descriptors and scalars pass through
    out = wait_group(ctx, op.attrs["pendings"], flat)
    for v, span in zip(op.operands, spans):
        if span is not None and isinstance(v.type.layout, DotOperandLayout):
            _keep_alive(ctx, out[span[0]:span[0] + span[1]])
    results = []
    for v, span in zip(op.operands, spans):
        results.append(ctx.get(v) if span is None else out[span[0]:span[0] + span[1]])
    return results


__all__ = ["acc_pos", "swizzle", "plan_acc", "plan_a_registers", "plan_smem_operand",
           "hardware_offsets", "plan_wgmma", "SmemPlan", "WgmmaPlan", "WgmmaStep",
           "lower_warp_group_dot", "lower_warp_group_dot_wait", "wait_group"]
