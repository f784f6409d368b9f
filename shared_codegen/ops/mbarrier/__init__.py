"""mbarriers (sm_90): shared-memory barriers with phases, arrival counts and transaction bytes.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.mbarrier import definition, lowering  # noqa: F401
