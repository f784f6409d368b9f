"""Lowering of the shape ops: `ttg.convert_layout` as the layout planner says (register
renames, warp shuffles in `lowering/xthread_shuffle.py`, swizzled shared memory in
`lowering/xthread_swizzle.py`, or the padded shared-memory round trip), and splat, broadcast,
expand_dims, reshape, trans, make_range and hint as register reindexing when the linear
layouts say the data already sits in the right thread (`remap_or_exchange` otherwise).
"""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import PointerType, TensorType
from shared_codegen.lowering.cross_thread import (_i32, element_coord_values, register_coords,
                                                  remap_or_exchange, row_major_strides)
from shared_codegen.ops.tensor.definition import (BroadcastOp, ConvertLayoutOp, ExpandDimsOp,
                                                  HintOp, MakeRangeOp, ReshapeOp, SplatOp, TransOp)


def _plan(src_ty: TensorType, dst_ty: TensorType, ctx):
    """The planner's plan, or None when the planner is unavailable or cannot plan this."""
    try:
        from shared_codegen.layouts.planner import plan_conversion
    except ImportError:
        return None
    try:
        bits = src_ty.element.bits if not isinstance(src_ty.element, PointerType) else 64
        return plan_conversion(ctx.linear_layout(src_ty), ctx.linear_layout(dst_ty),
                               src_ty.shape, max(8, bits))
    except Exception:  # noqa: BLE001 - a planner gap must not block lowering: fall back
        return None


@lowering_rule(ConvertLayoutOp)
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

@lowering_rule(SplatOp)
def lower_splat(op, ctx):
    """tt.splat: the scalar in every register."""
    v = ctx.get(op.operands[0])
    return [[v] * len(register_coords(ctx.linear_layout(op.result.type)))]


@lowering_rule(MakeRangeOp)
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


@lowering_rule(BroadcastOp)
def lower_broadcast(op, ctx):
    """tt.broadcast: dst element x is src element x with the broadcast dims zeroed."""
    src_ty, dst_ty = op.operands[0].type, op.result.type
    if not isinstance(src_ty, TensorType):
        return lower_splat(op, ctx)
    dims = [d for d, (s, t) in enumerate(zip(src_ty.shape, dst_ty.shape)) if s != t]

    def to_src(c):
        return tuple(0 if d in dims else x for d, x in enumerate(c))

    return [remap_or_exchange(ctx, src_ty, ctx.get(op.operands[0]), dst_ty, to_src)]


@lowering_rule(ExpandDimsOp)
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


@lowering_rule(ReshapeOp)
def lower_reshape(op, ctx):
    """tt.reshape: same row-major placement -> register reindex, else a round trip (with
    `allow_reorder` we could keep any placement; we keep row-major order, which is valid)."""
    src_ty, dst_ty = op.operands[0].type, op.result.type
    return [remap_or_exchange(ctx, src_ty, ctx.get(op.operands[0]), dst_ty,
                              _reshape_map(src_ty.shape, dst_ty.shape))]


@lowering_rule(TransOp)
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


@lowering_rule(HintOp)
def lower_hint(op, ctx):
    """tt.hint: the value itself; axis analysis has read the attributes."""
    return [ctx.get(op.operands[0])]
