"""Every step from Gluon IR to cubin, in order: the list `gluon.compile` and launches run.

A Gluon kernel's IR already has a layout on every tensor (or an `AutoLayout()` placeholder),
so the language's own passes only finish and check the layouts; the rest are the stages every
frontend shares (`shared_codegen/stages.py`):

    resolve_auto_layouts          replace `AutoLayout()` by the layouts propagation gives
    verify_layouts                every tensor has a concrete layout covering its shape
    explicit_layout_ir            the IR the CPU interpreter runs
    axis_analysis                 contiguity / divisibility, for 16-byte global accesses
    warp_specialization_planning  `gl.warp_specialize`: each partition's warps, the registers
                                  of each warpgroup, the launch size (shown on the op)
    shared_memory_allocation      a byte offset for every `gl.allocate_shared_memory` buffer,
                                  packed by liveness (shown as `offset` on `ttg.local_alloc`)
    barrier_insertion             the aliasing facts `bar.sync` placement reads
    lower_to_llvm, llvm_to_ptx, ptx_to_cubin

`SC_DUMP_IR_DIR=dir` writes the IR after each stage to `dir/NN-<stage>.mlir`; analysis,
planning and backend stages add what they decided or produced (attributes on the ops, or
`//` notes at the end: axis facts, LLVM IR, PTX).
"""

from gluon.passes import resolve_auto_layouts, verify_layouts
from shared_codegen.stages import (
    allocate_shared_memory,
    analyze_axes,
    llvm_to_ptx,
    lower_to_llvm,
    plan_barriers,
    plan_warp_specialization,
    ptx_to_cubin,
    record_explicit_layout_ir,
)

GLUON_STAGES = [
    ("resolve_auto_layouts", resolve_auto_layouts),
    ("verify_layouts", verify_layouts),
    ("explicit_layout_ir", record_explicit_layout_ir),
    ("axis_analysis", analyze_axes),
    ("warp_specialization_planning", plan_warp_specialization),
    ("shared_memory_allocation", allocate_shared_memory),
    ("barrier_insertion", plan_barriers),
    ("lower_to_llvm", lower_to_llvm),
    ("llvm_to_ptx", llvm_to_ptx),
    ("ptx_to_cubin", ptx_to_cubin),
]

__all__ = ["GLUON_STAGES"]
