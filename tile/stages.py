"""Every step from tile IR to cubin, in order: the list `tile.compile` and launches run.

The tile frontend traces a kernel into IR whose tensors have no layout. Its own passes make
that IR explicit, exactly what a Gluon author could have written; from there the stages are
the ones every frontend shares (`shared_codegen/stages.py`):

    combine_dot_add               `acc + tl.dot(a, b)` -> `tl.dot(a, b, acc)`, as Triton's
                                  combine pass (tile/passes/combine_dot_add.py)
    loop_unroll                   tl.range(loop_unroll_factor=N) loops: a remainder loop for
                                  trip % N iterations, then N copies of the body per
                                  iteration (tile/passes/loop_unroll.py)
    warp_specialize_warps         num_warps=4 with a loop warp_specialization will take:
                                  8 warps (two wgmma consumer warpgroups, as Triton 3.6),
                                  decided before any layout is made for them
                                  (tile/passes/warp_specialize.py)
    layout_assignment             a layout for every tensor (coalesced accesses, mma operand
                                  layouts, reductions), `ttg.convert_layout` where they differ;
                                  each `tl.dot` becomes wgmma / mma_v2 / dot_fma for the target
                                  (tile/passes/dot_acceleration.py)
    remove_redundant_conversions  drop conversions that change nothing or undo each other
    cse                           merge identical pure ops the rewrites duplicated
    loop_flatten                  tl.range(flatten=True) nests become one loop over every
                                  inner step, the outer body's code under `scf.if`s, so the
                                  pipeliner rings loads across outer iterations, as Triton's
                                  FuseNestedLoops (tile/passes/loop_flatten.py)
    warp_specialization           tl.range(warp_specialize=True) loops on sm_90a: a one-warp
                                  TMA producer partition and the wgmma consumer sharing a ring
                                  with ready / empty mbarriers (tile/passes/warp_specialize.py)
    software_pipelining           loops feeding tl.dot load num_stages - 1 iterations ahead
                                  through cp.async rings (tile/passes/pipelining.py), or
                                  TMA rings with mbarriers (tile/passes/tma_pipelining.py)
    hoist_invariant_conversions   a conversion of a loop invariant moves before its loop,
                                  after the pipeline's prologue (tile/passes/cleanup.py)
    explicit_layout_ir            the IR the CPU interpreter runs and the converter prints
    axis_analysis                 contiguity / divisibility, for 16-byte global accesses
    warp_specialization_planning  partitions' warps and registers (warp_specialization's)
    shared_memory_allocation      offsets of shared-memory buffers, packed by liveness
    tensor_memory_allocation      tensor-memory columns (Blackwell; none in tile kernels yet)
    barrier_insertion             the aliasing facts `bar.sync` placement reads
    lower_to_llvm, llvm_to_ptx, ptx_to_cubin

`SC_DUMP_IR_DIR=dir` writes the IR after each stage to `dir/NN-<stage>.mlir`; analysis,
planning and backend stages add what they decided or produced (attributes on the ops, or
`//` notes at the end: axis facts, LLVM IR, PTX).
"""

from shared_codegen.stages import BACKEND_STAGES
from tile.passes import TILE_PIPELINE

# The tile passes (combine_dot_add, loop_unroll, warp_specialize_warps, layout_assignment,
# remove_redundant_conversions, cse, loop_flatten, warp_specialization,
# software_pipelining),
# then the shared tail;
# the docstring above names every stage, and tests/tile/test_stages.py pins the list.
TILE_STAGES = [*TILE_PIPELINE, *BACKEND_STAGES]

__all__ = ["TILE_STAGES"]
