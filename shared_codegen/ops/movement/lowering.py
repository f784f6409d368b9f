"""Lowering of join, split, gather and histogram, read off linear layouts.

- join / split (`pick_elements`): each result register is an element of an operand at
  coordinates a linear map (plus a constant for split's second half) gives. When the layouts
  follow the `JOIN` / `SPLIT` relations every thread already holds those elements and this is
  a register renaming (no instructions); otherwise the operand goes through the padded
  shared-memory scratch (`lowering/cross_thread.py`).
- gather: warp shuffles when the gather is warp-local (`gather_lowering.py`); otherwise the
  source is written to shared memory at its row-major offsets, then every result register
  loads the element its index names. Either way the index is masked to the axis size, so an
  out-of-range index reads another element of the source, never outside it.
- histogram: the bins are int32 counters in shared memory, zeroed through the result
  layout, incremented by `atom.shared.add` once per element (masked elements, values outside
  [0, num_bins) and replicated copies skip it), then read back in the result layout.
"""

from __future__ import annotations

import contextlib

from typing import Callable, List, Optional, Sequence

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import TensorType
from shared_codegen.lowering.context import I32, LoweringError
from shared_codegen.lowering.scratch import claim_scratch
from shared_codegen.lowering.cross_thread import (MAX_SCRATCH_BYTES, THREAD_DIMS, PaddedScratch,
                                                  _i32, bases, element_coord_values,
                                                  first_register_holding, map_layout,
                                                  register_coords, smem_load, smem_store,
                                                  storage_bytes, thread_bases_equal,
                                                  unique_registers)
from shared_codegen.ops.movement.definition import GatherOp, HistogramOp, JoinOp, SplitOp
from shared_codegen.ops.movement.gather_lowering import warp_local_gather


def _xor(c: tuple, offset: Optional[tuple]) -> tuple:
    return c if offset is None else tuple(x ^ o for x, o in zip(c, offset))


def stage_in_shared(ctx, ll, regs: Sequence[ir.Value], shape: Sequence[int], lty: ir.Type,
                    what: str):
    """Store every element of a tensor (layout `ll`) at its padded row-major offset in the
    scratch and wait for all threads; returns (scratch, base) for the reads."""
    scratch = PaddedScratch(shape, storage_bytes(lty))
    if scratch.nbytes > MAX_SCRATCH_BYTES:
        raise LoweringError(
            f"{what} of a {'x'.join(map(str, shape))} tensor needs {scratch.nbytes} bytes of "
            f"scratch shared memory, more than the {MAX_SCRATCH_BYTES} a CTA can have on "
            f"sm_90; use a smaller tile")
    base = claim_scratch(ctx, scratch.nbytes)
    coords = register_coords(ll)
    for r in unique_registers(ll):
        smem_store(ctx, base, scratch.offset(ctx.builder, element_coord_values(ctx, ll, coords[r])),
                   regs[r])
    ctx.barrier()
    return scratch, base


def pick_elements(ctx, src_ty: TensorType, src_regs, dst_ty: TensorType,
                  to_src: Callable[[tuple], tuple], offset: Optional[tuple] = None,
                  what: str = "moving data") -> List[ir.Value]:
    """Registers of `dst_ty` where element x of dst is element `to_src(x) ^ offset` of src
    (`to_src` linear over GF(2), `offset` a constant coordinate or None)."""
    src_ll, dst_ll = ctx.linear_layout(src_ty), ctx.linear_layout(dst_ty)
    read_ll = map_layout(dst_ll, to_src, src_ty.shape)
    reads = [_xor(c, offset) for c in register_coords(read_ll)]
    if thread_bases_equal(read_ll, src_ll):
        holder = first_register_holding(src_ll)
        picked = [holder.get(c) for c in reads]
        if all(p is not None for p in picked):
            return [src_regs[p] for p in picked]
    lty = ctx.llvm_type(src_ty.element)
    scratch, base = stage_in_shared(ctx, src_ll, src_regs, src_ty.shape, lty, what)
    loaded = {}
    out = []
    for c in reads:
        if c not in loaded:
            coords = element_coord_values(ctx, read_ll, c)
            loaded[c] = smem_load(ctx, base, scratch.offset(ctx.builder, coords), lty)
        out.append(loaded[c])
    return out


def _walks_last_dim_across_threads(ll) -> bool:
    return any(v[-1] for dim in THREAD_DIMS for v in bases(ll, dim))


