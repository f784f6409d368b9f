"""Blackwell tensor-core operations: tcgen05.mma (SS and TS forms), tcgen05.commit,
tcgen05.cp (shared -> tensor memory copies, `copy.py`) and the block-scaled MMA of the MX
formats (`scaled.py`).

Importing this package registers the ops (`definition`, `copy`, `scaled`) and their lowering
rules."""

from shared_codegen.ops.tcgen05 import (copy, copy_lowering, definition, lowering,  # noqa: F401
                                        scaled, scaled_lowering)
