"""Lowering of `ttg.warp_specialize`: warpgroup-role branches, register budgets and named
barriers.

The kernel is launched with `WarpPlan.total_warps` warps: the default warps
`[0, num_warps)` run the kernel's code, worker i runs on `[starts[i], starts[i] + n_i)`, and
padding warps fill the last warpgroup. The control flow:

    entry:        warp >= num_warps ? worker path : default path
    default path: kernel code before the op
                  thread 0 stores the workers' captures to shared memory
                  bar.sync 0                              (hand-off: the whole CTA)
                  setmaxnreg.{inc|dec} default_regs
                  default region
                  bar.sync 0                              (join: workers are done)
                  kernel code after the op
    worker path:  bar.sync 0                              (hand-off)
                  load the captures
                  per warpgroup: setmaxnreg.{inc|dec} its count
                  per partition (warp id range): its region; padding warps skip
                  bar.sync 0                              (join)
                  ret

Several `gl.warp_specialize` calls: the worker warps wait in a dispatch loop instead, and
each call is one case of it (all plans share the launch size and `entry_regs`):

    worker path:  dispatch: bar.sync 0                    (hand-off of some call)
                  k = the selector thread 0 wrote         (-1: the kernel is done: ret)
                  call k: load its captures; per warpgroup setmaxnreg to its count; its
                  partitions; bar.sync 0 (join); per warpgroup setmaxnreg back to
                  entry_regs; back to dispatch
    default path: at call k: thread 0 writes the captures and k; bar.sync 0; setmaxnreg
                  default_regs; default region; bar.sync 0; setmaxnreg back to entry_regs;
                  at the kernel's end: thread 0 writes -1; bar.sync 0

The registers go back to the launch share after each join (increments after the barrier,
so an `.inc` never waits for registers the other side releases only after that barrier).

Why this shape:
- Worker warps never run the kernel's code outside their partition (its layouts cover the
  default warps only), so the values they need come through shared memory, published before
  the hand-off barrier. Kernel parameters (pointers, scalars, tensor maps) are read directly.
- `setmaxnreg` (PTX ISA 9.7.17.1) must be executed by all warps of a warpgroup as one
  instruction, so it sits in one block per warpgroup, before the branch into partitions; it
  needs the kernel's starting cap (`.maxnreg`, the plan's `entry_regs`) and `.maxntid`.
- `bar.sync 0` waits for every thread of the CTA; inside a partition that would wait for
  warps that never come. So in a warp-specialized kernel every barrier the lowering emits
  (`ctx.barrier()`: gl.thread_barrier, shared-memory hazards, the barrier before an mbarrier
  arrive) is a named barrier (PTX ISA 9.7.13.1 `bar.sync id, nthreads`): id 1 for the
  default warps, 2 + i for worker i; 0 is left to the hand-off and the join.
- Inside a partition, thread and warp ids count from the partition's first warp and
  `ctx.num_warps` is its warp count, so layouts, `thread_zero` and warpgroup indices
  (wgmma) work unchanged. Each partition gets its own prologue block for the per-thread
  values rules cache, and its own scratch shared memory (partitions run concurrently).
"""

from __future__ import annotations

from typing import List, Optional

from llvmlite import ir

from shared_codegen.ir.core import Function, lowering_rule, walk_block
from shared_codegen.ir.types import PointerType, ScalarType, SharedMemoryType, TensorMemoryType
from shared_codegen.lowering.context import I8, I32, I64, VOID, LoweringError
from shared_codegen.ops.warp_specialize.definition import (WarpPlan, WarpSpecializeOp,
                                                           worker_operands)

# The non-atomic writes of an mbarrier word (shared_codegen/ops/mbarrier/definition.py); a partition without
# them needs no bar.sync before its waits and arrives (shared_memory_rules.sync_shared).
BARRIER_WORD_WRITERS = ("ttng.init_barrier", "ttng.inval_barrier")
ALL_THREADS_BARRIER = 0
DEFAULT_BARRIER = 1
SCRATCH_ALIGN = 128


