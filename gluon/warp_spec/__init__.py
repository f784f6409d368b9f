"""Warp specialization for the explicit-layout language.

- `gl.warp_specialize` (`gluon/language/_warp_spec.py`) builds `ttg.warp_specialize`
  (`shared_codegen/ops/warp_specialize/definition.py`: the op, `WarpPlan` with warp placement and
  register budgets for setmaxnreg), lowered by `shared_codegen/ops/warp_specialize/lowering.py`
  (warpgroup-role branches, setmaxnreg, named barriers) and run by the interpreter as
  cooperative partitions (`shared_codegen/ops/warp_specialize/interpreter.py`);
- `pipeline`: a producer/consumer ring of mbarrier pairs that owns stage indices and phases;
- `pingpong`: turn-taking among two or more consumer warpgroups (round-robin), so one's
  non-MMA work runs under the others' MMAs.
"""

from gluon.warp_spec import pingpong, pipeline
from shared_codegen.ops.warp_specialize.definition import WarpPlan

__all__ = ["WarpPlan", "pingpong", "pipeline"]
