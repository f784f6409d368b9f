"""`tt.map_elementwise`: a scalar function (a region) applied to every element of tensors.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.map_elementwise import definition, lowering  # noqa: F401
