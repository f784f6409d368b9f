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
    tensor_memory_allocation      tensor-memory columns of `allocate_tensor_memory` (sm_100a;
                                  at most 512 per CTA)
    barrier_insertion             the aliasing facts `bar.sync` placement reads
    lower_to_llvm, llvm_to_ptx, ptx_to_cubin

`SC_DUMP_IR_DIR=dir` writes the IR after each stage to `dir/NN-<stage>.mlir`; analysis,
planning and backend stages add what they decided or produced (attributes on the ops, or
`//` notes at the end: axis facts, LLVM IR, PTX).
"""

from gluon.passes import GLUON_PIPELINE
from shared_codegen.stages import BACKEND_STAGES

# Gluon's passes (resolve_auto_layouts, verify_layouts), then the shared tail; the docstring
# above names every stage, and tests pin the list.
GLUON_STAGES = [*GLUON_PIPELINE, *BACKEND_STAGES]

__all__ = ["GLUON_STAGES"]
