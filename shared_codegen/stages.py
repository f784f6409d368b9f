"""The stages every frontend ends with: from explicit-layout IR to a cubin.

A frontend's stages file (`tile/stages.py`, `gluon/stages.py`) lists its own passes and then
`BACKEND_STAGES`; `shared_codegen.ir.passes.run_pipeline` runs the whole list, so
`SC_DUMP_IR_DIR` gets one file per stage, analyses and planning included:

    explicit_layout_ir          the IR both frontends meet at (`asm["ttgir"]`): every tensor
                                has a layout, as a Gluon author would write it
    axis_analysis               contiguity / divisibility / constancy of every value, which
                                sizes vectorized global accesses (dump: the facts, as comments)
    warp_specialization_planning  warps and registers of each `gl.warp_specialize` partition
                                (dump: the plan on `ttg.warp_specialize`)
    shared_memory_allocation    a byte offset for every `ttg.local_alloc`, packed by liveness
                                (dump: `offset` on each alloc, the total as a comment)
    tensor_memory_allocation    the first TMEM column of every `ttng.tmem_alloc` (512 columns
                                per CTA; dump: `col_offset` on each, the total as a comment)
    barrier_insertion           which allocations each descriptor may view, the facts the
                                `bar.sync` placement reads (dump: the alias sets, as comments);
                                the barriers themselves are still placed while lowering, by
                                `sync_shared` (ops/shared_memory/lowering.py), because where
                                they go depends on the LLVM blocks op rules create
    lower_to_llvm               LLVM IR (`asm["llir"]`; dump: the IR, then as comments every
                                bar.sync lowering placed, with its op and line, and the LLVM IR)
    llvm_to_ptx                 PTX through LLVM's NVPTX backend (`asm["ptx"]`)
    ptx_to_cubin                the cubin through nvJitLink (`asm["cubin"]`; dump: its size
                                and nvJitLink's log)

Analysis and planning stages record their decisions on the IR (op attributes the printer
shows) and leave what later stages need in `module.stage_results`; `lower_module` reads them
instead of computing them. They live with what they plan: axis analysis here, shared memory
and barrier facts in ops/shared_memory/allocation.py, warp specialization in
ops/warp_specialize/planning.py. `plan_and_lower` runs them for a module built by hand.
"""

from __future__ import annotations

from shared_codegen.analysis import axis_info
from shared_codegen.ir.core import Module
from shared_codegen.ir.passes import Notes
from shared_codegen.ir.printer import print_module
from shared_codegen.lowering import backend
from shared_codegen.lowering.lower import lower_module
from shared_codegen.lowering.resources import check_registers
from shared_codegen.ops.shared_memory.allocation import allocate_shared_memory, plan_barriers
from shared_codegen.ops.tensor_memory.allocation import plan_tensor_memory
from shared_codegen.ops.warp_specialize.planning import plan_warp_specialization


def analyze_axes(module: Module) -> Notes:
    """Stage: the axis analysis of the kernel (read by vectorized loads and stores)."""
    analysis = axis_info.analyze(module.kernel)
    module.stage_results["axis_info"] = analysis
    return Notes(analysis.dump)


def record_explicit_layout_ir(module: Module) -> None:
    """Stage: keep the explicit-layout IR as text before the backend annotates it."""
    module.stage_results["ttgir"] = print_module(module)


def lower_to_llvm(module: Module) -> Notes:
    """Stage: LLVM IR of the kernel (one `ptx_kernel` function)."""
    lowered = lower_module(module)
    module.stage_results["lowered"] = lowered
    barriers = module.stage_results.get("barriers", [])
    return Notes(lambda: f"{_describe_barriers(barriers)}\nLLVM IR ({lowered.shared_bytes} "
                         f"bytes of shared memory, {lowered.num_warps} warps launched):\n"
                         f"{lowered.llvm_ir}")


def _describe_barriers(barriers) -> str:
    lines = [f"bar.sync placed while lowering (shared-memory hazards, thread_barrier, scratch "
             f"reuse; not the warp-specialization hand-off and join): {len(barriers)}"]
    for op, named in barriers:
        which = "bar.sync 0" if named is None else f"bar.sync {named[0]}, {named[1]}"
        where = "" if op is None else f" in {op.name}" + (
            f" at {op.loc.file.rsplit('/', 1)[-1]}:{op.loc.line}" if op.loc.line else "")
        lines.append(f"  {which}{where}")
    return "\n".join(lines)


def _target(module: Module) -> str:
    return module.stage_results.get("target") or module.attrs.get("target", "sm_90a")


def llvm_to_ptx(module: Module) -> Notes:
    """Stage: PTX from LLVM's NVPTX backend."""
    lowered = module.stage_results["lowered"]
    ptx = backend.llvm_to_ptx(lowered.llvm_ir, _target(module),
                              ptx_version=getattr(lowered, "ptx_version", None))
    module.stage_results["ptx"] = ptx
    return Notes(lambda: f"PTX:\n{ptx}")


def ptx_to_cubin(module: Module) -> Notes:
    """Stage: the cubin from nvJitLink (its log kept for the kernel's metadata)."""
    cubin, log = backend.ptx_to_cubin(module.stage_results["ptx"], _target(module))
    module.stage_results["cubin"] = bytes(cubin)
    module.stage_results["jit_log"] = log or ""
    # ptxas is not given the launch's thread count (no .maxntid), so it may use more
    # registers than a CTA of num_warps warps can hold: say so now, not at launch.
    lowered = module.stage_results["lowered"]
    usage = backend.parse_resource_usage(log or "").get(lowered.name)
    registers = usage.registers if usage is not None else 0
    module.stage_results["registers"] = registers
    module.stage_results["spill_stores"] = usage.spill_stores if usage is not None else 0
    check_registers(lowered.name, registers, lowered.num_warps)
    return Notes(lambda: f"cubin: {len(cubin)} bytes for {_target(module)}\n"
                         f"nvJitLink log:\n{log or '(empty)'}")


def plan_and_lower(module: Module, target=None):
    """Run the planning stages on a module that did not go through a stages list (one built
    by hand, in tests) and lower it."""
    if "shared_aliases" not in module.stage_results:
        analyze_axes(module)
        plan_warp_specialization(module)
        allocate_shared_memory(module)
        plan_tensor_memory(module)
        plan_barriers(module)
    return lower_module(module, target)


BACKEND_STAGES = [
    ("explicit_layout_ir", record_explicit_layout_ir),
    ("axis_analysis", analyze_axes),
    ("warp_specialization_planning", plan_warp_specialization),
    ("shared_memory_allocation", allocate_shared_memory),
    ("tensor_memory_allocation", plan_tensor_memory),
    ("barrier_insertion", plan_barriers),
    ("lower_to_llvm", lower_to_llvm),
    ("llvm_to_ptx", llvm_to_ptx),
    ("ptx_to_cubin", ptx_to_cubin),
]


__all__ = ["BACKEND_STAGES", "record_explicit_layout_ir", "analyze_axes",
           "plan_warp_specialization", "allocate_shared_memory", "plan_tensor_memory",
           "plan_barriers",
           "lower_to_llvm", "llvm_to_ptx", "ptx_to_cubin", "plan_and_lower"]
