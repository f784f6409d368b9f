"""Thread-block clusters: the CTA's rank in its cluster and the cluster barrier.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.cluster import definition, lowering  # noqa: F401
