"""Lowering of the mbarrier ops: inline PTX (PTX ISA 9.7.13.15, mbarrier). Thread 0 (of the
partition, under warp specialization) initializes, expects, arrives and invalidates; every
thread waits in a `try_wait.parity` loop. Barrier words are shared memory: `init` and
`inval` count as writes and the others as reads for the barrier placement of
`ops/shared_memory/lowering.sync_shared`.

Before sm_90 (Ampere's `gl.nvidia.ampere.mbarrier`, with cp.async) the same ops use the
sm_80 forms: `.shared` instead of `.shared::cta`, no async-proxy fence (there is no TMA), one
`mbarrier.arrive` per counted arrival (the count operand is sm_90's), and a
`test_wait.parity` loop; `mbarrier.expect` (transaction bytes) needs sm_90."""

from __future__ import annotations

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.layouts import SwizzledSharedLayout
from shared_codegen.lowering.context import VOID, LoweringError
from shared_codegen.ops.mbarrier.definition import (ArriveBarrierOp, BarrierExpectOp,
                                                    InitBarrierOp, InvalBarrierOp,
                                                    WaitBarrierOp, pred_of)
from shared_codegen.ir.types import MemoryDescriptorType, TensorType
from shared_codegen.lowering.smem_matrix import arch_of
from shared_codegen.ops.program.definition import BarrierAnyOp
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp, WarpGroupDotWaitOp


def bar_address(ctx, op, bar):
    """The barrier word's shared-memory address; a view must start at its own word. A view of
    an unswizzled allocation (MBarrierLayout) has no xor part even when a loop or a branch
    carried it and its xor became a phi (of zeros)."""
    base, xor = ctx.get(bar)
    if isinstance(xor, ir.Constant) and int(xor.constant) == 0:
        return base
    layout = getattr(bar.type, "layout", None)
    if isinstance(layout, SwizzledSharedLayout) and layout.max_phase == 1:
        return base
    raise LoweringError("an mbarrier view must start at its own 8-byte word", op)


def thread_zero(ctx, pred=None):
    """`tid == 0` (and the op's predicate): the one thread that issues a CTA-wide op. Inside
    a warp-specialized partition `ctx.thread_id()` counts from the partition's first thread
    and the cache is per partition (`ops/warp_specialize/lowering.py`)."""
    first = ctx.thread_is_zero()
    return first if pred is None else ctx.builder.and_(first, ctx.get(pred))


def sync_barrier(ctx, op, bar, kind: str, one_thread: bool = False) -> None:
    """Order the barrier word's access (`kind`: "read" or "write") like any shared memory;
    `one_thread`: only `thread_zero` makes it (init, expect, invalidate, a TMA load issued
    on it)."""
    sync_shared(ctx, op, bar, kind, mbarrier_use=kind == "read", one_thread=one_thread)


def _asm(ctx, text: str, constraints: str, args) -> None:
    constraints = (constraints + "," if constraints else "") + "~{memory}"
    ctx.inline_asm(text, constraints, VOID, args, side_effects=True)


def _before_sm90(ctx) -> bool:
    return arch_of(ctx) < 90


@lowering_rule(InitBarrierOp)
def lower_init_barrier(op, ctx):
    bar = op.operands[0]
    sync_barrier(ctx, op, bar, "write", one_thread=True)
    # The fence makes the initialized word visible to the async proxy, so a TMA load this
    # thread issues next can complete_tx on it (PTX ISA 9.7.13.4.18 membar/fence: proxy
    # fences).
    if _before_sm90(ctx):
        _asm(ctx, f"@$0 mbarrier.init.shared.b64 [$1], {op.attrs['count']};", "b,l",
             [thread_zero(ctx), bar_address(ctx, op, bar)])
        return None
    # In a cluster, peers signal the barrier too (multicast loads, remote arrivals): the
    # init is released to them as well (`fence.mbarrier_init`, PTX ISA 9.7.13.4.18), ahead
    # of the cluster barrier that makes them wait for it.
    cluster_fence = "\n@$0 fence.mbarrier_init.release.cluster;" \
        if getattr(ctx, "num_ctas", 1) > 1 else ""
    _asm(ctx, f"@$0 mbarrier.init.shared::cta.b64 [$1], {op.attrs['count']};\n"
              "@$0 fence.proxy.async.shared::cta;" + cluster_fence,
         "b,l", [thread_zero(ctx), bar_address(ctx, op, bar)])
    return None


