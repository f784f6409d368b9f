"""Asynchronous operations of the explicit-layout language, one op family per module (each
with its builder, verifier, printer, interpreter rule and lowering rule side by side):

- `mbarrier`: shared-memory barriers with phases, arrival counts and transaction bytes;
- `tma`: TMA bulk tensor copies through host-encoded tensor descriptors;
- `fence`: `fence_async_shared`, ordering generic and async proxies.

The Gluon builtins that build these ops are in `gluon.language.nvidia.hopper` (Triton 3.6's
names); the host-side `TensorDescriptor` is in `gluon.nvidia.hopper`. Importing this package
registers the ops.
"""

from gluon.async_ import fence, mbarrier, tma

__all__ = ["fence", "mbarrier", "tma"]
