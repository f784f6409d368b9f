"""Planning stages that run before lowering (listed in shared_codegen/stages.py): axis analysis,
shared-memory allocation and the facts barrier placement reads. Each records its decision on
the IR (an attribute the printer shows, or `//` notes in its dump) and in
`module.stage_results`, where `lower_module` reads it.

`ensure_planned` runs them for a module that reaches `lower_module` without the stages (a
hand-built one); such a module cannot hold `gl.warp_specialize`, whose plan comes from the
warp_specialize family's own stage (ops/warp_specialize/planning.py).
"""

from __future__ import annotations

from typing import Dict, FrozenSet

from shared_codegen.analysis import axis_info
from shared_codegen.ir.core import Module, Operation, Value
from shared_codegen.ir.passes import Notes
from shared_codegen.lowering.context import LoweringError
from shared_codegen.lowering.shared_alloc import (
    ALLOC,
    MAX_SHARED_BYTES,
    OFFSET_ATTR,
    alias_sets,
    assign_offsets,
)
from shared_codegen.ops.shared_memory.definition import alloc_bytes


def analyze_axes(module: Module) -> Notes:
    """Stage: the axis analysis of the kernel (read by vectorized loads and stores)."""
    analysis = axis_info.analyze(module.kernel)
    module.stage_results["axis_info"] = analysis
    return Notes(analysis.dump)


def allocate_shared_memory(module: Module) -> Notes:
    """Stage: byte offsets for every `ttg.local_alloc` (see lowering/shared_alloc.py)."""
    fn = module.kernel
    if not any(op.name == ALLOC for op in fn.walk()):
        module.stage_results["static_shared_bytes"] = 0
        return Notes(lambda: "no shared-memory allocations")
    offsets, total = assign_offsets(fn)
    if total > MAX_SHARED_BYTES:
        sizes = ", ".join(f"{alloc_bytes(op.result.type)} B at {op.loc}" for op in offsets)
        raise LoweringError(f"kernel `{fn.name}` needs {total} bytes of shared memory, more "
                            f"than the {MAX_SHARED_BYTES} a CTA can have (allocations: "
                            f"{sizes})")
    for op, offset in offsets.items():
        op.attrs[OFFSET_ATTR] = offset
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


def ensure_planned(module: Module) -> None:
    """Run the planning stages on a module that did not go through them."""
    if "shared_aliases" in module.stage_results:
        return
    analyze_axes(module)
    module.stage_results.setdefault("warp_specialization", None)
    allocate_shared_memory(module)
    plan_barriers(module)


__all__ = ["analyze_axes", "allocate_shared_memory", "plan_barriers", "ensure_planned"]
