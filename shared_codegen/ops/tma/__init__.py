"""TMA bulk tensor copies through host-encoded tensor descriptors.

Importing this package registers the ops (`definition`, `descriptor_dims`, `tensormap`: maps
the kernel writes itself) and their lowering rules."""

from shared_codegen.ops.tma import (definition, descriptor_dims, lowering,  # noqa: F401
                                    tensormap, tensormap_lowering)
