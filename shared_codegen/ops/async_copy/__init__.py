"""Ampere cp.async copies from global to shared memory, commit groups and waits.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.async_copy import definition, lowering  # noqa: F401
