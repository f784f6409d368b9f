"""Program ids, CTA barriers, assertions, prints.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.program import definition, lowering, printing  # noqa: F401
