"""Lowering of `ops/async_copy/definition.py`: `cp.async`, `cp.async.commit_group`,
`cp.async.wait_group` (PTX ISA 9.7.9.25.3).

Step 1. Vector width. One `cp.async` moves 4, 8 or 16 bytes (`.cg`: 16 only). A vector is
        the run of registers that is consecutive both in global memory (layout contiguity and
        the axis analysis: `vectorize.vector_width`) and in shared memory (the shared layout's
        offsets and the view's alignment: `shared_memory_rules._Access`), i.e. the common
        prefix of the two register-bit lists.
Step 2. Per vector, the shared address comes from the shared layout exactly as `local_store`
        computes it; the global address is the pointer register of the vector's first
        element.
Step 3. The mask becomes the `src-size` operand: 0 bytes read and the destination zero-filled
        for a masked-off vector. Threads that only replicate another thread's elements skip
        the copy (`ctx.replication_predicate`).
Step 4. Barriers: the copy is a write to its allocation when issued (it must not overwrite
        what other threads may still read), and again when a `wait_group` retires it (what
        another thread reads after the wait must be ordered by a `bar.sync`); both go through
        `sync_shared`, which inserts the barrier when an access since the last one conflicts.
"""

from __future__ import annotations

from shared_codegen.ir.core import lowering_rule
from shared_codegen.lowering.context import VOID, LoweringError, llvm_type
from shared_codegen.lowering.cross_thread import storage_type, thread_coord_values
from shared_codegen.lowering.vectorize import layout_vector, vector_width
from shared_codegen.ops.async_copy.definition import (COPY, AsyncCommitGroupOp,
                                                      AsyncCopyGlobalToLocalOp,
                                                      AsyncCopyMbarrierArriveOp, AsyncWaitOp)
from shared_codegen.ops.shared_memory.lowering import _Access, sync_shared


def _vector_registers(ctx, op, ptr, mask, acc: _Access) -> int:
    """Step 1: how many leading register bits form one cp.async vector."""
    gvec = vector_width(ptr, ctx, mask)
    _, lvec = layout_vector(ctx, ptr.type)
    gbits = min(gvec, lvec).bit_length() - 1
    n = 0
    while n < min(gbits, len(acc.vec_bits)) and acc.vec_bits[n] == n:
        n += 1
    nbytes = (1 << n) * acc.itemsize
    if nbytes < 4:
        need = 4 // acc.itemsize
        elem = ptr.type.element.element
        if mask is not None and vector_width(ptr, ctx, None) >= need > gvec:
            why = (f"the mask is not known to be constant over runs of {need} elements (bounds "
                   f"compared against should be multiples of 16, which argument "
                   f"specialization detects, or carry gl.multiple_of hints)")
        elif gvec < need:
            why = (f"the pointers are not known to be contiguous and {need * acc.itemsize}-"
                   f"byte aligned over runs of {need} {elem} elements (strides and offsets the "
                   f"axis analysis sees as multiples of 16, or gl.multiple_of / "
                   f"gl.max_contiguous hints) with {need} consecutive elements per thread in "
                   f"the layout")
        else:
            why = (f"the shared layout does not keep {need} consecutive elements together "
                   f"(a swizzle vec of at least {need})")
        raise LoweringError(f"cp.async copies 4, 8 or 16 bytes per instruction, but this copy "
                            f"can only move {nbytes} bytes at a time: {why}", op)
    return min(n, (16 // acc.itemsize).bit_length() - 1)


@lowering_rule(AsyncCopyGlobalToLocalOp)
def lower_async_copy(op, ctx):
    ptr, mem, mask = AsyncCopyGlobalToLocalOp.parts(op)
    mty, pty = mem.type, ptr.type
    acc = _Access(ctx, op, mty, pty, mem)
    nbits = _vector_registers(ctx, op, ptr, mask, acc)
    acc.vec_bits = list(range(nbits))
    nbytes = (1 << nbits) * acc.itemsize
    # .cg (cache in L2 only) streams tiles that are read once per CTA; it exists for
    # 16-byte copies only, so smaller vectors (and an explicit ".ca") use .ca.
    cache = ".cg" if nbytes == 16 and op.attrs.get("cache", ".cg") != ".ca" else ".ca"
    sync_shared(ctx, op, mem, "write", record=False)
    base, xor = ctx.get(mem)
    ptrs = ctx.get(ptr)
    masks = ctx.get(mask) if mask is not None else None
    st = storage_type(llvm_type(mty.element))
    (thread,) = thread_coord_values(ctx, acc.offsets)
    only_me = ctx.replication_predicate(pty)
    b = ctx.builder
    for const, members in acc.groups():
        dst = acc.address(ctx, base, xor, thread, const, st)
        src = ptrs[members[0]]
        args = [dst, src]
        constraints = "l,l"
        operands = f"[ $0 + 0 ], [ $1 + 0 ], {nbytes}"
        if masks is not None:
            # Step 3: a whole vector shares one mask value (vector_width saw to that).
            args.append(b.select(masks[members[0]], ctx.i32(nbytes), ctx.i32(0)))
            constraints += ",r"
            operands += f", ${len(args) - 1}"
        guard = ""
        if only_me is not None:
            args.append(only_me)
            constraints += ",b"
            guard = f"@${len(args) - 1} "
        ctx.inline_asm(f"{guard}cp.async{cache}.shared.global {operands};",
                       constraints + ",~{memory}", VOID, args, side_effects=True)
    return None


def _all_targets(ctx, op):
    """The descriptors every cp.async of the kernel writes (a wait may retire any of them,
    including copies issued later in program order, in an earlier loop iteration)."""
    top = op.outermost_op.parent
    seen = []
    for root in top.ops if top is not None else []:
        for inner in root.walk():
            if inner.name == COPY and inner.operands[1] not in seen:
                seen.append(inner.operands[1])
    return seen


@lowering_rule(AsyncCommitGroupOp)
def lower_commit_group(op, ctx):
    ctx.inline_asm("cp.async.commit_group;", "~{memory}", VOID, [], side_effects=True)
    return None


@lowering_rule(AsyncWaitOp)
def lower_async_wait(op, ctx):
    ctx.inline_asm(f"cp.async.wait_group {int(op.attrs['num'])};", "~{memory}", VOID, [],
                   side_effects=True)
    # Step 4: the retired copies land now; later reads by other threads need a barrier.
    for mem in _all_targets(ctx, op):
        sync_shared(ctx, op, mem, "write", check=False)
    return None


@lowering_rule(AsyncCopyMbarrierArriveOp)
def lower_async_copy_mbarrier_arrive(op, ctx):
    from shared_codegen.ops.mbarrier.lowering import bar_address, sync_barrier
    bar = op.operands[0]
    sync_barrier(ctx, op, bar, "read")
    # Every thread tracks its own copies, so every thread executes it (no thread-0
    # predicate, unlike mbarrier.arrive); `.noinc` makes each thread's arrival count.
    noinc = ".noinc" if op.attrs.get("no_increment") else ""
    ctx.inline_asm(f"cp.async.mbarrier.arrive{noinc}.shared.b64 [$0];", "l,~{memory}", VOID,
                   [bar_address(ctx, op, bar)], side_effects=True)
    return None


__all__ = ["lower_async_copy", "lower_commit_group", "lower_async_wait",
           "lower_async_copy_mbarrier_arrive"]
