"""Shared-memory descriptors: local_alloc, loads, stores, views (index, subslice, permute,
reshape, reinterpret).

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.shared_memory import definition, lowering  # noqa: F401
