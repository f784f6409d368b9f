"""Lowering rules that move data between registers, lanes and warps, read off linear layouts.

Every rule here works on the `LinearLayout` of its tensors (`ctx.linear_layout(ty)`), never on
a layout family: register `r` of lane `l` in warp `w` holds the element at
`L(register=r) ^ L(lane=l) ^ L(warp=w)`, so "which register holds what", "which lanes share
a reduction" and "where does this element go in shared memory" are all bit arithmetic.

- `lower_reduce` (tt.reduce): combine in the thread, then across lanes with butterfly
  shuffles (PTX ISA 9.7.9.6, shfl.sync.bfly), then across warps through shared memory
  (st.shared / bar.sync / ld.shared, PTX ISA 9.7.9.9, 9.7.9.8, 9.7.13.1).
- `lower_convert_layout` (ttg.convert_layout): the planner's plan (register renames, warp
  shuffles in `xthread_shuffle.py`, swizzled shared memory in `xthread_swizzle.py`); a padded
  shared-memory round trip (`exchange_through_smem`) for what they cannot run.
- Shape ops (splat, broadcast, expand_dims, reshape, trans, make_range): a register
  reindexing when the linear layouts say the data already sits in the right thread, else the
  shared-memory round trip (`remap_or_exchange`).

Scans live in `xthread_scan.py`. Scratch shared memory is shared by every op at offset 0
(`ctx.request_shared`); each rule puts a barrier before its first write so that an earlier
op's readers are done, and one between its writes and its reads.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

from llvmlite import ir

from shared_codegen.ir.types import PointerType, TensorType, int32
from shared_codegen.lowering.context import I8, I32, I64, LoweringError

REGISTER, LANE, WARP = "register", "lane", "warp"
THREAD_DIMS = (LANE, WARP)
BANK_BYTES = 4
BANKS = 32
MAX_SCRATCH_BYTES = 227 * 1024  # the most dynamic shared memory one sm_90 CTA can have


# ---- layout bit arithmetic (pure Python) --------------------------------------------------

def bases(ll, in_dim: str) -> List[tuple]:
    return list(ll.bases.get(in_dim, []))


def apply_bits(vectors: Sequence[tuple], value: int, rank: int) -> tuple:
    """XOR of the basis vectors whose bit is set in `value`."""
    out = [0] * rank
    bit = 0
    while value:
        if value & 1:
            for d in range(rank):
                out[d] ^= vectors[bit][d]
        value >>= 1
        bit += 1
    return tuple(out)


def register_coords(ll) -> List[tuple]:
    """Per register, the constant part L(register=r) of its element's coordinates."""
    regs = bases(ll, REGISTER)
    rank = len(ll.out_dims)
    return [apply_bits(regs, r, rank) for r in range(1 << len(regs))]


def unique_registers(ll) -> List[int]:
    """Registers whose element no lower register of the thread holds (first copies)."""
    seen = set()
    out = []
    for r, c in enumerate(register_coords(ll)):
        if c not in seen:
            seen.add(c)
            out.append(r)
    return out


def first_register_holding(ll) -> Dict[tuple, int]:
    """Coordinates (register part) -> the lowest register holding them."""
    table: Dict[tuple, int] = {}
    for r, c in enumerate(register_coords(ll)):
        table.setdefault(c, r)
    return table


def pure_axis_bits(ll, in_dim: str, axis: int) -> List[int]:
    """Bits of `in_dim` whose basis moves only along `axis` (those a reduction combines)."""
    out = []
    for bit, vec in enumerate(bases(ll, in_dim)):
        if vec[axis] and not any(c for d, c in enumerate(vec) if d != axis):
            out.append(bit)
    return out


