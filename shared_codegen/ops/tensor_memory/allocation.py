"""The `tensor_memory_allocation` stage: a first column for every `ttng.tmem_alloc`.

Tensor memory is 512 columns x 128 lanes per CTA (PTX ISA "Tensor Memory"). Every allocation
spans all lanes and `alloc_columns(type)` 32-bit columns; it starts at a multiple of its size
rounded up to a power of two, so that halves and quarters sliced out of it are aligned too.
Allocations whose live ranges (from the alloc to the last use of any view of it, a loop that
uses it whole) do not overlap may share columns: largest first, each at the lowest aligned
column free during its range, as `ops/shared_memory/allocation.py` packs shared memory. A view
whose allocation is unknown (a loop-carried or captured descriptor) keeps every allocation
live. The kernel asks the hardware for the end of the packing rounded up to a power of two of
at least 32 columns (`tcgen05.alloc` takes only those), once, at entry, and gives it back at
exit: `lowering.TensorMemoryLowering`, which this stage leaves in
`module.stage_results["tensor_memory"]` (None when the kernel has no allocation).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from shared_codegen.ir.core import Module
from shared_codegen.ir.passes import Notes
from shared_codegen.errors import OutOfResources
from shared_codegen.ir.types import TensorMemoryType
from shared_codegen.ops.tensor_memory.definition import (COL_OFFSET, TMEM_COLUMNS, TmemAllocOp,
                                                         TmemIndexOp, TmemReinterpretOp,
                                                         TmemSubsliceOp, alloc_columns)

VIEWS = (TmemIndexOp, TmemSubsliceOp, TmemReinterpretOp)

MIN_ALLOC_COLUMNS = 32  # tcgen05.alloc: a power of two in [32, 512]


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _where(op) -> str:
    return f"{op.loc.file.rsplit('/', 1)[-1]}:{op.loc.line}" if op.loc.line else "<kernel>"


def _views_of(fn, allocs) -> Dict[object, frozenset]:
    """For every tensor-memory value, the allocations it may view."""
    every = frozenset(allocs)
    sets = {}
    for op in fn.walk():  # program order: a view comes after the value it views
        for region in op.regions:
            for arg in region.block.args:
                if isinstance(arg.type, TensorMemoryType):
                    sets[arg] = every  # loop-carried or captured: any allocation
        if isinstance(op.opdef, TmemAllocOp):
            sets[op.result] = frozenset([op])
        elif isinstance(op.opdef, VIEWS):
            sets[op.result] = sets.get(op.operands[0], every)
        else:
            for r in op.results:
                if isinstance(r.type, TensorMemoryType):
                    sets[r] = every
    return sets


def live_ranges(fn, allocs) -> Dict[object, Tuple[int, int]]:
    """{tmem_alloc: (first, last)} op numbers during which the allocation is live."""
    from shared_codegen.ops.shared_memory.allocation import _number
    start, end = {}, {}
    _number(fn.body.block, start, end, [0])
    views = _views_of(fn, allocs)
    ranges = {op: (start[op], start[op]) for op in allocs}
    for user in start:
        for v in user.operands:
            for alloc in views.get(v, ()):
                outer = user.ancestor_in(alloc.parent)
                use = user if outer is None else outer  # a use in a loop: the whole loop
                lo, hi = ranges[alloc]
                ranges[alloc] = (min(lo, start[use]), max(hi, end[use]))
    return ranges


def assign_columns(fn) -> Dict[object, int]:
    """{tmem_alloc op: first column}; OutOfResources past 512 columns."""
    allocs: List = [op for op in fn.walk() if isinstance(op.opdef, TmemAllocOp)]
    ranges = live_ranges(fn, allocs)
    order = sorted(allocs, key=lambda op: (-alloc_columns(op.result.type), ranges[op][0]))
    offsets, end = {}, 0
    for op in order:
        cols = alloc_columns(op.result.type)
        align = min(_pow2(cols), TMEM_COLUMNS)
        lo, hi = ranges[op]
        busy = sorted((offsets[o], offsets[o] + alloc_columns(o.result.type)) for o in offsets
                      if not (ranges[o][1] < lo or hi < ranges[o][0]))
        at = 0
        for b_lo, b_hi in busy:
            if at + cols <= b_lo:
                break
            at = max(at, -(-b_hi // align) * align)
        offsets[op] = at
        end = max(end, at + cols)
    offsets = {op: offsets[op] for op in allocs}  # program order, for reports
    if end > TMEM_COLUMNS:
        sizes = ", ".join(f"{alloc_columns(op.result.type)} columns for "
                          f"{list(op.result.type.shape)} x {op.result.type.element} at "
                          f"{_where(op)}" for op in allocs)
        raise OutOfResources(fn.name, "tensor memory", end, TMEM_COLUMNS, "columns",
                             "a CTA has", f"allocations: {sizes}")
    return offsets


def columns_to_allocate(offsets: Dict[object, int]) -> int:
    end = max((off + alloc_columns(op.result.type) for op, off in offsets.items()), default=0)
    return max(MIN_ALLOC_COLUMNS, _pow2(end)) if end else 0


def plan_tensor_memory(module: Module) -> Notes:
    """Stage: `col_offset` on every `ttng.tmem_alloc`, and the kernel's allocation."""
    from shared_codegen.ops.tensor_memory.lowering import TensorMemoryLowering
    offsets = assign_columns(module.kernel)
    for op, col in offsets.items():
        op.attrs[COL_OFFSET] = col
    total = columns_to_allocate(offsets)
    first = next(iter(offsets), None)
    from shared_codegen.ops.tcgen05.pair import pair_kernel
    group = 2 if pair_kernel(module.kernel) else 1
    module.stage_results["tensor_memory"] = \
        TensorMemoryLowering(total, first, group) if total else None
    return Notes(lambda: f"tensor memory: {total} columns allocated for {len(offsets)} "
                         f"allocations" if total else "no tensor-memory allocations")


__all__ = ["plan_tensor_memory", "assign_columns", "columns_to_allocate", "live_ranges"]
