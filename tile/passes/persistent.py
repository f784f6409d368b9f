"""Persistent programs: a GEMM-like kernel launched with more programs than the GPU holds at
once runs as one program per slot, each walking the requested program ids.

Why: a program per output tile (Triton's tutorial 03) runs in waves. Every program fills its
software pipeline from nothing, and its epilogue stores its tile while the tensor cores of
its SM wait for the next program to be scheduled and fill its pipeline again. cuBLAS's
Hopper kernels are persistent: a loop over tiles, the next tile's loads in flight during
this tile's epilogue. Written as

    for pid in range(program_id(0), launch_grid(0), num_programs(0)):   # flatten
        <the kernel body, with pid for program_id(0)>

and flattened (loop_flatten.py, which runs next), the pipeliner rings the loads across tile
boundaries, as `tl.range(..., flatten=True)` in tutorial 09's persistent kernels does.
Measured on the H200 (2026-11-28, benchmarks/tile_matmul.py: tutorial 03's kernel,
128x256x64, 3 stages, 8 warps, 4096^3 fp16): 0.951x and 0.954x cuBLAS by device time (CUDA
graph replays) before, 0.965x to 0.976x in four runs after; by CUDA events around five calls
(the first call's host time included) 0.944x to 0.964x before, 0.949x to 0.960x after.

A launch whose grid fits on the GPU at once would run each program's one tile through the
flattened loop, which cost 1-4% there (H200, 1024^3 and 2048^3, one wave): such launches run
a one-program-per-tile build instead, compiled on the first of them (`PersistentBinder`).

The launcher does the rest (frontend/launch.py, `PersistentBinder`): it launches at most as
many programs as fit on the GPU at once (occupancy x SMs) and passes the requested grid as a
hidden last parameter (`sc.launch_grid`, lowering/lower.py). The interpreter launches two
programs, so the loop runs on the CPU too. The converter prints kernels without this pass:
Gluon has no hidden launch parameter.

Which kernels: the transformation is invisible to a kernel whose programs are independent
and do equal work; the checks below keep to those, on sm_90 and newer, where it was
measured:
- the body holds exactly one loop, a top-level `for` with a `tl.dot` in it and no loop of
  its own, whose bounds do not depend on the program id (equal work per program; a causal
  attention loop, whose length varies, is better served by the hardware's own scheduling);
- the program id and grid are read on axis 0 only;
- no atomics (programs may talk to each other through them), inline assembly (it may read
  %ctaid), programmatic dependent launch, warp specialization, clusters, TMA or mbarriers
  written by hand, timeline or debug instrumentation.
`SC_PERSISTENT=0` turns the pass off.
"""

from __future__ import annotations

from typing import List, Optional

from shared_codegen import config
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Module, Operation, Value, replace_all_uses
from shared_codegen.ir.passes import erase_op, insert_before, move_to_end
from shared_codegen.lowering.backend import parse_target
from shared_codegen.ops.control.definition import ForOp, WhileOp, YieldOp
from shared_codegen.ops.dot.definition import DotOp
from shared_codegen.ops.memory.definition import AtomicCASOp, AtomicRMWOp
from shared_codegen.ops.program.definition import (LAUNCH_GRID, NUM_PROGRAMS, PROGRAM_ID,
                                                   ProgramIdOp)
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp
from tile.passes.layout_assignment import dot_target
from tile.passes.loop_flatten import flatten_nest
from tile.passes.loop_building import _At
from tile.passes.wgmma_schedule import _is

PERSISTENT = "persistent_programs"  # the module attribute: lowering adds the hidden parameter
# Op families a persistent kernel must not hold (their package names under shared_codegen.ops).
_DECLINED_FAMILIES = ("inline_asm", "griddepcontrol", "warp_specialize", "cluster",
                      "distributed", "tma", "mbarrier", "tcgen05", "tensor_memory", "profile",
                      "async_copy")


def make_persistent(module: Module) -> None:
    """The `persistent_programs` pass (see the module docstring)."""
    if not _module_allows(module):
        return
    kernels = [fn for fn in module.functions.values() if fn.attrs.get("kernel")]
    if len(kernels) != 1 or len(module.functions) != 1:
        return
    if _rewrite(kernels[0]):
        module.attrs[PERSISTENT] = True


