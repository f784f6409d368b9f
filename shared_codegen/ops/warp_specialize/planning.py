"""The `warp_specialization_planning` stage: where each partition's warps go and how many
registers each warpgroup holds, decided before lowering.

    ttg.warp_specialize %a, %b {worker_num_warps = [1, 1], worker_num_regs = [24, 24],
        plan: total_warps = 8, starts = [4, 5], entry_regs = 128, default_regs = 232, ...}

The stage checks what lowering supports (`gl.warp_specialize` calls at the kernel's top level,
tensor descriptors only from kernel parameters; allocations inside a partition are placed by
the shared-memory allocator, live for the whole call), records the
`WarpPlan` on each op (`warp_plan`, which the op's printer shows) and leaves the per-kernel
lowering state in `module.stage_results["warp_specialization"]`, which `lower_module` reads for
the launch size, the `.maxnreg` cap and the warp-role branch at the kernel's entry. With
several calls, every plan is made for the largest launch (the same warps and starting
register cap serve all of them; lowering.py describes how the workers run them in turn).
"""

from __future__ import annotations

from shared_codegen.ir.core import Module
from shared_codegen.ir.types import TensorDescriptorType
from shared_codegen.lowering.context import LoweringError
from shared_codegen.ops.warp_specialize.definition import NAME, WarpPlan
from shared_codegen.ops.warp_specialize.lowering import WarpSpecLowering

PLAN_ATTR = "warp_plan"
RESULT_KEY = "warp_specialization"


def plan_warp_specialization(module: Module) -> None:
    """Stage: plan the kernel's warp specialization (nothing to do without one)."""
    fn = module.kernel
    num_warps = int(module.attrs.get("num_warps", 4))
    module.stage_results[RESULT_KEY] = None
    ops = [op for op in fn.walk() if op.name == NAME]
    if not ops:
        return
    for op in ops:
        _check_supported(fn, op)
    plans = [_plan(num_warps, op) for op in ops]
    if len(ops) > 1:
        total = max(p.total_warps for p in plans)
        plans = [_plan(num_warps, op, total) for op in ops]
    for op, plan in zip(ops, plans):
        op.attrs[PLAN_ATTR] = plan
    module.stage_results[RESULT_KEY] = WarpSpecLowering(ops, plans, fn)


def _plan(num_warps: int, op, min_total_warps: int = 0) -> WarpPlan:
    try:
        return WarpPlan.make(num_warps, op.attrs["worker_num_warps"],
                             op.attrs["worker_num_regs"], list(op.attrs["partition_names"])[1:],
                             min_total_warps)
    except ValueError as exc:
        raise LoweringError(str(exc), op) from None


def _check_supported(fn, op) -> None:
    if op.parent is not fn.body.block:
        raise LoweringError("gl.warp_specialize must be called at the top level of the "
                            "kernel, not inside a loop or branch", op)
    kernel_args = {id(a) for a in fn.args}
    for v in op.operands:
        if isinstance(v.type, TensorDescriptorType) and id(v) not in kernel_args:
            raise LoweringError("a tensor descriptor passed to a worker partition must be a "
                                "kernel parameter", op)


__all__ = ["plan_warp_specialization", "PLAN_ATTR", "RESULT_KEY"]
