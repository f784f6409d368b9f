"""Lowering of `ttng.tc_gen5_mma` (tcgen05.mma, sm_100a) and `ttng.tc_gen5_commit`.

One `tcgen05.mma.cta_group::1.kind::{f16,tf32,f8f6f4} [d], a, b_desc, idesc, enable_input_d`
(PTX ISA "tcgen05.mma"), issued by one thread, multiplies a M x K-step tile of A by a
K-step x N tile of B into M TMEM lanes x N columns of D, asynchronously.

  Step 1. Shared operands (`plan_tcgen05`): the same canonical layouts and descriptor fields
          as wgmma (PTX ISA 9.7.16.4.1 "Shared Memory Descriptor" keeps wgmma's start / LBO /
          SBO fields and its swizzle bits 62-63, read as the 3-bit field 61-63, and adds the
          fixed version bits 46-48 = 0b001), so `ops/wgmma/lowering.plan_smem_operand`
          fits them, checking every element against the hardware's address generation.
          A in tensor memory (the TS form) is addressed by its TMEM address, K-step columns on.
  Step 2. The instruction descriptor (PTX ISA 9.7.16.4.2, Table 42): D type in bits 4-5,
          A / B types in 7-9 / 10-12, "transpose" (MN-major) A / B in bits 15 / 16, N >> 3 in
          17-22, M >> 4 in 24-28.
  Step 3. Emission: the shared operands' pending writes are ordered first (`sync_shared`,
          then a CTA barrier so that every thread's stores to shared and tensor memory are
          done before one thread issues; users still `fence_async_shared()` after generic
          stores to shared memory, as in Gluon), then thread 0 (and `pred`) issues one
          instruction per (N tile, K step), enable_input_d = use_acc for the first K step,
          and a `tcgen05.commit.cta_group::1.mbarrier::arrive::one` per barrier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np
from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType, float32
from shared_codegen.lowering.context import I32, VOID, LoweringError
from shared_codegen.ops.cluster.lowering import cta_rank
from shared_codegen.ops.mbarrier.lowering import bar_address, sync_barrier
from shared_codegen.ops.shared_memory.lowering import sync_shared
from shared_codegen.ops.tcgen05.definition import (KINDS, MAX_INSTR_N, TCGen5CommitOp,
                                                   TCGen5MMAOp)
from shared_codegen.ops.tcgen05.pair import function_of, pair_kernel
from shared_codegen.ops.tensor_memory.definition import cell_map
from shared_codegen.ops.tensor_memory.lowering import require_tcgen05
from shared_codegen.ops.wgmma.lowering import (SmemPlan, _Descriptors, operand_bits,
                                               plan_smem_operand, smem_start)

I64 = ir.IntType(64)
DESCRIPTOR_VERSION = 1 << 46  # tcgen05 descriptors: bits 46-48 = 0b001


@dataclass(frozen=True)
class Tcgen05Step:
    n0: int                 # first N of the tile
    k0: int
    a_start: Optional[int]  # bytes from a's view base (shared A), else None
    b_start: int
    m0: int = 0             # first row of the tile (M above 128: one 128-row block each)


@dataclass
class Tcgen05Plan:
    kind: str
    idesc: int
    instr_n: int
    steps: List[Tcgen05Step]
    a: Optional[SmemPlan]
    b: SmemPlan


def instruction_descriptor(a_elem, d_elem, m: int, n: int, a_mn_major: bool,
                           b_mn_major: bool) -> int:
    """PTX ISA 9.7.16.4.2 Table 42 (dense, no negation, no saturation)."""
    code = KINDS[a_elem.name][2]
    d_code = 1 if d_elem == float32 else 0
    return (d_code << 4) | (code << 7) | (code << 10) | (int(a_mn_major) << 15) | \
        (int(b_mn_major) << 16) | ((n >> 3) << 17) | ((m >> 4) << 24)


def _fit(bits, itemsize, mn, k, origins, what):
    try:
        return plan_smem_operand(*bits, itemsize, mn, k, origins, what)
    except ValueError as exc:
        raise ValueError(str(exc).replace("wgmma", "tcgen05_mma")) from None


def plan_tcgen05(a_ty, b_ty, d_ty) -> Tcgen05Plan:
    """Steps 1-2 for `d += a @ b` (pure Python; ValueError in the user's terms). A two-CTA
    MMA (ops/tcgen05/pair.py) is planned from one CTA's halves: the descriptors address this
    CTA's [128, K] of A and [K, N/2] of B, the instruction covers M = 256 and all N."""
    elem = a_ty.element
    kind, instr_k, _ = KINDS[elem.name]
    (m, k), n = a_ty.shape, b_ty.shape[1]
    pair = bool(d_ty.layout.two_ctas)
    _, units, _ = cell_map(d_ty.layout, tuple(d_ty.shape), d_ty.element.bits)
    if not np.array_equal(units[0], np.arange(d_ty.shape[1])) or d_ty.element.bits != 32:
        raise ValueError(f"the accumulator's tensor memory must hold column n of D in TMEM "
                         f"column n (fp32, col_stride=1), got {d_ty.layout!r}")
    if pair:  # one instruction for the pair's N; B's descriptor covers this CTA's N/2
        ks = range(0, k, instr_k)
        b_bits = operand_bits(b_ty, 0)
        b_plan = _fit(b_bits, elem.itemsize, n, instr_k, [(0, k0) for k0 in ks], "b")
        a_bits = operand_bits(a_ty, 1)
        a_plan = _fit(a_bits, elem.itemsize, m, instr_k, [(0, k0) for k0 in ks], "a")
        if kind != "f16" and (not a_plan.k_major or not b_plan.k_major):
            raise ValueError(f"tcgen05_mma with {elem} inputs reads a and b K-major (K "
                             f"contiguous in shared memory)")
        steps = [Tcgen05Step(0, k0, smem_start(a_bits, a_plan, 0, k0),
                             smem_start(b_bits, b_plan, 0, k0)) for k0 in ks]
        idesc = instruction_descriptor(elem, d_ty.element, 2 * m, 2 * n, not a_plan.k_major,
                                       not b_plan.k_major)
        return Tcgen05Plan(kind, idesc, 2 * n, steps, a_plan, b_plan)
    instr_n = min(n, MAX_INSTR_N)
    if n % instr_n:
        raise ValueError(f"tcgen05_mma N={n} above {MAX_INSTR_N} must be a multiple of it")
    instr_m = min(m, 128)  # M = 256, 384, ...: one instruction per 128-row block of D
    ms = range(0, m, instr_m)
    ks = range(0, k, instr_k)
    b_bits = operand_bits(b_ty, 0)
    b_plan = _fit(b_bits, elem.itemsize, instr_n, instr_k,
                  [(n0, k0) for n0 in range(0, n, instr_n) for k0 in ks], "b")
    a_plan = a_bits = None
    if isinstance(a_ty, SharedMemoryType):
        a_bits = operand_bits(a_ty, 1)
        a_plan = _fit(a_bits, elem.itemsize, instr_m, instr_k,
                      [(m0, k0) for m0 in ms for k0 in ks], "a")
    if kind != "f16" and ((a_plan and not a_plan.k_major) or not b_plan.k_major):
        raise ValueError(f"tcgen05_mma with {elem} inputs reads a and b K-major (K contiguous "
                         f"in shared memory)")
    steps = [Tcgen05Step(n0, k0, smem_start(a_bits, a_plan, m0, k0) if a_plan else None,
                         smem_start(b_bits, b_plan, n0, k0), m0)
             for m0 in ms for n0 in range(0, n, instr_n) for k0 in ks]
    idesc = instruction_descriptor(elem, d_ty.element, instr_m, instr_n,
                                   a_plan is not None and not a_plan.k_major,
                                   not b_plan.k_major)
    return Tcgen05Plan(kind, idesc, instr_n, steps, a_plan, b_plan)


def _asm(ctx, text: str, constraints: str, args) -> None:
    constraints = f"{constraints},~{{memory}}" if constraints else "~{memory}"
    ctx.inline_asm(text, constraints, VOID, list(args), side_effects=True)


class _TcDescriptors(_Descriptors):
    """wgmma's descriptors with the tcgen05 version bits."""

    def __init__(self, ctx, op, value, plan: SmemPlan):
        super().__init__(ctx, op, value, plan, [])
        self.hi = ir.Constant(I64, plan.descriptor_hi() | DESCRIPTOR_VERSION)
        self.base = self._make(self.addr)


def commit(ctx, op, bar, pred) -> None:
    """`tcgen05.commit` (PTX ISA "tcgen05.commit"): one arrival on `bar` once the issuing thread's
    earlier tcgen05 MMAs complete. In a two-CTA kernel the leader of each pair commits, to the
    barrier at `bar`'s offset in both CTAs (`.multicast::cluster`, ctaMask = the pair)."""
    if pair_mode(ctx, op):
        rank = cta_rank(ctx)
        b = ctx.builder
        mask = b.trunc(b.shl(ctx.i32(3), b.and_(rank, ctx.i32(~1))), ir.IntType(16))
        _asm(ctx, "@$0 tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster."
                  "multicast::cluster.b64 [$1], $2;", "b,l,h",
             [b.and_(pred, is_leader(ctx)), bar_address(ctx, op, bar), mask])
        return
    _asm(ctx, "@$0 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
              "[$1];", "b,l", [pred, bar_address(ctx, op, bar)])


def pair_mode(ctx, op) -> bool:
    """Whether the kernel's tcgen05 instructions are `cta_group::2` (ops/tcgen05/pair.py)."""
    mode = getattr(ctx, "tcgen05_pair", None)
    if mode is None:
        mode = ctx.tcgen05_pair = pair_kernel(function_of(op))
    return mode


def is_leader(ctx):
    """The even CTA of a pair (i1)."""
    b = ctx.builder
    return b.icmp_unsigned("==", b.and_(cta_rank(ctx), ctx.i32(1)), ctx.i32(0))


@lowering_rule(TCGen5MMAOp)
def lower_tc_gen5_mma(op, ctx):
    a, bm, d, use_acc, pred, bars, preds = TCGen5MMAOp.parts(op)
    require_tcgen05(ctx, op, "tcgen05_mma")
    try:
        plan = plan_tcgen05(a.type, bm.type, d.type)
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None
    b = ctx.builder
    for v in (a, bm):
        if isinstance(v.type, SharedMemoryType):
            sync_shared(ctx, op, v, "read")
    # Every thread's tcgen05.st (and wait::st) is ordered before the barrier, and the issue
    # after it (PTX ISA "tcgen05.fence").
    _asm(ctx, "tcgen05.fence::before_thread_sync;", "", [])
    ctx.barrier()
    _asm(ctx, "tcgen05.fence::after_thread_sync;", "", [])
    issue = b.and_(ctx.thread_is_zero(), ctx.get(pred))
    group = 2 if d.type.layout.two_ctas else 1
    if group == 2:  # the leader issues for the pair
        issue = b.and_(issue, is_leader(ctx))
    b_desc = _TcDescriptors(ctx, op, bm, plan.b)
    a_desc = _TcDescriptors(ctx, op, a, plan.a) if plan.a is not None else None
    d_addr = ctx.get(d)
    a_tmem = ctx.get(a) if isinstance(a.type, TensorMemoryType) else None
    first_k = {}
    for step in plan.steps:
        first_k.setdefault((step.m0, step.n0), step.k0)
    use = b.zext(ctx.get(use_acc), I32)
    # D's TMEM column of each tile's first element (rows past 128 sit in later columns).
    _, d_units, _ = cell_map(d.type.layout, tuple(d.type.shape), d.type.element.bits)
    for step in plan.steps:
        enable = use if first_k[(step.m0, step.n0)] == step.k0 else ctx.i32(1)
        d_col = step.n0 if group == 2 else int(d_units[step.m0, step.n0])
        dst = b.add(d_addr, ctx.i32(d_col))
        if a_tmem is not None:  # A's column of (m0, k0): K steps along packed columns
            _, a_units, _ = cell_map(a.type.layout, tuple(a.type.shape), a.type.element.bits)
            a_col = int(a_units[step.m0, step.k0]) * a.type.element.bits // 32
            a_arg, a_op, a_cons = b.add(a_tmem, ctx.i32(a_col)), "[$2]", "r"
        else:
            a_arg, a_op, a_cons = a_desc.at(step.a_start), "$2", "l"
        _asm(ctx, "{\n.reg .pred en;\nsetp.ne.b32 en, $5, 0;\n"
                  f"@$0 tcgen05.mma.cta_group::{group}.kind::{plan.kind} [$1], {a_op}, $3, $4, "
                  f"en;\n}}",
             f"b,r,{a_cons},l,r,r",
             [issue, dst, a_arg, b_desc.at(step.b_start), ctx.i32(plan.idesc), enable])
    for bar, p in zip(bars, preds):
        sync_barrier(ctx, op, bar, "read")
        commit(ctx, op, bar, b.and_(issue, ctx.get(p)))  # (issue: the leader's already)
    return []


@lowering_rule(TCGen5CommitOp)
def lower_tc_gen5_commit(op, ctx):
    require_tcgen05(ctx, op, "tcgen05_commit")
    bar = op.operands[0]
    sync_barrier(ctx, op, bar, "read")
    pred = ctx.thread_is_zero()
    if op.attrs.get("has_pred"):
        pred = ctx.builder.and_(pred, ctx.get(op.operands[1]))
    commit(ctx, op, bar, pred)
    return []


__all__ = ["plan_tcgen05", "instruction_descriptor", "Tcgen05Plan", "Tcgen05Step"]