def check_axis_separable(ll, axis: int, what: str) -> None:
    """Reductions and scans need every basis to move along `axis` only, or not along it at
    all (true of blocked, slice and MMA layouts). A basis that moves both ways would make one
    shuffle partner hold another output element; such layouts must be converted first."""
    for in_dim in (REGISTER, LANE, WARP):
        for bit, vec in enumerate(bases(ll, in_dim)):
            on_axis = vec[axis] != 0
            off_axis = any(c for d, c in enumerate(vec) if d != axis)
            if on_axis and off_axis:
                raise LoweringError(
                    f"{what} along axis {axis}: {in_dim} bit {bit} of the layout moves along "
                    f"the axis and across it ({list(vec)}); convert_layout to a blocked "
                    f"layout first")
    # A non-zero basis that repeats earlier bases would count an element twice.
    masks = ll.get_free_variable_masks()
    for in_dim in (REGISTER, LANE, WARP):
        for bit, vec in enumerate(bases(ll, in_dim)):
            if masks.get(in_dim, 0) >> bit & 1 and any(vec):
                raise LoweringError(f"{what}: {in_dim} bit {bit} of the layout duplicates a "
                                    f"combination of other bits ({list(vec)}); unsupported")


def map_layout(ll, fn: Callable[[tuple], tuple], out_shape: Sequence[int]):
    """The layout `fn o ll` (fn must be linear over GF(2) on coordinates, e.g. zeroing,
    dropping or permuting dims, or re-splitting row-major bits for a reshape)."""
    from gluon.layouts import LinearLayout

    new = {dim: [tuple(fn(tuple(v))) for v in vecs] for dim, vecs in ll.bases.items()}
    names = [f"dim{i}" for i in range(len(out_shape))]
    return LinearLayout(new, list(zip(names, [int(s) for s in out_shape])),
                        require_surjective=False)


def thread_bases_equal(a, b) -> bool:
    """Same lane and warp bases (a zero-sized dim equals a missing one)."""
    for dim in THREAD_DIMS:
        va, vb = bases(a, dim), bases(b, dim)
        if len(va) != len(vb) or any(tuple(x) != tuple(y) for x, y in zip(va, vb)):
            return False
    return True


def row_major_strides(shape: Sequence[int]) -> List[int]:
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return strides


# ---- LLVM helpers ----------------------------------------------------------------------------

def _i32(v: int) -> ir.Constant:
    return ir.Constant(I32, int(v) & 0xFFFFFFFF)


def thread_bits_value(b: ir.IRBuilder, ctx, ll, dims_bits) -> ir.Value:
    """An i32 whose bit j is bit `dims_bits[j] = (in_dim, bit)` of this thread's lane or warp
    id: a compressed index over chosen thread bits (e.g. "which warp along the axis")."""
    src = {LANE: ctx.lane_id(), WARP: ctx.warp_id()}
    acc = None
    for j, (dim, bit) in enumerate(dims_bits):
        one = b.and_(b.lshr(src[dim], _i32(bit)), _i32(1)) if bit else b.and_(src[dim], _i32(1))
        piece = b.shl(one, _i32(j)) if j else one
        acc = piece if acc is None else b.or_(acc, piece)
    return acc if acc is not None else _i32(0)


def thread_coord_values(ctx, ll) -> List[ir.Value]:
    """Per dim, the i32 lane/warp part of the coordinates (computed once per layout)."""
    # thread_coords reads only the layout of the type (cached per layout); any element does.
    return ctx.thread_coords(TensorType(tuple(ll.out_dim_sizes.values()), int32, ll))


def element_coord_values(ctx, ll, reg_coord: tuple) -> List[ir.Value]:
    """Per dim, the i32 coordinate of `reg_coord ^ thread part`."""
    b = ctx.builder
    thread = thread_coord_values(ctx, ll)
    thread_bits = [0] * len(reg_coord)
    for dim in THREAD_DIMS:
        for vec in bases(ll, dim):
            for d, c in enumerate(vec):
                thread_bits[d] |= c
    out = []
    for d, c in enumerate(reg_coord):
        if c == 0:
            out.append(thread[d])
        elif not thread_bits[d] & c:
            out.append(b.or_(thread[d], _i32(c)))
        else:
            out.append(b.xor(thread[d], _i32(c)))
    return out


