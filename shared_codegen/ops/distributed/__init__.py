"""Symmetric-memory peer access, memory-model loads and stores, signals, waits and tokens
(docs/distributed.md).

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.distributed import definition, lowering  # noqa: F401
