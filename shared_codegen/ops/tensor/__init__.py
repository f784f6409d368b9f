"""Shape ops: make_range, splat, broadcast, expand_dims, reshape, trans, hint, convert_layout.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.tensor import definition, lowering  # noqa: F401