class WarpSpecLowering:
    """Per-kernel state: the plans, the ops, where the worker path starts, capture slots."""

    def __init__(self, ops, plans: List[WarpPlan], fn: Function):
        self.ops, self.plans = list(ops), list(plans)
        self.kernel_args = {id(a): i for i, a in enumerate(fn.args)}
        self.worker_entry: Optional[ir.Block] = None
        self.slots = {}  # id(operand) -> byte offset of its capture slot
        self.capture_base = 0
        self.selector = None  # several calls: the slot of the call the workers run next
        self.dispatch: Optional[ir.Block] = None
        self.switch = None

    @property
    def plan(self) -> WarpPlan:
        """The launch-wide fields (`total_warps`, `entry_regs`) are every plan's."""
        return self.plans[0]

    @property
    def several(self) -> bool:
        return len(self.ops) > 1

    @property
    def total_warps(self) -> int:
        return self.plan.total_warps

    def enter(self, ctx) -> None:
        """Before the kernel body: reserve capture slots, switch the default warps' barriers
        to their named barrier and send the worker warps to the (still empty) worker path."""
        base = -(-ctx.static_shared_bytes // 16) * 16
        at = base
        for op in self.ops:
            for v in op.operands:
                if id(v) in self.kernel_args or id(v) in self.slots:
                    continue
                self.slots[id(v)] = at
                at += 16
        if self.several:
            self.selector = at
            at += 16
        self.capture_base = base
        ctx.static_shared_bytes = at
        ctx.shared_bytes = max(ctx.shared_bytes, at)
        ctx.named_barrier = (DEFAULT_BARRIER, 32 * self.plan.num_warps)
        ctx.warp_spec = self
        b = ctx.builder
        self.worker_entry = ctx.function.append_basic_block("ws.workers")
        default = ctx.function.append_basic_block("ws.default")
        is_worker = b.icmp_unsigned(">=", ctx.warp_id(), ctx.i32(self.plan.num_warps))
        b.cbranch(is_worker, self.worker_entry, default)
        self._repeat_cluster_barriers(ctx)
        if self.several:
            self._build_dispatch(ctx)
        b.position_at_end(default)

    def _repeat_cluster_barriers(self, ctx) -> None:
        """`barrier.cluster` waits for every thread of the cluster: the worker (and padding)
        warps arrive and wait at the kernel's top-level cluster barriers before the first
        hand-off, as the default warps do (ops/cluster/definition.check_placement refuses
        the placements this cannot mirror)."""
        from shared_codegen.ops.cluster.definition import ClusterArriveOp, ClusterWaitOp
        top = self.ops[0].parent
        before = top.ops[:top.ops.index(self.ops[0])]
        barriers = [o for o in before if isinstance(o.opdef, (ClusterArriveOp, ClusterWaitOp))]
        if not barriers:
            return
        saved = ctx.builder
        ctx.builder = ir.IRBuilder(self.worker_entry)
        try:
            for o in barriers:
                o.opdef.lower(o, ctx)
        finally:
            ctx.builder = saved

    def _build_dispatch(self, ctx) -> None:
        """The workers' loop: wait for a hand-off, run the call it names, or return."""
        saved = ctx.builder
        fn = ctx.function
        self.dispatch = fn.append_basic_block("ws.dispatch")
        done = fn.append_basic_block("ws.done")
        ctx.builder = ir.IRBuilder(self.worker_entry)
        try:
            ctx.builder.branch(self.dispatch)
            ctx.builder.position_at_end(self.dispatch)
            _cta_barrier(ctx)
            which = ctx.builder.load(_slot(ctx, self.selector), typ=I32, align=4)
            self.switch = ctx.builder.switch(which, done)
            ctx.builder.position_at_end(done)
            ctx.builder.ret_void()
        finally:
            ctx.builder = saved

    def exit(self, ctx) -> None:
        """The default path's end (several calls): release the workers from their loop."""
        if not self.several:
            return
        _write_selector(ctx, self, -1)
        _cta_barrier(ctx)


# ---- PTX helpers -----------------------------------------------------------------------------

def _cta_barrier(ctx) -> None:
    """`bar.sync 0`: every thread of the CTA (hand-off and join)."""
    ctx.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", VOID, [ctx.i32(0)])
    ctx.barrier_count += 1
    ctx.barrier_block = ctx.builder.block


def _setmaxnreg(ctx, regs: int, current: int) -> None:
    """Move this warpgroup's per-thread register cap from `current` to `regs` (PTX ISA
    9.7.17.1 setmaxnreg: `.inc` blocks until the CTA's pool has the registers)."""
    if regs == current:
        return
    action = "inc" if regs > current else "dec"
    ctx.intrinsic(f"llvm.nvvm.setmaxnreg.{action}.sync.aligned.u32", VOID, [ctx.i32(regs)])


# ---- captures --------------------------------------------------------------------------------

def _slot(ctx, offset: int):
    return ctx.builder.gep(ctx.shared_base(), [ctx.i32(offset)], source_etype=I8)


def _everywhere(ctx, value) -> bool:
    """True for lowered values every warp has: constants, kernel parameters and what the
    kernel's prologue computed (it runs before the warps split). Shared memory views of
    allocations are typically such; passing them by value keeps them constant, which rules
    such as the mbarrier and TMA ones require."""
    if isinstance(value, (ir.Constant, ir.Argument, ir.GlobalValue)):
        return True
    return isinstance(value, ir.Instruction) and value.parent is ctx.kernel_prologue


def _store_capture(ctx, v, lowered, offset: int) -> None:
    b = ctx.builder
    ty = v.type
    if isinstance(ty, SharedMemoryType):
        base, xor = lowered
        if not _everywhere(ctx, base):
            b.store(b.ptrtoint(base, I64), _slot(ctx, offset), align=8)
        if not _everywhere(ctx, xor):
            b.store(xor, _slot(ctx, offset + 8), align=4)
    elif isinstance(ty, PointerType):
        b.store(b.ptrtoint(lowered, I64), _slot(ctx, offset), align=8)
    elif isinstance(ty, ScalarType) and ty.bits == 1:
        b.store(b.zext(lowered, I8), _slot(ctx, offset), align=1)
    else:
        b.store(lowered, _slot(ctx, offset), align=8)


def _load_capture(ctx, v, offset: int):
    b = ctx.builder
    ty = v.type
    lowered = ctx.get(v)  # what the default warps hold: reused where every warp has it
    if isinstance(ty, SharedMemoryType):
        base, xor = lowered
        if not _everywhere(ctx, base):
            base = b.inttoptr(b.load(_slot(ctx, offset), typ=I64, align=8),
                              ir.PointerType(addrspace=3))
        if not _everywhere(ctx, xor):
            xor = b.load(_slot(ctx, offset + 8), typ=I32, align=4)
        return [base, xor]
    if _everywhere(ctx, lowered):
        return lowered
    if isinstance(ty, PointerType):
        raw = b.load(_slot(ctx, offset), typ=I64, align=8)
        return b.inttoptr(raw, ctx.llvm_type(ty))
    if isinstance(ty, ScalarType) and ty.bits == 1:
        return b.trunc(b.load(_slot(ctx, offset), typ=I8, align=1), ir.IntType(1))
    # A tensor-memory descriptor is its i32 TMEM address (ops/tensor_memory/lowering.py).
    typ = I32 if isinstance(ty, TensorMemoryType) else ctx.llvm_type(ty)
    return b.load(_slot(ctx, offset), typ=typ, align=8)


def _write_selector(ctx, ws: WarpSpecLowering, which: int) -> None:
    b = ctx.builder
    store = ctx.function.append_basic_block("ws.select")
    after = ctx.function.append_basic_block("ws.selected")
    b.cbranch(b.icmp_unsigned("==", ctx.thread_id(), ctx.i32(0)), store, after)
    b.position_at_end(store)
    b.store(ctx.i32(which), _slot(ctx, ws.selector), align=4)
    b.branch(after)
    b.position_at_end(after)


def _publish_captures(ctx, ws: WarpSpecLowering, op, index: int) -> None:
    """Thread 0 of the default warps writes the captures the workers cannot compute (and,
    with several calls, which call this is)."""
    if ws.several:
        _write_selector(ctx, ws, index)
    if not ws.slots:
        return
    b = ctx.builder
    store = ctx.function.append_basic_block("ws.publish")
    after = ctx.function.append_basic_block("ws.handoff")
    b.cbranch(b.icmp_unsigned("==", ctx.thread_id(), ctx.i32(0)), store, after)
    b.position_at_end(store)
    done = set()
    for v in op.operands:
        if id(v) in ws.slots and id(v) not in done:
            done.add(id(v))
            lowered = ctx.get(v)
            if isinstance(v.type, SharedMemoryType) or not _everywhere(ctx, lowered):
                _store_capture(ctx, v, lowered, ws.slots[id(v)])
    b.branch(after)
    b.position_at_end(after)


def _receive_captures(ctx, ws: WarpSpecLowering, op) -> List[List]:
    loaded = {}
    per_worker = []
    for caps in worker_operands(op):
        values = []
        for v in caps:
            if id(v) in ws.kernel_args:
                values.append(ctx.get(v))  # a kernel parameter: every thread has it
            else:
                if id(v) not in loaded:
                    loaded[id(v)] = _load_capture(ctx, v, ws.slots[id(v)])
                values.append(loaded[id(v)])
        per_worker.append(values)
    return per_worker


# ---- partitions ------------------------------------------------------------------------------

def _settles_barrier_words(block) -> bool:
    return not any(op.name in BARRIER_WORD_WRITERS for op in walk_block(block))


@lowering_rule(WarpSpecializeOp)
def lower_warp_specialize(op, ctx):
    ws: WarpSpecLowering = ctx.warp_spec
    index = next((k for k, o in enumerate(ws.ops) if o is op), None) if ws else None
    if index is None:
        raise LoweringError("internal: gl.warp_specialize reached lowering without a plan "
                            "(the warp_specialization_planning stage makes it)", op)
    plan = ws.plans[index]

    # Step 1: the default warps hand the captures over and take their registers.
    _publish_captures(ctx, ws, op, index)
    _cta_barrier(ctx)
    _setmaxnreg(ctx, plan.default_regs, plan.entry_regs)

    # Step 2: the default region, on these warps (ids and barrier unchanged).
    ctx.mbarrier_words_settled = _settles_barrier_words(op.regions[0].block)
    results = ctx.lower_block(op.regions[0].block, [])
    ctx.mbarrier_words_settled = False
    _cta_barrier(ctx)
    if ws.several:  # the launch share again, for the code up to the next call
        _setmaxnreg(ctx, plan.entry_regs, plan.default_regs)
    ctx.shared_accesses_ordered(ctx.builder.block)

    # Step 3: the worker path, built at the block the entry branch sends worker warps to.
    saved_builder = ctx.builder
    scratch = -(-max(ctx.shared_bytes, ctx.static_shared_bytes) // SCRATCH_ALIGN) * \
        SCRATCH_ALIGN
    saved_named = ctx.named_barrier
    if ws.several:
        start = ctx.function.append_basic_block(f"ws.call{index}")
        ws.switch.add_case(ctx.i32(index), start)
        ctx.builder = ir.IRBuilder(start)
    else:
        ctx.builder = ir.IRBuilder(ws.worker_entry)
    try:
        _worker_path(ctx, ws, op, plan, scratch)
    finally:
        ctx.builder = saved_builder
        ctx.named_barrier = saved_named
    # The join ordered every access of every partition: nothing pending after it.
    ctx.shared_accesses_ordered(ctx.builder.block)
    return results


def _worker_path(ctx, ws: WarpSpecLowering, op, plan: WarpPlan, scratch: int) -> None:
    fn = ctx.function
    if not ws.several:  # with several calls the dispatch loop's barrier was the hand-off
        _cta_barrier(ctx)
    args = _receive_captures(ctx, ws, op)
    b = ctx.builder

    # One setmaxnreg per warpgroup, each a single instruction all its warps execute. The
    # warpgroups holding the same partitions share one block that runs only those
    # partitions: no path joins code of two register budgets, or ptxas drops setmaxnreg
    # (C7507) to give the merged code the smaller budget's registers.
    groups = {}
    for g, regs in plan.warpgroup_regs:
        members = tuple(i for i in range(len(plan.worker_num_warps))
                        if plan.starts[i] // 4 <= g
                        <= (plan.starts[i] + plan.worker_num_warps[i] - 1) // 4)
        groups.setdefault((members, regs), []).append(g)
    join = fn.append_basic_block("ws.join")
    warpgroup = b.lshr(ctx.warp_id(), ctx.i32(2))
    switch = b.switch(warpgroup, join)
    for (members, regs), wgs in groups.items():
        block = fn.append_basic_block(f"ws.warpgroup{wgs[0]}")
        for g in wgs:
            switch.add_case(ctx.i32(g), block)
        b.position_at_end(block)
        _setmaxnreg(ctx, regs, plan.entry_regs)
        for i in members:
            region = op.regions[1 + i]
            first, warps = plan.starts[i], plan.worker_num_warps[i]
            mine = fn.append_basic_block(f"ws.partition{i}")
            nxt = fn.append_basic_block(f"ws.not_partition{i}")
            rel = b.sub(ctx.warp_id(), ctx.i32(first))
            b.cbranch(b.icmp_unsigned("<", rel, ctx.i32(warps)), mine, nxt)
            b.position_at_end(mine)
            before = ctx.shared_bytes
            with ctx.partition(f"partition{i}", first, warps, plan.barrier_id(i), scratch):
                # The hand-off bar.sync ordered every earlier shared-memory access.
                ctx.shared_accesses_ordered(ctx.builder.block)
                ctx.mbarrier_words_settled = _settles_barrier_words(region.block)
                ctx.lower_block(region.block, args[i])
                end = ctx.builder
            if not end.block.is_terminated:
                end.branch(join)
            if ctx.shared_bytes > before:  # this partition used scratch: the next after it
                scratch = -(-ctx.shared_bytes // SCRATCH_ALIGN) * SCRATCH_ALIGN
            b.position_at_end(nxt)
        b.branch(join)  # padding warps
    b.position_at_end(join)
    _cta_barrier(ctx)
    if not ws.several:
        b.ret_void()
        return
    # Back to the launch share, one setmaxnreg per warpgroup, then wait for the next call.
    switch = b.switch(warpgroup, ws.dispatch)
    for (members, regs), wgs in groups.items():
        block = fn.append_basic_block(f"ws.release{wgs[0]}")
        for g in wgs:
            switch.add_case(ctx.i32(g), block)
        b.position_at_end(block)
        _setmaxnreg(ctx, plan.entry_regs, regs)
        b.branch(ws.dispatch)


__all__ = ["lower_warp_specialize", "WarpSpecLowering"]
