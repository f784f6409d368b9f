"""Program ids, CTA barriers, the warp vote, assertions, prints.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.program import definition, lowering, printing, warp_vote  # noqa: F401
