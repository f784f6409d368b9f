"""Blackwell tensor memory: allocation (planned by the `tensor_memory_allocation` stage),
index / slice views, and tcgen05.ld / tcgen05.st moves to and from registers.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.tensor_memory import definition, lowering  # noqa: F401
