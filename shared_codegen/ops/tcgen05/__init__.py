"""Blackwell tensor-core operations: tcgen05.mma (SS and TS forms), tcgen05.commit, and
tcgen05.cp (shared -> tensor memory copies, `copy.py`).

Importing this package registers the ops (`definition`, `copy`) and their lowering rules."""

from shared_codegen.ops.tcgen05 import copy, copy_lowering, definition, lowering  # noqa: F401