@lowering_rule(BarrierExpectOp)
def lower_barrier_expect(op, ctx):
    bar = op.operands[0]
    if _before_sm90(ctx):
        raise LoweringError(f"mbarrier.expect (transaction bytes, for TMA) needs sm_90 or "
                            f"later; the target is {ctx.target}", op)
    sync_barrier(ctx, op, bar, "read", one_thread=True)
    _asm(ctx, f"@$0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], "
              f"{op.attrs['size']};", "b,l",
         [thread_zero(ctx, pred_of(op, 1)), bar_address(ctx, op, bar)])
    return None


def _releases_nothing_new(other, ctx) -> bool:
    """Whether `other`, lowered after the last barrier, leaves nothing that one thread's
    arrival could release too early: it is the barrier (`gl.barrier_any`: its last act is
    the barrier itself), touches only barrier words (atomic), issues a wgmma
    (an asynchronous read that retires through a wait), waits for wgmmas (in one warpgroup,
    thread 0's wait covers the whole warpgroup's MMA), or computes scalars from scalars and
    views. Distributed tensors are refused even from pure ops: a layout conversion or a
    reduction may go through shared memory."""
    opdef = other.opdef
    if isinstance(opdef, (ArriveBarrierOp, BarrierExpectOp, WaitBarrierOp, WarpGroupDotOp,
                          BarrierAnyOp)):
        return True
    if isinstance(opdef, WarpGroupDotWaitOp):
        return ctx.num_warps <= 4
    if opdef is None or opdef.memory_effects or other.regions:
        return False
    if other.results and all(isinstance(r.type, MemoryDescriptorType) for r in other.results):
        return True  # a view of shared memory (index, slice, reshape): an address only
    return opdef.is_pure(other) and not any(isinstance(v.type, TensorType)
                                            for v in other.results + other.operands)


def _ordered_by_last_barrier(op, ctx) -> bool:
    """True when the partition's last `bar.sync` already orders everything this arrival
    releases: it was emitted in this LLVM block (straight-line code since), for the same
    threads, and every op lowered from it up to `op` passes `_releases_nothing_new`.
    FA3-style loops release two or three ring stages in a row; only the first pays."""
    if not ctx.barriers or ctx.barrier_block is not ctx.builder.block:
        return False
    since, threads = ctx.barriers[-1]
    block = op.parent
    if threads != ctx.named_barrier or since is None or since.parent is not block:
        return False
    ops = block.ops
    first, last = ops.index(since), ops.index(op)
    return first < last and all(_releases_nothing_new(o, ctx) for o in ops[first:last])


@lowering_rule(ArriveBarrierOp)
def lower_arrive_barrier(op, ctx):
    bar = op.operands[0]
    barriers = ctx.barrier_count
    sync_barrier(ctx, op, bar, "read")
    # One thread arrives for all the threads running this code, so each of them must be
    # done with what the arrival releases (typically its reads of a buffer a producer
    # refills next). `ctx.barrier()` syncs exactly those threads: the CTA, or inside a
    # warp-specialized partition only that partition's warps (its named barrier); a
    # CTA-wide bar.sync there would wait for warps that never come. The hazard check just
    # above, or a barrier a few ops earlier, may already have done it
    # (`_ordered_by_last_barrier`).
    # per_warp: each warp arrives for itself (lane 0), so no warp waits for the others; a
    # warp barrier first (bar.warp.sync, which orders memory among the warp's lanes) puts
    # every lane's accesses before lane 0's release, e.g. a warp's shared stores before a
    # TMA store that a waiter issues.
    per_warp = bool(op.attrs.get("per_warp"))
    if per_warp:
        _asm(ctx, "bar.warp.sync -1;", "", [])
    elif ctx.barrier_count == barriers and not _ordered_by_last_barrier(op, ctx):
        ctx.barrier()
    issue = _issuer(ctx, pred_of(op, 1), per_warp)
    if _before_sm90(ctx):
        one = "@$0 mbarrier.arrive.shared.b64 state, [$1];\n"
        _asm(ctx, "{\n.reg .b64 state;\n" + one * op.attrs["count"] + "}", "b,l",
             [issue, bar_address(ctx, op, bar)])
        return None
    num_ctas = getattr(ctx, "num_ctas", 1)
    mask, multicast = op.attrs.get("from_cta"), op.attrs.get("multicast_cta", 0)
    if num_ctas > 1 and (multicast or mask is not None
                         and mask & (num_ctas - 1) != num_ctas - 1):
        _remote_arrivals(op, ctx, bar, num_ctas, mask, multicast, issue)
        return None
    _asm(ctx, f"@$0 mbarrier.arrive.shared::cta.b64 _, [$1], {op.attrs['count']};",
         "b,l", [issue, bar_address(ctx, op, bar)])
    return None


