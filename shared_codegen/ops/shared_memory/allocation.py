"""Static shared memory: an offset for every `ttg.local_alloc`, packed by liveness.

    offsets, total = assign_offsets(fn)        # {local_alloc op: byte offset}, bytes

The `shared_memory_allocation` stage (`allocate_shared_memory`, listed in
shared_codegen/stages.py) runs it and records each offset on its op (`offset`) and in
`module.stage_results["shared_offsets"]`, which lowering reads; `plan_barriers` records the
alias sets that barrier placement compares.

Liveness. Ops are numbered in program order (pre-order through regions). An allocation is
live from its `local_alloc` to the last use of any descriptor that may view it; a use nested
in a region counts as a use of the op, in the allocation's own block, that encloses it, so an
allocation used inside a loop lives for the whole loop. Views (index, subslice, trans,
reshape, reinterpret) and loop-carried / if-yielded descriptors alias the allocations they
may come from (`alias_sets`).

Partitions. The regions of a `ttg.warp_specialize` run concurrently, so an allocation made
inside one of them (a partition-local buffer, as Triton allows) is live for the whole op: it
gets its own bytes, overlapping no allocation of any partition nor any buffer live across the
call, for the partition's lifetime (the op's). The total is checked against the target's
limit like any other allocation.

Packing (the idea of Triton's Allocation.cpp, in a few lines): largest first, each buffer
goes to the lowest offset, aligned for its layout, that overlaps no already placed buffer
whose live range intersects its own. Two allocations with disjoint lifetimes can therefore
share bytes.

The layout of the kernel's dynamic shared memory is then

    [0, static)                 the allocations
    [static, static + scratch)  scratch of layout conversions / reductions (`request_shared`)

so scratch never aliases a user buffer; `shared_bytes` is their sum, and the launcher
raises the kernel's dynamic shared-memory limit when it is above 48 KB.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Tuple

from shared_codegen.ir.core import Block, Function, Module, Operation, Value
from shared_codegen.ir.passes import Notes
from shared_codegen.ir.types import SharedMemoryType
from shared_codegen.lowering.resources import check_target_shared_memory, shared_memory_limit
from shared_codegen.ops.control.definition import ForOp, IfOp, WhileOp
from shared_codegen.ops.shared_memory.definition import (ALLOC, VIEW_OPS, alloc_alignment,
                                                         alloc_bytes)
from shared_codegen.ops.warp_specialize.definition import WarpSpecializeOp, worker_operands

# The attribute the `shared_memory_allocation` stage (shared_codegen/stages.py) records each
# allocation's byte offset in; lowering reads it back.
OFFSET_ATTR = "offset"



def _is_memdesc(v: Value) -> bool:
    return isinstance(v.type, SharedMemoryType)


def alias_sets(fn: Function) -> Dict[Value, FrozenSet[Operation]]:
    """For every descriptor value, the allocations it may view. Values from ops this module
    does not know (another family's descriptor-returning op) may view any allocation."""
    ops = list(fn.walk())
    allocs = frozenset(op for op in ops if op.name == ALLOC)
    sets: Dict[Value, FrozenSet[Operation]] = {}

    def join(v: Value, more) -> bool:
        if not _is_memdesc(v):
            return False
        old = sets.get(v, frozenset())
        new = old | (more or frozenset())
        if new != old:
            sets[v] = new
            return True
        return False

    def of(v: Value):
        return sets.get(v, frozenset())

    changed = True
    while changed:
        changed = False
        for op in ops:
            if op.name == ALLOC:
                changed |= join(op.result, frozenset([op]))
            elif op.name in VIEW_OPS:
                changed |= join(op.result, of(op.operands[0]))
            elif isinstance(op.opdef, ForOp):
                body = op.regions[0].block
                yields = body.terminator.operands if body.terminator else []
                for k, init in enumerate(op.operands[3:]):
                    both = of(init) | (of(yields[k]) if k < len(yields) else frozenset())
                    changed |= join(body.args[1 + k], both)
                    changed |= join(op.results[k], both)
            elif isinstance(op.opdef, WarpSpecializeOp):
                # A worker region's arguments view what the op's operands view.
                for region, caps in zip(op.regions[1:], worker_operands(op)):
                    for arg, v in zip(region.block.args, caps):
                        changed |= join(arg, of(v))
            elif isinstance(op.opdef, IfOp):
                for region in op.regions:
                    term = region.block.terminator
                    for k, v in enumerate(term.operands if term else []):
                        changed |= join(op.results[k], of(v))
            elif isinstance(op.opdef, WhileOp):
                before, after = op.regions[0].block, op.regions[1].block
                cond = before.terminator.operands[1:] if before.terminator else []
                again = after.terminator.operands if after.terminator else []
                for k, init in enumerate(op.operands):
                    changed |= join(before.args[k], of(init) | (of(again[k]) if k < len(again)
                                                                else frozenset()))
                for k, v in enumerate(cond):
                    changed |= join(after.args[k], of(v))
                    changed |= join(op.results[k], of(v))
            else:
                for r in op.results:
                    if _is_memdesc(r):
                        changed |= join(r, allocs)
    return sets


def _number(block: Block, start: Dict[Operation, int], end: Dict[Operation, int], n: List[int]):
    for op in block.ops:
        start[op] = n[0]
        n[0] += 1
        for region in op.regions:
            _number(region.block, start, end, n)
        end[op] = n[0] - 1


def live_ranges(fn: Function, aliases=None) -> Dict[Operation, Tuple[int, int]]:
    """{local_alloc: (first, last)} op numbers during which the allocation is live."""
    aliases = alias_sets(fn) if aliases is None else aliases
    start: Dict[Operation, int] = {}
    end: Dict[Operation, int] = {}
    _number(fn.body.block, start, end, [0])
    ranges = {op: (start[op], start[op]) for op in start if op.name == ALLOC}
    for user in start:
        for v in user.operands:
            for alloc in aliases.get(v, ()):
                outer = user.ancestor_in(alloc.parent)
                lo, hi = ranges[alloc]
                if outer is None:
                    lo, hi = min(lo, start[user]), max(hi, end[user])
                else:
                    # A use before the alloc in its own block reads a loop-carried view of the
                    # previous iteration's buffer: live across the back edge, from that use on.
                    lo, hi = min(lo, start[outer]), max(hi, end[outer])
                ranges[alloc] = (lo, hi)
    for alloc in ranges:
        call = _enclosing_partition_call(alloc)
        if call is not None:
            lo, hi = ranges[alloc]
            ranges[alloc] = (min(lo, start[call]), max(hi, end[call]))
    return ranges


def _enclosing_partition_call(op: Operation) -> Optional[Operation]:
    """The outermost `ttg.warp_specialize` whose regions contain `op`; None outside one."""
    found = None
    op = op.parent_op
    while op is not None:
        if isinstance(op.opdef, WarpSpecializeOp):
            found = op
        op = op.parent_op
    return found


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def assign_offsets(fn: Function) -> Tuple[Dict[Operation, int], int]:
    """Byte offsets for every `ttg.local_alloc` of `fn` and the bytes they span."""
    ranges = live_ranges(fn)
    order = sorted(ranges, key=lambda op: (-alloc_bytes(op.result.type), ranges[op][0]))
    placed: List[Tuple[Operation, int, int]] = []  # (op, offset, size)
    offsets: Dict[Operation, int] = {}
    for op in order:
        size = alloc_bytes(op.result.type)
        align = alloc_alignment(op.result.type.layout)
        lo, hi = ranges[op]
        busy = sorted((off, off + sz) for other, off, sz in placed
                      if not (ranges[other][1] < lo or hi < ranges[other][0]))
        offset = 0
        for b_lo, b_hi in busy:
            if offset + size <= b_lo:
                break
            offset = max(offset, _align_up(b_hi, align))
        offsets[op] = offset
        placed.append((op, offset, size))
    total = max((off + sz for _, off, sz in placed), default=0)
    return offsets, _align_up(total, 16)


# ---- the stages (listed in shared_codegen/stages.py) ------------------------------------

def allocate_shared_memory(module: Module) -> Notes:
    """Stage: byte offsets for every `ttg.local_alloc` (`assign_offsets` above)."""
    fn = module.kernel
    if not any(op.name == ALLOC for op in fn.walk()):
        module.stage_results["shared_offsets"] = {}
        module.stage_results["static_shared_bytes"] = 0
        return Notes(lambda: "no shared-memory allocations")
    offsets, total = assign_offsets(fn)
    target = module.stage_results.get("target") or module.attrs.get("target", "")
    if total > shared_memory_limit(target):
        sizes = ", ".join(f"{alloc_bytes(op.result.type)} B at {op.loc}" for op in offsets)
        check_target_shared_memory(fn.name, total, target, f"allocations: {sizes}")
    for op, offset in offsets.items():
        op.attrs[OFFSET_ATTR] = offset
    module.stage_results["shared_offsets"] = dict(offsets)
    module.stage_results["static_shared_bytes"] = total
    return Notes(lambda: f"static shared memory: {total} bytes in {len(offsets)} allocations "
                         f"(scratch of conversions and reductions starts after them)")


def plan_barriers(module: Module) -> Notes:
    """Stage: the allocations each shared-memory descriptor may view, which barrier placement
    compares to decide whether two accesses conflict."""
    fn = module.kernel
    has_allocs = any(op.name == ALLOC for op in fn.walk())
    aliases = alias_sets(fn) if has_allocs else {}
    module.stage_results["shared_aliases"] = aliases
    return Notes(lambda: _describe_aliases(aliases))


def _describe_aliases(aliases: Dict[Value, FrozenSet[Operation]]) -> str:
    if not aliases:
        return "no shared-memory descriptors: no barriers for shared-memory hazards"
    lines = ["bar.sync goes before an access that conflicts with one since the last barrier "
             "(placed while lowering, by sync_shared); descriptors and the allocations "
             "(by offset) they may view:"]
    for value, allocs in aliases.items():
        where = sorted(op.attrs.get(OFFSET_ATTR, 0) for op in allocs)
        lines.append(f"  {value.name_hint or '?'}: {value.type} -> offsets {where}")
    return "\n".join(lines)
