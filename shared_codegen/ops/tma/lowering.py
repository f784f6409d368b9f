"""Lowering of the TMA ops (PTX ISA 9.7.9.25, cp.async.bulk.tensor): thread 0 issues each copy,
one message per box of the block; stores are committed as bulk groups and retired by
`cp.async.bulk.wait_group`. Shared-memory ordering comes from
`ops/shared_memory/lowering.sync_shared`: a load is a write of its buffer that lands later
(ordered by the mbarrier wait, not by bar.sync), a store a read."""

from __future__ import annotations

import itertools

from llvmlite import ir

from shared_codegen.ir.core import Block, Operation, lowering_rule
from shared_codegen.lowering.context import I8, I32, I64, VOID, LoweringError
from shared_codegen.ops.cluster.lowering import cta_rank
from shared_codegen.ops.mbarrier.lowering import bar_address, sync_barrier, thread_zero
from shared_codegen.ops.shared_memory.definition import offset_map
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.tma.definition import (REDUCE, STORE, AsyncTMACopyGlobalToLocalOp,
                                               AsyncTMACopyLocalToGlobalOp, AsyncTMAReduceOp,
                                               AsyncTMAStoreWaitOp, box_shape)
from shared_codegen.ops.tma.descriptor_dims import TensorDescriptorDimOp
from shared_codegen.ops.tma.gather_scatter import SCATTER
from shared_codegen.ops.tma.tensormap import CREATE, FILL_MODES, REINTERPRET, TensormapCreateOp
from shared_codegen.ops.tma.multicast import slice_box, slice_rows, split_dim


def _emit(ctx, text, constraints, args) -> None:
    constraints = (constraints + "," if constraints else "") + "~{memory}"
    ctx.inline_asm(text, constraints, VOID, args, side_effects=True)


def _boxes(ctx, op, desc, smem, coords, base=None, lowered=None):
    """Per TMA message: the shared address of its box and its coordinates, innermost first.
    Boxes tile the block along every dim that exceeds one box (256 rows, or one swizzle
    width along the contiguous dim); a box's shared offset is the layout's offset of its
    first element, the XOR of each dim's offset bits. (`base` / `lowered`: a multicast
    slice's start and coordinates instead of the block's.)"""
    ty = desc.type
    start_base, xor = ctx.get(smem)
    if not (hasattr(xor, "constant") and int(xor.constant) == 0):
        raise LoweringError("TMA needs a shared memory view that starts a whole tile", op)
    # A store's source may be a whole number of boxes smaller than the block (check_smem);
    # a multicast slice (`base` given) tiles the block.
    shape = ty.block_shape if base is not None else smem.type.shape
    base = start_base if base is None else base
    dims = offset_map(smem.type).dims
    itemsize = ty.element.itemsize
    lowered = [ctx.get(c) for c in coords] if lowered is None else lowered
    out = []
    for starts, box_coords in box_coordinates(ctx, ty, shape, lowered):
        offset = 0
        for dim, start in zip(dims, starts):
            if dim.bits is None:  # a buffer dim: whole tiles one after another
                offset += start * dim.stride
                continue
            for j, v in enumerate(dim.bits):
                if start >> j & 1:
                    offset ^= v
        addr = base if not offset else ctx.builder.gep(base, [ctx.i32(offset * itemsize)],
                                                       source_etype=I8)
        out.append((addr, box_coords))
    return out


