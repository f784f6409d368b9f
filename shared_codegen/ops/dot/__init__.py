"""Register-level matrix products: Ampere mma.sync (mma_v2) and FMA dots.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.dot import definition, lowering  # noqa: F401
