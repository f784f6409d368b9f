"""Data movement between the elements of tensors: `tt.join`, `tt.split`, `tt.gather`,
`tt.histogram`, and `ttg.fp4_to_fp` (unpacking two values per byte).

Importing this package registers the ops (`definition`, `fp4`) and their lowering rules."""

from shared_codegen.ops.movement import definition, fp4, fp4_lowering, lowering  # noqa: F401
