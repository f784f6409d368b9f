"""The `tensor_memory_allocation` stage: a first column for every `ttng.tmem_alloc`.

Tensor memory is 512 columns x 128 lanes per CTA (PTX ISA "Tensor Memory"). Every allocation spans
all lanes and `alloc_columns(type)` 32-bit columns; it starts at a multiple of its size
rounded up to a power of two, so that halves and quarters sliced out of it are aligned too.
Allocations live for the whole kernel (no reuse between allocations whose lifetimes do not
overlap yet). The kernel asks the hardware for the total rounded up to a power of two of at
least 32 columns (`tcgen05.alloc` takes only those), once, at entry, and gives it back at
exit: `lowering.TensorMemoryLowering`, which this stage leaves in
`module.stage_results["tensor_memory"]` (None when the kernel has no allocation).
"""

from __future__ import annotations

from typing import Dict, List

from shared_codegen.ir.core import Module
from shared_codegen.ir.passes import Notes
from shared_codegen.lowering.context import LoweringError
from shared_codegen.ops.tensor_memory.definition import (COL_OFFSET, TMEM_COLUMNS, TmemAllocOp,
                                                         alloc_columns)

MIN_ALLOC_COLUMNS = 32  # tcgen05.alloc: a power of two in [32, 512]


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _where(op) -> str:
    return f"{op.loc.file.rsplit('/', 1)[-1]}:{op.loc.line}" if op.loc.line else "<kernel>"


def assign_columns(fn) -> Dict[object, int]:
    """{tmem_alloc op: first column}, in program order; LoweringError past 512 columns."""
    allocs: List = [op for op in fn.walk() if isinstance(op.opdef, TmemAllocOp)]
    offsets, end = {}, 0
    for op in allocs:
        cols = alloc_columns(op.result.type)
        align = min(_pow2(cols), TMEM_COLUMNS)
        start = -(-end // align) * align
        offsets[op] = start
        end = start + cols
    if end > TMEM_COLUMNS:
        sizes = ", ".join(f"{alloc_columns(op.result.type)} columns for "
                          f"{list(op.result.type.shape)} x {op.result.type.element} at "
                          f"{_where(op)}" for op in allocs)
        raise LoweringError(f"kernel `{fn.name}` needs {end} columns of tensor memory, more "
                            f"than the {TMEM_COLUMNS} a CTA has (allocations: {sizes})")
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
    module.stage_results["tensor_memory"] = TensorMemoryLowering(total, first) if total else None
    return Notes(lambda: f"tensor memory: {total} columns allocated for {len(offsets)} "
                         f"allocations" if total else "no tensor-memory allocations")


__all__ = ["plan_tensor_memory", "assign_columns", "columns_to_allocate"]
