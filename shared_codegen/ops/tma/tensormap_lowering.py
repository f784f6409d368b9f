"""Lowering of the kernel-written tensor map ops (`tensormap.py`): PTX ISA 9.7.9.28
(tensormap.replace), 9.7.13.4.19 (tensormap.cp_fenceproxy) and 9.7.13.4.18
(fence.proxy.tensormap::generic). The steps follow Triton 3.6's TMAToLLVM."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import I8, I32, I64, VOID, LoweringError
from shared_codegen.ops.mbarrier.lowering import thread_zero
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.tma.tensormap import (TENSOR_MAP_BYTES, GlobalScratchAllocOp,
                                              ReinterpretTensorDescriptorOp,
                                              TensormapCreateOp, TensormapFenceproxyAcquireOp)

GENERIC = ir.PointerType()


def _asm(ctx, text: str, constraints: str, args) -> None:
    constraints = (constraints + "," if constraints else "") + "~{memory}"
    ctx.inline_asm(text, constraints, VOID, args, side_effects=True)


def _sreg(ctx, name: str) -> ir.Value:
    return ctx.builder.zext(ctx.intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", I32, []), I64)


def _warp_zero(ctx) -> ir.Value:
    return ctx.builder.icmp_unsigned("<", ctx.thread_id(), ctx.i32(32))


@lowering_rule(GlobalScratchAllocOp)
def lower_global_scratch_alloc(op, ctx):
    """base + (linear program id) * (bytes per program) + offset."""
    base = getattr(ctx, "global_scratch", None)
    if base is None:
        raise LoweringError("global scratch memory is used but the kernel has no scratch "
                            "parameter (module attribute global_scratch_bytes is missing)", op)
    b = ctx.builder
    x, y, z = (_sreg(ctx, f"ctaid.{a}") for a in "xyz")
    nx, ny = _sreg(ctx, "nctaid.x"), _sreg(ctx, "nctaid.y")
    program = b.add(x, b.mul(nx, b.add(y, b.mul(ny, z))))
    per_program = ir.Constant(I64, int(ctx.global_scratch_bytes))
    offset = b.add(b.mul(program, per_program), ir.Constant(I64, int(op.attrs["offset"])))
    return [b.gep(base, [offset], source_etype=I8)]


@lowering_rule(TensormapCreateOp)
def lower_tensormap_create(op, ctx):
    desc_ptr, staging, base, dims, strides = op.opdef.parts(op)
    b = ctx.builder
    smem, xor = ctx.get(staging)
    if not (isinstance(xor, ir.Constant) and int(xor.constant) == 0):
        raise LoweringError("the tensor map staging buffer must be a whole allocation", op)
    # Other threads may still read memory this buffer reuses.
    sync_shared(ctx, op, staging, "write")
    warp0 = _warp_zero(ctx)
    # Step 1: warp 0 zeroes the 128 bytes (one word per lane), so fields left at their
    # zero encoding (no interleave, no swizzle, zero fill, rank 1) need no replace.
    word = b.gep(smem, [b.mul(ctx.thread_id(), ctx.i32(4))], source_etype=I8)
    _asm(ctx, "@$0 st.shared.b32 [$1], 0;\n\t@$0 bar.warp.sync -1;", "b,l", [warp0, word])
    # Step 2: thread 0 sets every field.
    lead = [thread_zero(ctx), smem]
    field = "@$0 tensormap.replace.tile.{}.shared::cta.b1024.{} [$1]"
    base_bits = b.ptrtoint(ctx.get(base), I64)
    _asm(ctx, field.format("global_address", "b64") + ", $2;", "b,l,l", lead + [base_bits])
    rank = len(op.attrs["box_dim"])
    if rank > 1:
        _asm(ctx, field.format("rank", "b32") + f", {rank - 1};", "b,l", lead)
    for i, box in enumerate(op.attrs["box_dim"]):
        _asm(ctx, field.format("box_dim", "b32") + f", {i}, {box};", "b,l", lead)
    for i, dim in enumerate(dims):
        _asm(ctx, field.format("global_dim", "b32") + f", {i}, $2;", "b,l,r",
             lead + [ctx.get(dim)])
    for i, stride in enumerate(strides):
        _asm(ctx, field.format("global_stride", "b64") + f", {i}, $2;", "b,l,l",
             lead + [ctx.get(stride)])
    for i in range(rank):
        _asm(ctx, field.format("element_stride", "b32") + f", {i}, 1;", "b,l", lead)
    for name in ("elem_type", "swizzle_mode", "fill_mode"):
        value = op.attrs[name]
        if value:
            ptx_name = "elemtype" if name == "elem_type" else name
            _asm(ctx, field.format(ptx_name, "b32") + f", {value};", "b,l", lead)
    # Step 3: warp 0 publishes the map to global memory with release semantics.
    _asm(ctx, "@$0 bar.warp.sync -1;\n\t@$0 tensormap.cp_fenceproxy.global.shared::cta."
              f"tensormap::generic.release.gpu.sync.aligned [$1], [$2], {TENSOR_MAP_BYTES};",
         "b,l,l", [warp0, ctx.get(desc_ptr), smem])
    sync_shared(ctx, op, staging, "read")
    return None


@lowering_rule(TensormapFenceproxyAcquireOp)
def lower_tensormap_fenceproxy_acquire(op, ctx):
    """Warp 0 (thread 0 issues the copies that read the map) acquires it for the tensormap
    proxy. The commit / wait pair after the fence is Triton's workaround for a ptxas that
    otherwise lets a TMA op through it early."""
    address = ctx.builder.addrspacecast(ctx.get(op.operands[0]), GENERIC)
    _asm(ctx, f"@$0 fence.proxy.tensormap::generic.acquire.gpu [$1], {TENSOR_MAP_BYTES};\n\t"
              "@$0 cp.async.bulk.commit_group;\n\t@$0 cp.async.bulk.wait_group.read 0;",
         "b,l", [_warp_zero(ctx), address])
    return None


@lowering_rule(ReinterpretTensorDescriptorOp)
def lower_reinterpret_tensor_descriptor(op, ctx):
    # TMA instructions take the map's generic address.
    return [ctx.builder.addrspacecast(ctx.get(op.operands[0]), GENERIC)]