def _issuer(ctx, pred, per_warp: bool):
    """The threads that arrive: thread 0 (and the op's predicate), or lane 0 of each warp."""
    if not per_warp:
        return thread_zero(ctx, pred)
    b = ctx.builder
    lane0 = b.icmp_unsigned("==", ctx.lane_id(), ctx.i32(0))
    return lane0 if pred is None else b.and_(lane0, ctx.get(pred))


def _remote_arrivals(op, ctx, bar, num_ctas: int, mask, multicast: int, issue) -> None:
    """Arrivals on peers' barriers: each one's address in the cluster window (`mapa`, PTX ISA
    9.7.9.22), then an arrival on it (9.7.13.15.12) with the default semantics, release at
    CTA scope, as CUTLASS's ClusterBarrier, ThunderKittens and Triton arrive on a peer's
    barrier: `.release.cluster` made ptxas put MEMBAR.ALL.GPU and two error barriers before
    every arrival, and a flash-attention forward whose four releases a block were remote
    ran at half speed. The releasing threads' reads are done before the arrival (the
    partition's bar.sync precedes it, or with `per_warp` the warp's own program order).
    `from_cta`: one target, `rank & mask`; `multicast_cta`: every CTA c with
    `c & ~m == rank & ~m`, one predicated arrival per candidate c (sm_90 has no multicast
    arrive)."""
    from shared_codegen.ops.cluster.lowering import cta_rank
    b = ctx.builder
    rank = cta_rank(ctx)
    if multicast:
        keep = ctx.i32(~multicast & (num_ctas - 1))
        mine = b.and_(rank, keep)
        targets = [(ctx.i32(c), b.and_(issue, b.icmp_unsigned("==", mine,
                                                               ctx.i32(c & ~multicast))))
                   for c in range(num_ctas)]
    else:
        targets = [(b.and_(rank, ctx.i32(mask)), issue)]
    for dest, active in targets:
        _asm(ctx, "{\n.reg .b64 remote;\n"
                  "@$0 mapa.shared::cluster.u64 remote, $1, $2;\n"
                  f"@$0 mbarrier.arrive.shared::cluster.b64 _, [remote], "
                  f"{op.attrs['count']};\n}}",
             "b,l,r", [active, bar_address(ctx, op, bar), dest])


@lowering_rule(WaitBarrierOp)
def lower_wait_barrier(op, ctx):
    bar, phase, pred, _ = op.opdef.parts(op)
    sync_barrier(ctx, op, bar, "read")
    probe = "mbarrier.try_wait.parity.shared::cta.b64"
    if _before_sm90(ctx):
        probe = "mbarrier.test_wait.parity.shared.b64"
        # `.parity` needs PTX ISA 7.1, one above sm_80's minimum.
        ctx.ptx_floor = max(getattr(ctx, "ptx_floor", None) or (7, 1), (7, 1))
    if ctx.debug is not None:  # debug mode: a bounded spin that reports and gives up
        ctx.debug.bounded_wait(ctx, op, probe, bar_address(ctx, op, bar), ctx.get(phase),
                               ctx.get(pred) if pred is not None else None)
        return None
    args = [bar_address(ctx, op, bar), ctx.get(phase)]
    skip_open, skip_close = "", ""
    if pred is not None:
        args.append(ctx.get(pred))
        skip_open, skip_close = "@!$2 bra skip;\n", "skip:\n"
    # Labels inside `{ }` are local to the block, so the loop can be emitted many times
    # in one kernel.
    _asm(ctx, "{\n.reg .pred done;\n" + skip_open + "wait:\n"
              f"{probe} done, [$0], $1;\n"
              "@!done bra wait;\n" + skip_close + "}",
         "l,r" + (",b" if pred is not None else ""), args)
    return None


@lowering_rule(InvalBarrierOp)
def lower_inval_barrier(op, ctx):
    bar = op.operands[0]
    sync_barrier(ctx, op, bar, "write", one_thread=True)
    space = "shared" if _before_sm90(ctx) else "shared::cta"
    _asm(ctx, f"@$0 mbarrier.inval.{space}.b64 [$1];", "b,l",
         [thread_zero(ctx), bar_address(ctx, op, bar)])
    return None


__all__ = ["bar_address", "sync_barrier", "thread_zero"]
