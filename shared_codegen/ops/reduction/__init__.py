"""Reductions and scans along an axis, with combine regions.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.reduction import definition, lowering, scan_lowering  # noqa: F401
