"""Spellings that Triton 3.7 / 3.8 Gluon introduced for builtins we already have, so kernels
written against a newer Gluon port too: `tma.async_load` / `tma.async_store` (3.6's
`async_copy_global_to_shared` / `async_copy_shared_to_global`), `mbarrier.allocate_mbarrier`
and `gl.barrier`. Each forwards to the 3.6 builtin; cache hints, which we do not have, are
accepted only at their defaults, and say so otherwise. Thread-block clusters (`multicast`,
`gl.barrier(cluster=True)`) need `num_ctas > 1` (docs/clusters.md).
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, unwrap

__all__ = ["async_load", "async_store", "allocate_mbarrier", "barrier"]


_WHY = {"cache_policy": "cache policies", "two_ctas": "two-CTA (cta_group::2) barriers"}


def _only_default(name: str, option: str, value, default) -> None:
    if unwrap(value) != default:
        raise ValueError(f"{name}: {option}={unwrap(value)!r} is not supported (no "
                         f"{_WHY[option]} here); leave it at {default!r}")


@builtin
def async_load(tensor_desc, coord, barrier, result, pred=True, multicast=False,
               cache_policy=None, _semantic=None):
    """Triton 3.7's name for `tma.async_copy_global_to_shared`, with `multicast`: in a
    kernel with `num_ctas > 1`, every CTA of the cluster loads a slice of the block into
    every CTA's `result` (docs/clusters.md)."""
    from gluon.language.nvidia.hopper.tma import load

    _only_default("tma.async_load", "cache_policy", cache_policy, None)
    load(tensor_desc, coord, barrier, result, pred, multicast, _semantic, "tma.async_load")


@builtin
def async_store(tensor_desc, coord, src, cache_policy=None, _semantic=None):
    """Triton 3.7's name for `tma.async_copy_shared_to_global`."""
    from gluon.language.nvidia.hopper.tma import async_copy_shared_to_global

    _only_default("tma.async_store", "cache_policy", cache_policy, None)
    return async_copy_shared_to_global(tensor_desc, coord, src, _semantic=_semantic)


@builtin
def allocate_mbarrier(batch=None, two_ctas=False, _semantic=None):
    """One mbarrier word (`[1]`), or `batch` of them (`[batch, 1]`, index with `.index(i)`),
    in `MBarrierLayout()` shared memory (Triton 3.8). `two_ctas` needs clusters."""
    from gluon.language._smem import allocate_shared_memory
    from shared_codegen.ir.types import int64
    from shared_codegen.ops.mbarrier.definition import MBarrierLayout

    _only_default("mbarrier.allocate_mbarrier", "two_ctas", two_ctas, False)
    batch = unwrap(batch)
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)):
        raise TypeError(f"mbarrier.allocate_mbarrier: batch must be a compile-time int or "
                        f"None, got {batch!r}")
    shape = [1] if batch is None else [batch, 1]
    return allocate_shared_memory(int64, shape, MBarrierLayout(), _semantic=_semantic)


@builtin
def barrier(*, cluster=False, _semantic=None):
    """Triton 3.8's `gl.barrier`: synchronize the CTA's threads, or with `cluster=True` every
    thread of the cluster (`barrier.cluster.arrive` + `wait`) when the kernel has
    `num_ctas > 1`; with one CTA per program both are the CTA barrier."""
    from gluon.language._core import cluster_size
    from shared_codegen.ops.cluster.definition import ClusterArriveOp, ClusterWaitOp

    cluster = unwrap(cluster)
    if not isinstance(cluster, bool):
        raise TypeError(f"gl.barrier: cluster must be a compile-time bool, got {cluster!r}")
    if not cluster or cluster_size(_semantic) == 1:
        _semantic.thread_barrier()
        return
    ClusterArriveOp.build(_semantic.builder)
    ClusterWaitOp.build(_semantic.builder)
