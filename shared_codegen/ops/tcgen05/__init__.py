"""Blackwell tensor-core MMA (tcgen05.mma, SS and TS forms) and tcgen05.commit.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.tcgen05 import definition, lowering  # noqa: F401