@lowering_rule(JoinOp)
def lower_join(op, ctx):
    """Result element (x, k) is operand k's element x: pick both operands' elements for
    every result register, then take the half the register's last coordinate names (a
    constant unless lanes or warps walk the new dim, then a select on the thread's)."""
    res_ty = op.result.type
    res_ll = ctx.linear_layout(res_ty)
    halves = [pick_elements(ctx, v.type, ctx.get(v), res_ty, lambda c: c[:-1], what="join")
              for v in op.operands]
    per_thread = _walks_last_dim_across_threads(res_ll)
    b = ctx.builder
    out = []
    for r, c in enumerate(register_coords(res_ll)):
        if not per_thread:
            out.append(halves[c[-1]][r])
            continue
        last = element_coord_values(ctx, res_ll, c)[-1]
        first = b.icmp_unsigned("==", last, _i32(0))
        out.append(b.select(first, halves[0][r], halves[1][r]))
    return [out]


@lowering_rule(SplitOp)
def lower_split(op, ctx):
    """Half k's element x is the operand's element (x, k)."""
    src = op.operands[0]
    rank = len(src.type.shape)
    regs = ctx.get(src)
    return [pick_elements(ctx, src.type, regs, r.type, lambda c: (*c, 0),
                          (0,) * (rank - 1) + (k,), what="split")
            for k, r in enumerate(op.results)]


def _as_i32(b, v: ir.Value, signed: bool) -> ir.Value:
    width = v.type.width
    if width == 32:
        return v
    if width > 32:
        return b.trunc(v, I32)
    return b.sext(v, I32) if signed else b.zext(v, I32)


@lowering_rule(GatherOp)
def lower_gather(op, ctx):
    src, index = op.operands
    signed = index.type.element.is_int_signed()
    shuffled = warp_local_gather(ctx, op, lambda b, v: _as_i32(b, v, signed))
    if shuffled is not None:
        return [shuffled]
    axis = op.attrs["axis"]
    res_ty = op.result.type
    src_ll, res_ll = ctx.linear_layout(src.type), ctx.linear_layout(res_ty)
    lty = ctx.llvm_type(src.type.element)
    scratch, base = stage_in_shared(ctx, src_ll, ctx.get(src), src.type.shape, lty, "gather")
    b = ctx.builder
    size_mask = _i32(src.type.shape[axis] - 1)
    idx_regs = ctx.get(index)
    out = []
    for r, c in enumerate(register_coords(res_ll)):
        coords = element_coord_values(ctx, res_ll, c)
        coords[axis] = b.and_(_as_i32(b, idx_regs[r], signed), size_mask)
        out.append(smem_load(ctx, base, scratch.offset(b, coords), lty))
    return [out]


@contextlib.contextmanager
def _always():
    yield


def _in_bins(b, v: ir.Value, num_bins: int, signed: bool) -> Optional[ir.Value]:
    """v in [0, num_bins), in v's own width; None when every value of the type is (an
    upper bound that does not fit the type holds for all its values)."""
    width = v.type.width
    largest = (1 << (width - 1)) - 1 if signed else (1 << width) - 1
    checks = []
    if signed:
        checks.append(b.icmp_signed(">=", v, ir.Constant(v.type, 0)))
    if num_bins <= largest:
        below = b.icmp_signed if signed else b.icmp_unsigned
        checks.append(below("<", v, ir.Constant(v.type, num_bins)))
    if not checks:
        return None
    return checks[0] if len(checks) == 1 else b.and_(checks[0], checks[1])


@lowering_rule(HistogramOp)
def lower_histogram(op, ctx):
    x = op.operands[0]
    mask = op.operands[1] if len(op.operands) > 1 else None
    num_bins = op.attrs["num_bins"]
    res_ll = ctx.linear_layout(op.result.type)
    b = ctx.builder
    base = claim_scratch(ctx, num_bins * 4)
    coords = register_coords(res_ll)
    for r in unique_registers(res_ll):
        (bin_index,) = element_coord_values(ctx, res_ll, coords[r])
        smem_store(ctx, base, bin_index, _i32(0))
    ctx.barrier()
    replica = ctx.replication_predicate(x.type)
    signed = x.type.element.is_int_signed()
    values = ctx.get(x)
    masks = ctx.get(mask) if mask is not None else None
    for r in ctx.unique_registers(x.type):
        v = values[r]
        conditions = [_in_bins(b, v, num_bins, signed),
                      masks[r] if masks is not None else None, replica]
        count = None
        for c in conditions:
            if c is not None:
                count = c if count is None else b.and_(count, c)
        with b.if_then(count) if count is not None else _always():
            bin_index = b.and_(_as_i32(b, v, signed), _i32(num_bins - 1))
            addr = b.gep(base, [bin_index], source_etype=I32)
            b.atomic_rmw("add", addr, _i32(1), "monotonic")
    ctx.barrier()
    out = []
    loaded = {}
    for c in coords:
        if c not in loaded:
            (bin_index,) = element_coord_values(ctx, res_ll, c)
            loaded[c] = smem_load(ctx, base, bin_index, I32)
        out.append(loaded[c])
    return [out]
