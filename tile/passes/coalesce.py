"""Coalesced layouts for global memory accesses, chosen from axis analysis (Triton's Coalesce).

For a load or store through a tensor of pointers:

1. order: dimensions by contiguity of the pointers, most contiguous first (ties: the last
   dimension first, i.e. row-major);
2. elements per thread along the fastest dimension: as many as one 16-byte access may move,
   limited by what the pointers guarantee (contiguity, and byte divisibility / element size)
   and by the tile itself, so that every thread of the program still gets work;
3. threads, then warps, spread over the dimensions in that order (`blocked_layout_for`,
   Triton's `BlockedEncodingAttr::get(shape, sizePerThread, order, ...)`).

The 32 lanes of a warp then touch 32 consecutive vectors: whole 128-byte lines per warp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from shared_codegen.analysis.axis_info import AxisAnalysis, order_from_contiguity
from shared_codegen.ir.core import Operation, Value
from shared_codegen.ir.types import PointerType, TensorType, scalar_of
from shared_codegen.layouts import BlockedLayout
from shared_codegen.layouts.distributed import distribute_threads
from shared_codegen.layouts.relations import PointerAccess
from shared_codegen.ops.memory.definition import LoadOp

# The widest global access a thread can issue (ld.global.v4.b32 / st.global.v4.b32).
MAX_ACCESS_BITS = 128


def blocked_layout_for(shape: Sequence[int], size_per_thread: Sequence[int],
                       order: Sequence[int], num_warps: int,
                       threads_per_warp: int = 32) -> BlockedLayout:
    """A blocked layout for `shape` with the given per-thread block and order.

    The thread distribution is Triton's `BlockedEncodingAttr::get` (`distribute_threads`)."""
    lanes, warps = distribute_threads(shape, size_per_thread, order, num_warps, threads_per_warp)
    return BlockedLayout(list(size_per_thread), lanes, warps, list(order))


def memory_pointer(op: Operation) -> Optional[Value]:
    """The tensor of pointers a memory op accesses, or None for scalar accesses."""
    rule = op.opdef.layout_rule if op.opdef is not None else None
    if not isinstance(rule, PointerAccess) or not op.operands:
        return None
    ptr = op.operands[0]
    if isinstance(ptr.type, TensorType) and isinstance(scalar_of(ptr.type), PointerType):
        return ptr
    return None


def elements_per_access(ptr: Value, order: Sequence[int], info: AxisAnalysis) -> int:
    """Elements one thread may move with one access along `order[0]` (Triton's
    getNumElementsPerThread): min(aligned run the pointers guarantee, 128 bits)."""
    shape = ptr.type.shape
    elem_bits = scalar_of(ptr.type).element.bits
    facts = info[ptr]
    fast = order[0]
    multiple = max(1, facts.divisibility[fast] // max(1, elem_bits // 8))
    contiguous = min(facts.contiguity[fast], shape[fast])
    return max(1, min(multiple, contiguous, MAX_ACCESS_BITS // elem_bits))


@dataclass(frozen=True)
class AccessPlan:
    """What one memory op would like: its coalesced layout and how much it matters."""

    op: Operation
    layout: BlockedLayout
    order: tuple
    per_thread: int
    # Bigger wins when ops sharing a layout class disagree: loads first (their latency is
    # what the layout hides), then bigger tiles, then wider vectors, then program order.
    priority: tuple


def plan_access(op: Operation, index: int, info: AxisAnalysis, num_warps: int,
                threads_per_warp: int) -> Optional[AccessPlan]:
    ptr = memory_pointer(op)
    if ptr is None:
        return None
    shape = ptr.type.shape
    order = order_from_contiguity(info[ptr].contiguity)
    per_thread = elements_per_access(ptr, order, info)
    numel = ptr.type.numel
    # Give every thread work before widening vectors: 128 threads on a 256-element tile get
    # 2 elements each even if 4 would be legal.
    per_thread = max(1, min(per_thread, numel // (num_warps * threads_per_warp)))
    size = [1] * len(shape)
    size[order[0]] = per_thread
    layout = blocked_layout_for(shape, size, order, num_warps, threads_per_warp)
    priority = (isinstance(op.opdef, LoadOp), numel, per_thread, -index)
    return AccessPlan(op, layout, tuple(order), per_thread, priority)


def plan_all_accesses(ops: List[Operation], info: AxisAnalysis, num_warps: int,
                      threads_per_warp: int) -> List[AccessPlan]:
    plans = []
    for index, op in enumerate(ops):
        plan = plan_access(op, index, info, num_warps, threads_per_warp)
        if plan is not None:
            plans.append(plan)
    return plans
