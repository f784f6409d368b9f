"""Warp specialization for the explicit-layout language.

- `gl.warp_specialize` (`gluon/language/_warp_spec.py`) builds `ttg.warp_specialize`
  (`shared_codegen/ir/ops/warp_specialize.py`: the op, `WarpPlan` with warp placement and
  register budgets for setmaxnreg), lowered by `shared_codegen/lowering/warp_spec_rules.py`
  (warpgroup-role branches, setmaxnreg, named barriers) and run by the interpreter as
  cooperative partitions (`shared_codegen/interpreter/partitions.py`);
- `pipeline`: a producer/consumer ring of mbarrier pairs that owns stage indices and phases.
"""

from shared_codegen.ir.ops.warp_specialize import WarpPlan

from . import pingpong, pipeline

__all__ = ["WarpPlan", "pingpong", "pipeline"]