def _module_allows(module: Module) -> bool:
    if not config.get("SC_PERSISTENT") or not module.stage_results.get("allow_persistent",
                                                                       True):
        return False
    if module.stage_results.get("instrument") or int(module.attrs.get("num_ctas", 1)) != 1:
        return False
    if module.attrs.get("global_scratch_bytes"):
        return False
    # The interpreter runs the IR its SC_TARGET's GPU would (layout_assignment.dot_target).
    try:
        major = parse_target(dot_target(module))[0]
    except Exception:  # a target string parse_target does not know: leave the kernel be
        return False
    return major >= 90


def _rewrite(fn) -> bool:
    """Wrap `fn`'s body in the persistent loop and flatten it; False (and `fn` unchanged)
    when the kernel is not one the module docstring admits."""
    block = fn.body.block
    body = block.ops[:-1]  # all but the return
    loop = _main_loop(fn, body)
    if loop is None:
        return False
    ids = [op for op in fn.walk() if _is(op, ProgramIdOp) and op.name == PROGRAM_ID]
    grids = [op for op in fn.walk() if _is(op, ProgramIdOp) and op.name == NUM_PROGRAMS]
    if not ids or any(op.attrs["axis"] != 0 for op in ids + grids):
        return False
    if _depends_on(loop.operands[:3], {op.results[0] for op in ids}):
        return False
    at = _At(body[0].loc)
    pid = ProgramIdOp.build(at.b, PROGRAM_ID, 0)
    requested = ProgramIdOp.build(at.b, LAUNCH_GRID, 0)
    launched = ProgramIdOp.build(at.b, NUM_PROGRAMS, 0)
    outer = ForOp.build(at.b, pid, requested, launched, [], iv_name="pid")
    built = list(at.block.ops)
    at.place_before(body[0])
    loop_body = outer.regions[0].block
    move_to_end(body, loop_body)
    YieldOp.build(Builder(loop_body, outer.loc), [])
    iv = loop_body.args[0]
    for op in ids:
        replace_all_uses(loop_body.ops, op.results[0], iv)
    for op in grids:
        replace_all_uses(loop_body.ops, op.results[0], requested)
    reason = flatten_nest(outer)
    if reason is None:
        for op in ids + grids:  # read by nothing now
            erase_op(op)
        return True
    # Not a nest loop_flatten takes (a value of another kind crosses the loop, ...): put the
    # body back as it was.
    for op in ids:
        replace_all_uses(loop_body.ops, iv, op.results[0])
    for op in grids:
        replace_all_uses(loop_body.ops, requested, op.results[0])
    for op in loop_body.ops[:-1]:
        loop_body.ops.remove(op)
        insert_before(outer, op)
    for op in built:
        block.ops.remove(op)
    return False


def _main_loop(fn, body: List[Operation]) -> Optional[Operation]:
    """The body's one loop: top-level, feeding a dot, without a loop of its own; None when
    the kernel is not of that shape or holds an op the module docstring declines."""
    loops = []
    has_dot = False
    for op in fn.walk():
        if _is(op, AtomicRMWOp) or _is(op, AtomicCASOp):
            return None
        package = type(op.opdef).__module__.split(".")
        if len(package) > 2 and package[1] == "ops" and package[2] in _DECLINED_FAMILIES:
            return None
        if _is(op, ForOp) or _is(op, WhileOp):
            loops.append(op)
        if _is(op, DotOp) or _is(op, WarpGroupDotOp):
            has_dot = True
    if len(loops) != 1 or loops[0] not in body or not has_dot:
        return None
    loop = loops[0]
    if not _is(loop, ForOp) or loop.attrs.get("flatten") or loop.attrs.get("warp_specialize"):
        return None
    if not any(_is(op, DotOp) or _is(op, WarpGroupDotOp) for op in loop.walk()):
        return None
    return loop


def _depends_on(values: List[Value], sources: set) -> bool:
    """Whether any of `values` is computed from `sources` (through the ops computing them,
    the reads inside an `if` or loop that yields one included)."""
    seen = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if v in sources:
            return True
        if id(v) in seen:
            continue
        seen.add(id(v))
        owner = getattr(v, "owner", None)
        if isinstance(owner, Operation):
            stack.extend(owner.operands)
            for region in owner.regions:  # values an `if` yields depend on what it reads
                for inner in region.block.ops:
                    stack.extend(inner.operands)
    return False


__all__ = ["make_persistent", "PERSISTENT"]
