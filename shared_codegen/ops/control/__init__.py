"""Structured control flow: scf.for / scf.if / scf.while, yield, return.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.control import definition, lowering  # noqa: F401
