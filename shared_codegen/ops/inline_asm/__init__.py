"""`tt.elementwise_inline_asm`: user PTX applied to tensors element by element
(`inline_asm_elementwise`).

Importing this package registers the op (`definition`) and its lowering rule."""

from shared_codegen.ops.inline_asm import definition, lowering  # noqa: F401
