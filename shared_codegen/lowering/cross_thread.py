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
(`claim_scratch`, lowering/scratch.py, puts a barrier before a rule's first write where an
earlier op's readers may not be done); each rule puts one between its writes and its reads.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence

from llvmlite import ir

from shared_codegen.ir.types import TensorType, int32
from shared_codegen.lowering.context import I8, I32, I64, LoweringError
from shared_codegen.lowering.scratch import claim_scratch

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
    from shared_codegen.layouts import LinearLayout

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
    base = claim_scratch(ctx, scratch.nbytes)
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


# ---- combine regions (reductions and scans) ------------------------------------------------

def _combine(ctx, block, acc: Sequence[ir.Value], new: Sequence[ir.Value]) -> List[ir.Value]:
    """Run the combine region on (acc..., new...) at the current insertion point."""
    return list(ctx.lower_block(block, list(acc) + list(new)))
