"""Lowering of the TMA ops (PTX ISA 9.7.9.25, cp.async.bulk.tensor): thread 0 issues each copy,
one message per box of the block; stores are committed as bulk groups and retired by
`cp.async.bulk.wait_group`. Shared-memory ordering comes from
`ops/shared_memory/lowering.sync_shared`: a load is a write of its buffer that lands later
(ordered by the mbarrier wait, not by bar.sync), a store a read."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import Block, Operation, lowering_rule
from shared_codegen.lowering.context import I8, I32, I64, VOID, LoweringError
from shared_codegen.ops.cluster.lowering import cta_rank
from shared_codegen.ops.mbarrier.lowering import bar_address, thread_zero
from shared_codegen.ops.shared_memory.definition import offset_map
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.tma.definition import (REDUCE, STORE, AsyncTMACopyGlobalToLocalOp,
                                               AsyncTMACopyLocalToGlobalOp, AsyncTMAReduceOp,
                                               AsyncTMAStoreWaitOp, box_shape)
from shared_codegen.ops.tma.descriptor_dims import TensorDescriptorDimOp
from shared_codegen.ops.tma.multicast import slice_box, slice_rows


def _emit(ctx, text, constraints, args) -> None:
    constraints = (constraints + "," if constraints else "") + "~{memory}"
    ctx.inline_asm(text, constraints, VOID, args, side_effects=True)


def _boxes(ctx, op, desc, smem, coords, base=None, lowered=None):
    """Per TMA message: the shared address of its box and its coordinates, innermost first.
    (`base` / `lowered`: a multicast slice's start and coordinates instead of the block's.)"""
    ty = desc.type
    box = box_shape(ty)
    start_base, xor = ctx.get(smem)
    if not (hasattr(xor, "constant") and int(xor.constant) == 0):
        raise LoweringError("TMA needs a shared memory view that starts a whole tile", op)
    base = start_base if base is None else base
    inner_bits = offset_map(smem.type).dims[-1].bits
    itemsize = ty.element.itemsize
    lowered = [ctx.get(c) for c in coords] if lowered is None else lowered
    out = []
    for k in range(ty.block_shape[-1] // box[-1]):
        start = k * box[-1]
        offset = 0
        for j, v in enumerate(inner_bits):
            if start >> j & 1:
                offset ^= v
        addr = base if not offset else ctx.builder.gep(base, [ctx.i32(offset * itemsize)],
                                                       source_etype=I8)
        inner = lowered[-1] if not start else ctx.builder.add(lowered[-1], ctx.i32(start))
        if ty.layout.fp4_padded:  # the map's innermost dim counts e2m1 values, two per byte
            inner = ctx.builder.shl(inner, ctx.i32(1))
        out.append((addr, [inner] + lowered[-2::-1]))
    return out


def _store_sources(op):
    """The shared views every TMA store of the function reads (a wait may retire stores
    issued anywhere before it, earlier loop iterations included)."""
    block = op.parent
    while block is not None and isinstance(getattr(block.parent, "parent", None), Operation):
        block = block.parent.parent.parent
    seen = []
    for root in block.ops if block is not None else []:
        for inner in root.walk():
            if inner.name in (STORE, REDUCE) and inner.operands[1] not in seen:
                seen.append(inner.operands[1])
    return seen


def _check_multicast_use(ctx, op, desc) -> None:
    """A descriptor some multicast load uses has the slice as its map's box
    (ops/tma/multicast.py): every TMA op through it must be such a load. Records the box
    per descriptor for the launch (`ctx.tma_boxes`)."""
    boxes = getattr(ctx, "tma_boxes", None)
    if boxes is None:
        boxes = ctx.tma_boxes = {}
        for inner in _kernel_ops(op):
            if isinstance(inner.opdef, AsyncTMACopyGlobalToLocalOp) and \
                    inner.attrs.get("multicast"):
                d = inner.operands[0]
                boxes[_outermost(d)] = slice_box(d.type, getattr(ctx, "num_ctas", 1))
    desc = _outermost(desc)
    if desc in boxes and not op.attrs.get("multicast"):
        raise LoweringError(f"this TMA op uses the descriptor `{desc.name_hint or 'desc'}`, "
                            f"which a multicast load also uses; its tensor map's box is then "
                            f"the multicast slice {boxes[desc]}, not the block "
                            f"{list(desc.type.block_shape)}: pass a second descriptor of the "
                            f"same tensor for the other copies", op)


def _outermost(value):
    """A descriptor a warp_specialize partition captured, as the value passed in (the kernel
    parameter the launch encodes)."""
    from shared_codegen.ops.warp_specialize.definition import WarpSpecializeOp, worker_operands
    while isinstance(value.owner, Block):
        region = value.owner.parent
        op = getattr(region, "parent", None)
        if not isinstance(op, Operation) or not isinstance(op.opdef, WarpSpecializeOp):
            break
        index = op.regions.index(region)
        if index == 0:
            break
        value = worker_operands(op)[index - 1][value.index]
    return value


def _kernel_ops(op):
    block = op.parent
    while block is not None and isinstance(getattr(block.parent, "parent", None), Operation):
        block = block.parent.parent.parent
    for root in block.ops if block is not None else []:
        yield from root.walk()


@lowering_rule(AsyncTMACopyGlobalToLocalOp)
def lower_tma_load(op, ctx):
    desc, smem, bar, coords, pred = op.opdef.parts(op)
    _check_multicast_use(ctx, op, desc)
    # The copy overwrites the buffer: order it after other threads' earlier reads. Its
    # bytes arrive later and are ordered by the mbarrier wait, not by bar.sync.
    sync_shared(ctx, op, smem, "write", record=False)
    sync_shared(ctx, op, bar, "read", mbarrier_use=True)
    if op.attrs.get("multicast"):
        return _lower_multicast_load(op, ctx, desc, smem, bar, coords, pred)
    rank = desc.type.rank
    lead = [thread_zero(ctx, pred), ctx.get(desc), bar_address(ctx, op, bar)]
    for dst, box_coords in _boxes(ctx, op, desc, smem, coords):
        crd = ", ".join(f"${4 + i}" for i in range(rank))
        _emit(ctx, f"@$0 cp.async.bulk.tensor.{rank}d.shared::cluster.global."
                   f"mbarrier::complete_tx::bytes [$3], [$1, {{{crd}}}], [$2];",
              "b,l,l,l" + ",r" * rank, lead + [dst] + box_coords)
    return None


def _lower_multicast_load(op, ctx, desc, smem, bar, coords, pred):
    """CTA r's slice (rows [r * M/N, (r+1) * M/N)) of the block, one message per box of the
    slice, into every CTA of the cluster (`.multicast::cluster`, PTX ISA 9.7.9.27.1.2)."""
    b = ctx.builder
    num_ctas = ctx.num_ctas
    rows = slice_rows(desc.type.block_shape, num_ctas)
    rank = cta_rank(ctx)
    first_row = b.mul(rank, ctx.i32(rows))
    # The slice's start in shared memory: the layout's offset of row `first_row`, an XOR of
    # the row bits' offsets (rows is a power of two, so rank's bits are row bits).
    row_bits = offset_map(smem.type).dims[0].bits
    itemsize = desc.type.element.itemsize
    offset = ctx.i32(0)
    shift = rows.bit_length() - 1
    for j in range(num_ctas.bit_length() - 1):
        vector = row_bits[shift + j] * itemsize if shift + j < len(row_bits) else 0
        bit = b.and_(b.lshr(rank, ctx.i32(j)), ctx.i32(1))
        offset = b.xor(offset, b.mul(bit, ctx.i32(vector)))
    base, _ = ctx.get(smem)
    base = b.gep(base, [offset], source_etype=I8)
    lowered = [ctx.get(c) for c in coords]
    lowered[0] = b.add(lowered[0], first_row)
    mask = ir.Constant(ir.IntType(16), (1 << num_ctas) - 1)
    rank_n = desc.type.rank
    lead = [thread_zero(ctx, pred), ctx.get(desc), bar_address(ctx, op, bar), mask]
    for dst, box_coords in _boxes(ctx, op, desc, smem, coords, base, lowered):
        crd = ", ".join(f"${5 + i}" for i in range(rank_n))
        _emit(ctx, f"@$0 cp.async.bulk.tensor.{rank_n}d.shared::cluster.global."
                   f"mbarrier::complete_tx::bytes.multicast::cluster [$4], [$1, {{{crd}}}], "
                   f"[$2], $3;", "b,l,l,h,l" + ",r" * rank_n, lead + [dst] + box_coords)
    return None


def _bulk_from_shared(op, ctx, instruction: str):
    """`instruction` (a cp.async.bulk / cp.reduce.async.bulk tensor form, rank included) from
    the shared buffer to each box of the descriptor, by thread 0, then one bulk group."""
    desc, smem, coords = op.operands[0], op.operands[1], op.operands[2:]
    _check_multicast_use(ctx, op, desc)
    # Every thread's writes of the buffer (each followed by its fence_async_shared) must
    # be done before thread 0 hands it to the TMA unit.
    sync_shared(ctx, op, smem, "read")
    rank = desc.type.rank
    lead = [thread_zero(ctx), ctx.get(desc)]
    for src, box_coords in _boxes(ctx, op, desc, smem, coords):
        crd = ", ".join(f"${3 + i}" for i in range(rank))
        _emit(ctx, f"@$0 {instruction} [$1, {{{crd}}}], [$2];", "b,l,l" + ",r" * rank,
              lead + [src] + box_coords)
    _emit(ctx, "@$0 cp.async.bulk.commit_group;", "b", [lead[0]])
    return None


@lowering_rule(AsyncTMACopyLocalToGlobalOp)
def lower_tma_store(op, ctx):
    rank = op.operands[0].type.rank
    return _bulk_from_shared(
        op, ctx, f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group")


@lowering_rule(AsyncTMAReduceOp)
def lower_tma_reduce(op, ctx):
    """`cp.reduce.async.bulk.tensor` (PTX ISA 9.7.9.27.2): like a store, one bulk group per
    op; the element type comes from the tensor map."""
    rank = op.operands[0].type.rank
    return _bulk_from_shared(
        op, ctx, f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta."
                 f"{op.attrs['kind']}.tile.bulk_group")


@lowering_rule(AsyncTMAStoreWaitOp)
def lower_tma_store_wait(op, ctx):
    suffix = "" if op.attrs.get("read_only") is False else ".read"
    _emit(ctx, f"cp.async.bulk.wait_group{suffix} {op.attrs['pendings']};", "", [])
    # Thread 0's sources are free from here; record a write so that other threads'
    # next access of them waits for thread 0 at a bar.sync.
    for src in _store_sources(op):
        sync_shared(ctx, op, src, "write", check=False)
    return None


@lowering_rule(TensorDescriptorDimOp)
def lower_tensor_descriptor_dim(op, ctx):
    """A load from the descriptor parameter's fields after the map (i64 each)."""
    desc = op.operands[0]
    ty = desc.type
    if desc.defining_op is not None:
        what = {"shape": "desc.shape", "stride": "desc.strides", "base": "its base",
                "fill": "its padding"}
        raise LoweringError(f"{what[op.attrs['kind']]} is only known for descriptors passed "
                            f"as kernel arguments, not for one the kernel built", op)
    kind, index = op.attrs["kind"], op.attrs["index"]
    offset = {"base": ty.DESC_PARAM_BASE, "shape": ty.DESC_PARAM_SHAPE + 8 * index,
              "stride": ty.param_stride_offset(index), "fill": ty.param_fill_offset}[kind]
    b = ctx.builder
    field = b.gep(ctx.get(desc), [ctx.i32(offset)], source_etype=I8)
    value = b.load(field, typ=I64, align=8)
    if kind == "shape":
        return [b.trunc(value, I32)]
    if kind == "base":
        return [b.inttoptr(value, ctx.llvm_type(op.result.type))]
    return [value]
