"""Tile-IR passes: turn layout-free IR into explicit-layout IR a Gluon author could write.

`TILE_PIPELINE` is the flat list of these passes, run with
`shared_codegen.ir.passes.run_pipeline(module, TILE_PIPELINE)`; set `SC_DUMP_IR_DIR` to get
the IR after each one. It is the head of `tile/stages.py`, which continues to the cubin.
Dot acceleration runs inside layout_assignment (`dot_acceleration.py`); software pipelining
is its own pass (`pipelining.py`).
"""

from tile.passes.cleanup import cse, hoist_invariant_conversions, remove_redundant_conversions
from tile.passes.combine_dot_add import combine_dot_add
from tile.passes.coalesce import blocked_layout_for
from tile.passes.layout_assignment import LayoutAssignmentError, assign_layouts
from tile.passes.loop_flatten import flatten_loops
from tile.passes.loop_unroll import unroll_loops
from tile.passes.persistent import make_persistent
from tile.passes.pipelining import pipeline_module
from tile.passes.warp_specialize import warp_specialize_module, warp_specialize_warps

TILE_PIPELINE = [
    ("combine_dot_add", combine_dot_add),
    ("loop_unroll", unroll_loops),
    ("warp_specialize_warps", warp_specialize_warps),
    ("layout_assignment", assign_layouts),
    ("remove_redundant_conversions", remove_redundant_conversions),
    ("cse", cse),
    ("persistent_programs", make_persistent),
    ("loop_flatten", flatten_loops),
    ("warp_specialization", warp_specialize_module),
    ("software_pipelining", pipeline_module),
    ("hoist_invariant_conversions", hoist_invariant_conversions),
]

__all__ = ["TILE_PIPELINE", "combine_dot_add", "assign_layouts", "remove_redundant_conversions",
           "cse", "blocked_layout_for", "LayoutAssignmentError", "pipeline_module",
           "unroll_loops", "flatten_loops", "warp_specialize_module", "warp_specialize_warps",
           "make_persistent", "hoist_invariant_conversions"]