def box_coordinates(ctx, ty, shape, lowered):
    """Per TMA box of a `shape` block of descriptor type `ty`: its start (element offsets,
    outermost first) and its coordinates for PTX (`lowered`, the block's, plus the start;
    innermost first). Boxes tile every dim the block exceeds one box along."""
    box = box_shape(ty)
    for index in itertools.product(*(range(size // b) for size, b in zip(shape, box))):
        starts = [k * b for k, b in zip(index, box)]
        coords = [c if not start else ctx.builder.add(c, ctx.i32(start))
                  for c, start in zip(lowered, starts)]
        if ty.layout.fp4_padded:  # the map's innermost dim counts e2m1 values, two per byte
            coords[-1] = ctx.builder.shl(coords[-1], ctx.i32(1))
        yield starts, coords[::-1]


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
            elif inner.name == SCATTER and inner.operands[3] not in seen:
                seen.append(inner.operands[3])
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
    sync_shared(ctx, op, smem, "write", record=False, one_thread=True)
    sync_barrier(ctx, op, bar, "read", one_thread=True)
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
    """CTA r's slice (rows [r * M/N, (r+1) * M/N) of the split dim) of the block, one message
    per box of the slice, into every CTA of the cluster (`.multicast::cluster`, PTX ISA
    9.7.9.27.1.2)."""
    b = ctx.builder
    num_ctas = ctx.num_ctas
    dim = split_dim(desc.type.block_shape)
    rows = slice_rows(desc.type.block_shape, num_ctas)
    rank = cta_rank(ctx)
    first_row = b.mul(rank, ctx.i32(rows))
    # The slice's start in shared memory: the layout's offset of row `first_row`, an XOR of
    # the row bits' offsets (rows is a power of two, so rank's bits are row bits).
    row_bits = offset_map(smem.type).dims[dim].bits
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
    lowered[dim] = b.add(lowered[dim], first_row)
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
    sync_shared(ctx, op, smem, "read", one_thread=True)
    rank = desc.type.rank
    # One asm for every box, behind one branch that only thread 0 takes, rather than one
    # predicated instruction a box: ptxas wraps each predicated TMA in an elect loop and
    # made every warp step over each box (attention's dQ reduce, 16 boxes: 579 -> 526
    # instructions a block in the backward's loop).
    lines = ["@!$0 bra $$tma_skip${:uid};"]
    args, kinds = [thread_zero(ctx), ctx.get(desc)], ["b", "l"]
    for src, box_coords in _boxes(ctx, op, desc, smem, coords):
        at = len(args)
        crd = ", ".join(f"${at + 1 + i}" for i in range(rank))
        lines.append(f"{instruction} [$1, {{{crd}}}], [${at}];")
        args += [src] + box_coords
        kinds += ["l"] + ["r"] * rank
    lines += ["cp.async.bulk.commit_group;", "$$tma_skip${:uid}:"]
    _emit(ctx, "\n".join(lines), ",".join(kinds), args)
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


def _tensormap_create_of(desc):
    """The `tensormap_create` that wrote the map a `reinterpret_tensor_descriptor` views (in
    the same function, before it), or None."""
    reinterpret = desc.defining_op
    if reinterpret.name != REINTERPRET:
        return None
    scratch = reinterpret.operands[0]
    block = reinterpret.parent
    while block is not None and isinstance(getattr(block.parent, "parent", None), Operation):
        block = block.parent.parent.parent
    for root in block.ops if block is not None else []:
        for inner in root.walk():
            if inner.name == CREATE and inner.operands[0] is scratch:
                return inner
    return None


def _is_kernel_argument(value) -> bool:
    block = value.owner
    region = getattr(block, "parent", None)
    return getattr(region, "parent", None) is not None and \
        not isinstance(region.parent, Operation)


def _builds_descriptors(op) -> bool:
    block = op.parent
    while block is not None and isinstance(getattr(block.parent, "parent", None), Operation):
        block = block.parent.parent.parent
    return any(inner.name == REINTERPRET for root in (block.ops if block else [])
               for inner in root.walk())


def _created_dim(ctx, create, ty, kind, index):
    """A kernel-built descriptor's shape, stride, base or fill: the values it was made from
    (the map lists dims innermost first, strides in bytes without the innermost)."""
    _, _, base, dims, strides = TensormapCreateOp.parts(create)
    rank = ty.rank
    if kind == "shape":
        return ctx.get(dims[rank - 1 - index])
    if kind == "base":
        return ctx.get(base)
    if kind == "fill":
        return ir.Constant(I64, int(create.attrs["fill_mode"] == FILL_MODES["nan"]))
    if index == rank - 1:
        return ir.Constant(I64, 1)
    itemsize = ir.Constant(I64, ty.element.itemsize)
    return ctx.builder.sdiv(ctx.get(strides[rank - 2 - index]), itemsize)


@lowering_rule(TensorDescriptorDimOp)
def lower_tensor_descriptor_dim(op, ctx):
    """A load from the descriptor parameter's fields after the map (i64 each)."""
    desc = op.operands[0]
    ty = desc.type
    kind, index = op.attrs["kind"], op.attrs["index"]
    if desc.defining_op is not None:
        create = _tensormap_create_of(desc)
        if create is None:
            what = {"shape": "desc.shape", "stride": "desc.strides", "base": "its base",
                    "fill": "its padding"}
            raise LoweringError(f"{what[kind]} is only known for descriptors passed as kernel "
                                f"arguments or built by make_tensor_descriptor", op)
        return [_created_dim(ctx, create, ty, kind, index)]
    if not _is_kernel_argument(desc) and _builds_descriptors(op):
        # A loop- or branch-carried descriptor may be a kernel-built one, whose map has no
        # fields after it: refuse rather than read past it.
        raise LoweringError("desc.shape / desc.strides of a descriptor carried through a loop "
                            "or branch is not supported in a kernel that also builds "
                            "descriptors with make_tensor_descriptor; read them before the "
                            "loop", op)
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
