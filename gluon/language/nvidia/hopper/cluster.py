"""`gluon.language.nvidia.hopper.cluster`: the thread-block cluster of a kernel launched with
`num_ctas > 1` (Triton 3.7+'s module of this name; docs/clusters.md).

    rank = cluster.cta_rank()      # which CTA of the program's cluster, in [0, num_ctas)
    cluster.barrier()              # every thread of every CTA meets here
    cluster.arrive(); ...; cluster.wait()   # the same barrier, split to overlap work

Semantics, interpreter model and PTX: `shared_codegen/ops/cluster/definition.py`.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, unwrap, wrap
from shared_codegen.ir.types import int32
from shared_codegen.ops.cluster.definition import (ClusterArriveOp, ClusterCTARankOp,
                                                   ClusterWaitOp)

__all__ = ["arrive", "wait", "barrier", "cta_rank"]


def _relaxed(value, name: str) -> bool:
    value = unwrap(value)
    if not isinstance(value, bool):
        raise TypeError(f"{name}: relaxed must be a compile-time bool, got {value!r}")
    return value


@builtin
def arrive(relaxed=False, _semantic=None):
    """Arrive at the cluster barrier (`barrier.cluster.arrive`; `relaxed=True`: without
    releasing this CTA's earlier memory accesses)."""
    ClusterArriveOp.build(_semantic.builder, _relaxed(relaxed, "cluster.arrive"))


@builtin
def wait(_semantic=None):
    """Wait until every CTA of the cluster has arrived (`barrier.cluster.wait`)."""
    ClusterWaitOp.build(_semantic.builder)


@builtin
def barrier(relaxed=False, _semantic=None):
    """`arrive(relaxed)` then `wait()`: every thread of the cluster meets here."""
    ClusterArriveOp.build(_semantic.builder, _relaxed(relaxed, "cluster.barrier"))
    ClusterWaitOp.build(_semantic.builder)


@builtin
def cta_rank(_semantic=None):
    """This CTA's rank in its cluster, in [0, num_ctas) (an int32; 0 with one CTA per
    program)."""
    return wrap(ClusterCTARankOp.build(_semantic.builder), int32)
