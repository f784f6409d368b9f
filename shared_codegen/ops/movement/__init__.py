"""Data movement between the elements of tensors: `tt.join`, `tt.split`, `tt.gather`,
`tt.histogram`.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.movement import definition, lowering  # noqa: F401
