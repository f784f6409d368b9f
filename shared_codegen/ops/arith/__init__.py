"""Elementwise arithmetic: constants, binary ops, comparisons, select, casts, pointer offsets.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.arith import definition, lowering  # noqa: F401
