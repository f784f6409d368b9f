"""Warp specialization: partitions, warp placement, register budgets (setmaxnreg).

Importing this package registers the ops (`definition`) and their lowering rules; `planning`
is the `warp_specialization_planning` stage (shared_codegen/stages.py)."""

from shared_codegen.ops.warp_specialize import definition, lowering  # noqa: F401
