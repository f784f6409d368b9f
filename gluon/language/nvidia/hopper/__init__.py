"""Hopper-class (sm_90a) builtins with the names of
`triton.experimental.gluon.language.nvidia.hopper` 3.6: `mbarrier`, `tma`,
`fence_async_shared`, `warpgroup_mma` / `warpgroup_mma_wait` (when present), `cluster`
(Triton 3.7+: thread-block clusters), and Ampere's
`async_copy` / `mma_v2`, which Hopper kernels use too.

The ops behind them live in `shared_codegen/ops/` (`mbarrier`, `tma`, `fence`) (one module per op family).
"""

from __future__ import annotations

from gluon.language.nvidia.ampere import async_copy, mma_v2
from gluon.language.nvidia.hopper import cluster, mbarrier, tma
from shared_codegen.frontend.values import builtin
from shared_codegen.ops.fence.definition import FenceAsyncSharedOp

__all__ = ["async_copy", "cluster", "fence_async_shared", "mbarrier", "mma_v2", "tma"]

try:  # wgmma is built in a sibling module; this package works without it.
    from gluon.language.nvidia.hopper._wgmma import (  # noqa: F401
        warpgroup_mma,
        warpgroup_mma_accumulator,
        warpgroup_mma_accumulator_type,
        warpgroup_mma_init,
        warpgroup_mma_wait,
    )
    __all__ += ["warpgroup_mma", "warpgroup_mma_wait", "warpgroup_mma_init",
                "warpgroup_mma_accumulator", "warpgroup_mma_accumulator_type"]
except ImportError:
    pass


@builtin
def fence_async_shared(cluster=False, _semantic=None):
    """Order this thread's earlier shared-memory accesses before its later asynchronous ones
    (TMA, wgmma) and vice versa (`fence.proxy.async`). With `cluster=True`, for the
    cluster's shared memory."""
    FenceAsyncSharedOp.build(_semantic.builder, bool(cluster))
