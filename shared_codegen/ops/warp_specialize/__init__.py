"""Warp specialization: partitions, warp placement, register budgets (setmaxnreg).

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.warp_specialize import definition, lowering  # noqa: F401
