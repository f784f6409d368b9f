"""TMA bulk tensor copies through host-encoded tensor descriptors.

Importing this package registers the ops (`definition`, `descriptor_dims`, `tensormap`: maps
the kernel writes itself, `gather_scatter`: Blackwell's row gathers, `prefetch`: blocks into
L2) and their lowering rules."""

from shared_codegen.ops.tma import (definition, descriptor_dims, gather_scatter,  # noqa: F401
                                    gather_scatter_lowering, lowering, prefetch, tensormap,
                                    tensormap_lowering)