def storage_type(lty: ir.Type) -> ir.Type:
    """How an element sits in shared memory: i1 as a byte, pointers as i64."""
    if isinstance(lty, ir.PointerType):
        return I64
    if isinstance(lty, ir.IntType) and lty.width == 1:
        return I8
    return lty


def storage_bytes(lty: ir.Type) -> int:
    st = storage_type(lty)
    if isinstance(st, ir.IntType):
        return max(1, st.width // 8)
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(st)]


def to_storage(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    if isinstance(v.type, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(v.type, ir.IntType) and v.type.width == 1:
        return b.zext(v, I8)
    return v


def from_storage(b: ir.IRBuilder, v: ir.Value, lty: ir.Type) -> ir.Value:
    if isinstance(lty, ir.PointerType):
        return b.inttoptr(v, lty)
    if isinstance(lty, ir.IntType) and lty.width == 1:
        return b.trunc(v, lty)
    return v


def smem_store(ctx, base, index: ir.Value, value: ir.Value, byte_offset: int = 0) -> None:
    """st.shared of one element at element `index` of the array at `base + byte_offset`."""
    b = ctx.builder
    st = storage_type(value.type)
    ptr = base if not byte_offset else b.gep(base, [_i32(byte_offset)], source_etype=I8)
    addr = b.gep(ptr, [index], source_etype=st)
    b.store(to_storage(b, value), addr, align=storage_bytes(value.type))


def smem_load(ctx, base, index: ir.Value, lty: ir.Type, byte_offset: int = 0) -> ir.Value:
    b = ctx.builder
    st = storage_type(lty)
    ptr = base if not byte_offset else b.gep(base, [_i32(byte_offset)], source_etype=I8)
    addr = b.gep(ptr, [index], source_etype=st)
    return from_storage(b, b.load(addr, typ=st, align=storage_bytes(lty)), lty)


def linear_index(b: ir.IRBuilder, coords: Sequence[ir.Value], shape: Sequence[int]) -> ir.Value:
    """Row-major element index; strides are powers of two, so the terms' bits never overlap
    and `or` is exact (LLVM folds it into addressing)."""
    strides = row_major_strides(shape)
    acc = None
    for c, s, n in zip(coords, strides, shape):
        if n == 1:
            continue
        term = b.shl(c, _i32(s.bit_length() - 1)) if s > 1 else c
        acc = term if acc is None else b.or_(acc, term)
    return acc if acc is not None else _i32(0)


class PaddedScratch:
    """A row-major scratch array with `pad` elements inserted after every `segment` elements.

    Without padding, threads of a warp that read a column of a row-major tile hit one bank
    (a 32-way conflict on a transpose); shifting each segment of at least one full bank row
    (128 bytes) by one 32-bit word spreads a column over all banks.
    """

    def __init__(self, shape: Sequence[int], elem_bytes: int):
        self.shape = tuple(int(s) for s in shape)
        numel = 1
        for s in self.shape:
            numel *= s
        row = self.shape[-1] if self.shape else 1
        self.segment = max(row, BANKS * BANK_BYTES // elem_bytes)
        self.pad = max(1, BANK_BYTES // elem_bytes) if numel > self.segment else 0
        self.elem_bytes = elem_bytes
        self.numel = numel

    @property
    def nbytes(self) -> int:
        segments = -(-self.numel // self.segment)
        return (self.numel + segments * self.pad) * self.elem_bytes

    def offset(self, b: ir.IRBuilder, coords: Sequence[ir.Value]) -> ir.Value:
        idx = linear_index(b, coords, self.shape)
        if not self.pad:
            return idx
        seg = b.lshr(idx, _i32(self.segment.bit_length() - 1))
        return b.add(idx, b.mul(seg, _i32(self.pad)) if self.pad > 1 else seg)


# ---- the shared-memory round trip ------------------------------------------------------------

def exchange_through_smem(ctx, src_ll, src_regs: Sequence[ir.Value], read_ll,
                          shape: Sequence[int], lty: ir.Type) -> List[ir.Value]:
    """Every thread stores its elements of `src_ll` at their padded row-major offsets, then
    loads, for each register of `read_ll` (a layout over the same `shape`), the element at
    that register's coordinates. Duplicate holders store the same value to the same address,
    which is harmless; duplicate registers of `read_ll` are loaded once.
    """
    b = ctx.builder
    scratch = PaddedScratch(shape, storage_bytes(lty))
    if scratch.nbytes > MAX_SCRATCH_BYTES:
        raise LoweringError(
            f"moving a {'x'.join(map(str, shape))} tensor between threads needs "
            f"{scratch.nbytes} bytes of scratch shared memory, more than the "
            f"{MAX_SCRATCH_BYTES} a CTA can have on sm_90; use a smaller tile or layouts that "
            f"convert without shared memory")
    base = ctx.request_shared(scratch.nbytes)
    ctx.barrier()  # an earlier op may still be reading the scratch
    src_coords = register_coords(src_ll)
    for r in unique_registers(src_ll):
        coords = element_coord_values(ctx, src_ll, src_coords[r])
        smem_store(ctx, base, scratch.offset(b, coords), src_regs[r])
    ctx.barrier()
    out: List[ir.Value] = []
    loaded: Dict[tuple, ir.Value] = {}
    for c in register_coords(read_ll):
        if c not in loaded:
            coords = element_coord_values(ctx, read_ll, c)
            loaded[c] = smem_load(ctx, base, scratch.offset(b, coords), lty)
        out.append(loaded[c])
    return out


def remap_or_exchange(ctx, src_ty: TensorType, src_regs, dst_ty: TensorType,
                      to_src: Callable[[tuple], tuple]) -> List[ir.Value]:
    """Registers of `dst_ty` where element `x` of dst is element `to_src(x)` of src.

    `to_src` is linear over GF(2) on coordinates. When composing it with the dst layout gives
    the src layout's lane and warp bases, each thread already holds what it needs and this is
    a register reindexing (no instructions); otherwise a shared-memory round trip.
    """
    src_ll = ctx.linear_layout(src_ty)
    dst_ll = ctx.linear_layout(dst_ty)
    read_ll = map_layout(dst_ll, to_src, src_ty.shape)
    if thread_bases_equal(read_ll, src_ll):
        holder = first_register_holding(src_ll)
        picked = [holder.get(c) for c in register_coords(read_ll)]
        if all(p is not None for p in picked):
            return [src_regs[p] for p in picked]
    return exchange_through_smem(ctx, src_ll, src_regs, read_ll, src_ty.shape,
                                 ctx.llvm_type(src_ty.element))


# ---- tt.reduce ------------------------------------------------------------------------------

def _combine(ctx, block, acc: Sequence[ir.Value], new: Sequence[ir.Value]) -> List[ir.Value]:
    """Run the combine region on (acc..., new...) at the current insertion point."""
    return list(ctx.lower_block(block, list(acc) + list(new)))


def lower_reduce(op, ctx):
    """tt.reduce along `axis`, in three stages derived from the operand's linear layout.

    1. In the thread: registers whose coordinates differ only along the axis are combined
       in ascending axis order (duplicate registers, from zero register bases, are skipped).
    2. Across lanes: for each lane bit whose basis moves only along the axis, one
       `shfl.sync.bfly` (PTX ISA 9.7.9.6) with that bit as the lane mask; afterwards every
       lane of the group holds the group's result. Broadcast lane bits are skipped.
    3. Across warps (only if a warp bit moves along the axis): each warp's partial of each
       output element goes to shared memory at `[warp index along the axis][output element]`,
       `bar.sync`, and every thread combines, in warp order, the partials of the output
       elements its result registers hold. Same values in the same order, so duplicate
       holders (and, for a scalar result, all threads) agree bit for bit.
    Without stage 3 the accumulators are the result registers when the slice layout keeps the
    operand's lane/warp placement (it does for SliceLayout(axis, operand layout)); otherwise
    they go through a shared-memory round trip.
    """
    axis = op.attrs["axis"]
    src_ty: TensorType = op.operands[0].type
    ll = ctx.linear_layout(src_ty)
    check_axis_separable(ll, axis, "tt.reduce")
    block = op.regions[0].block
    operands = [ctx.get(v) for v in op.operands]
    ltys = [ctx.llvm_type(v.type.element) for v in op.operands]

    def drop_axis(c):
        return tuple(x for d, x in enumerate(c) if d != axis)

    # Stage 1: in-thread, grouped by the register part of the output coordinates.
    groups: Dict[tuple, List[Tuple[int, int]]] = {}
    reg_coords = register_coords(ll)
    for r in unique_registers(ll):
        c = reg_coords[r]
        groups.setdefault(drop_axis(c), []).append((c[axis], r))
    accs: Dict[tuple, List[ir.Value]] = {}
    for key, members in groups.items():
        members.sort()
        acc = [regs[members[0][1]] for regs in operands]
        for _, r in members[1:]:
            acc = _combine(ctx, block, acc, [regs[r] for regs in operands])
        accs[key] = acc

    # Stage 2: butterflies over the lane bits that move along the axis.
    for bit in pure_axis_bits(ll, LANE, axis):
        for key, acc in accs.items():
            other = [ctx.shuffle_xor(v, 1 << bit) for v in acc]
            accs[key] = _combine(ctx, block, acc, other)

    out_shape = drop_axis(tuple(src_ty.shape))
    warp_bits = pure_axis_bits(ll, WARP, axis)
    if warp_bits:
        return _reduce_across_warps(ctx, op, ll, axis, accs, warp_bits, ltys, out_shape)

    if not out_shape:  # scalar result: every thread holds the one accumulator
        (acc,) = accs.values()
        return acc
    res_ty: TensorType = op.results[0].type
    res_ll = ctx.linear_layout(res_ty)
    partial_ll = map_layout(ll, drop_axis, out_shape)
    if thread_bases_equal(res_ll, partial_ll):
        picked = [accs.get(c) for c in register_coords(res_ll)]
        if all(p is not None for p in picked):
            return [[p[i] for p in picked] for i in range(len(operands))]
    # The result layout places output elements elsewhere: round trip the accumulators, seen
    # as a layout whose registers are the groups (register bases zeroed along the axis).
    out = []
    for i, lty in enumerate(ltys):
        regs = [accs[drop_axis(c)][i] for c in reg_coords]
        out.append(exchange_through_smem(ctx, partial_ll, regs, res_ll, out_shape, lty))
    return out


def _reduce_across_warps(ctx, op, ll, axis, accs, warp_bits, ltys, out_shape):
    """Stage 3 of `lower_reduce`; returns the lowered results."""
    b = ctx.builder
    block = op.regions[0].block
    n_warps_axis = 1 << len(warp_bits)
    n_out = 1
    for s in out_shape:
        n_out *= s
    # One array [warp along axis][output element] per operand, 16-byte aligned.
    offsets, total = [], 0
    for lty in ltys:
        offsets.append(total)
        total += -(-n_out * n_warps_axis * storage_bytes(lty) // 16) * 16
    base = ctx.request_shared(total)
    warp_index = thread_bits_value(b, ctx, ll, [(WARP, bit) for bit in warp_bits])

    def drop_axis(c):
        return tuple(x for d, x in enumerate(c) if d != axis)

    # Only one lane of each group of lanes holding the same partial needs to store it:
    # the one whose axis-lane bits and broadcast lane bits are zero.
    free = ll.get_free_variable_masks()
    lane_mask = free.get(LANE, 0)
    for bit in pure_axis_bits(ll, LANE, axis):
        lane_mask |= 1 << bit
    ctx.barrier()  # scratch reuse
    partial_ll = map_layout(ll, drop_axis, out_shape)
    pred = None
    if lane_mask:
        pred = b.icmp_unsigned("==", b.and_(ctx.lane_id(), _i32(lane_mask)), _i32(0))
    slot_base = b.mul(warp_index, _i32(n_out)) if n_out > 1 else warp_index

    def store_partials():
        for key, acc in accs.items():
            coords = element_coord_values(ctx, partial_ll, key)
            idx = b.add(slot_base, linear_index(b, coords, out_shape))
            for v, off in zip(acc, offsets):
                smem_store(ctx, base, idx, v, off)

    if pred is not None:
        with b.if_then(pred):
            store_partials()
    else:
        store_partials()
    ctx.barrier()

    if not out_shape and n_warps_axis <= ctx.threads_per_warp:
        # A scalar result: lane l reads warp (l mod W)'s partial, then butterflies over the
        # low log2(W) lane bits leave the total in every lane. One shared load and a few
        # shuffles per thread, instead of W loads that keep W values live (register pressure
        # there cost softmax a quarter of its occupancy on the H100).
        slot = b.and_(ctx.lane_id(), _i32(n_warps_axis - 1))
        acc = [smem_load(ctx, base, slot, lty, off) for lty, off in zip(ltys, offsets)]
        for bit in range(len(warp_bits)):
            other = [ctx.shuffle_xor(v, 1 << bit) for v in acc]
            acc = _combine(ctx, block, acc, other)
        return acc
    if out_shape:
        res_ll = ctx.linear_layout(op.results[0].type)
        want = register_coords(res_ll)
    else:
        res_ll, want = None, [()]
    loaded: Dict[tuple, List[ir.Value]] = {}
    per_reg = []
    for c in want:
        if c not in loaded:
            idx = linear_index(b, element_coord_values(ctx, res_ll, c), out_shape) \
                if out_shape else _i32(0)
            acc = None
            for w in range(n_warps_axis):
                slot = b.add(idx, _i32(w * n_out)) if w else idx
                vals = [smem_load(ctx, base, slot, lty, off) for lty, off in zip(ltys, offsets)]
                acc = vals if acc is None else _combine(ctx, block, acc, vals)
            loaded[c] = acc
        per_reg.append(loaded[c])
    if not out_shape:
        return per_reg[0]
    return [[regs[i] for regs in per_reg] for i in range(len(ltys))]


# ---- ttg.convert_layout ------------------------------------------------------------------------

def _plan(src_ty: TensorType, dst_ty: TensorType, ctx):
    """The planner's plan, or None when the planner is unavailable or cannot plan this."""
    try:
        from gluon.layouts.planner import plan_conversion
    except ImportError:
        return None
    try:
        bits = src_ty.element.bits if not isinstance(src_ty.element, PointerType) else 64
        return plan_conversion(ctx.linear_layout(src_ty), ctx.linear_layout(dst_ty),
                               src_ty.shape, max(8, bits))
    except Exception:  # noqa: BLE001 - a planner gap must not block lowering: fall back
        return None


def lower_convert_layout(op, ctx):
    """ttg.convert_layout as the planner says: no-op and register-permutation plans rename
    registers; warp_shuffle plans are `shfl.sync.idx` rounds (`xthread_shuffle.py`, no shared
    memory); shared_memory plans store to the planned swizzled scratch and load back
    (`xthread_swizzle.py`: st/ld.shared.vN or stmatrix/ldmatrix). A plan those cannot run
    (or no plan) falls back to the padded shared-memory round trip."""
    src_ty: TensorType = op.operands[0].type
    dst_ty: TensorType = op.result.type
    regs = ctx.get(op.operands[0])
    src_ll, dst_ll = ctx.linear_layout(src_ty), ctx.linear_layout(dst_ty)
    if src_ll == dst_ll:
        return [list(regs)]
    n_dst = len(register_coords(dst_ll))
    plan = _plan(src_ty, dst_ty, ctx)
    if plan is not None and plan.kind == "noop" and len(regs) == n_dst:
        return [list(regs)]
    if plan is not None and plan.kind == "register_permutation" and plan.permutation is not None \
            and len(plan.permutation) == n_dst and all(0 <= s < len(regs)
                                                        for s in plan.permutation):
        return [[regs[s] for s in plan.permutation]]
    if plan is not None and plan.kind == "warp_shuffle":
        from shared_codegen.lowering.xthread_shuffle import try_lower_shuffle

        out = try_lower_shuffle(ctx, plan, src_ll, regs, dst_ll, ctx.llvm_type(src_ty.element))
        if out is not None:
            return [out]
    if plan is not None and plan.kind == "shared_memory":
        from shared_codegen.lowering.xthread_swizzle import swizzled_round_trip

        out = swizzled_round_trip(ctx, plan, src_ll, regs, dst_ll, src_ty.shape,
                                  ctx.llvm_type(src_ty.element))
        if out is not None:
            return [out]
    # Same thread placement: a reindexing found from the coordinates alone.
    return [remap_or_exchange(ctx, src_ty, regs, dst_ty, lambda c: c)]


# ---- shape ops ----------------------------------------------------------------------------------

def lower_splat(op, ctx):
    """tt.splat: the scalar in every register."""
    v = ctx.get(op.operands[0])
    return [[v] * len(register_coords(ctx.linear_layout(op.result.type)))]


def lower_make_range(op, ctx):
    """tt.make_range: register r holds `start + dim0 coordinate` (constant | thread part)."""
    ty: TensorType = op.result.type
    ll = ctx.linear_layout(ty)
    b = ctx.builder
    start = op.attrs["start"]
    out = []
    for c in register_coords(ll):
        (x,) = element_coord_values(ctx, ll, c)
        out.append(b.add(x, _i32(start)) if start else x)
    return [out]


def lower_broadcast(op, ctx):
    """tt.broadcast: dst element x is src element x with the broadcast dims zeroed."""
    src_ty, dst_ty = op.operands[0].type, op.result.type
    if not isinstance(src_ty, TensorType):
        return lower_splat(op, ctx)
    dims = [d for d, (s, t) in enumerate(zip(src_ty.shape, dst_ty.shape)) if s != t]

    def to_src(c):
        return tuple(0 if d in dims else x for d, x in enumerate(c))

    return [remap_or_exchange(ctx, src_ty, ctx.get(op.operands[0]), dst_ty, to_src)]


def lower_expand_dims(op, ctx):
    """tt.expand_dims: drop the new size-1 dim from dst coordinates."""
    axis = op.attrs["axis"]

    def to_src(c):
        return c[:axis] + c[axis + 1:]

    return [remap_or_exchange(ctx, op.operands[0].type, ctx.get(op.operands[0]),
                              op.result.type, to_src)]


def _reshape_map(src_shape, dst_shape):
    """Coordinates in dst -> coordinates in src, through the row-major flat index. With
    power-of-two sizes this only regroups bits, so it is linear over GF(2)."""
    dst_strides = row_major_strides(dst_shape)
    src_strides = row_major_strides(src_shape)

    def to_src(c):
        flat = 0
        for x, s in zip(c, dst_strides):
            flat |= x * s
        return tuple((flat // s) % n for s, n in zip(src_strides, src_shape))

    return to_src


def lower_reshape(op, ctx):
    """tt.reshape: same row-major placement -> register reindex, else a round trip (with
    `allow_reorder` we could keep any placement; we keep row-major order, which is valid)."""
    src_ty, dst_ty = op.operands[0].type, op.result.type
    return [remap_or_exchange(ctx, src_ty, ctx.get(op.operands[0]), dst_ty,
                              _reshape_map(src_ty.shape, dst_ty.shape))]


def lower_trans(op, ctx):
    """tt.trans: dst dim i is src dim order[i]."""
    order = tuple(op.attrs["order"])

    def to_src(c):
        out = [0] * len(order)
        for i, o in enumerate(order):
            out[o] = c[i]
        return tuple(out)

    return [remap_or_exchange(ctx, op.operands[0].type, ctx.get(op.operands[0]),
                              op.result.type, to_src)]


def lower_hint(op, ctx):
    """tt.hint: the value itself; axis analysis has read the attributes."""
    return [ctx.get(op.operands[0])]

