"""Global memory: load, store, atomics (vectorized, predicated PTX).

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.memory import definition, lowering  # noqa: F401
