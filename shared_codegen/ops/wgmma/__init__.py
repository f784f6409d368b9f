"""Hopper warpgroup MMA (wgmma.mma_async) and its waits.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.wgmma import definition, lowering  # noqa: F401
