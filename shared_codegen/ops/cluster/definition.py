"""Cluster ops (sm_90): which CTA of its cluster a CTA is, and the cluster-wide barrier.

    %r = ttng.cluster_cta_rank : i32
    ttng.cluster_arrive {relaxed = false}
    ttng.cluster_wait

A kernel launched with `num_ctas=N` runs each program as a cluster of N CTAs (docs/clusters.md).
`cluster_cta_rank` is the CTA's rank in [0, N) (`%cluster_ctarank`; 0 when `num_ctas` is 1).
`cluster_arrive` / `cluster_wait` are `barrier.cluster.arrive` / `barrier.cluster.wait` (PTX
ISA 9.7.13.2): every thread of every CTA arrives, then waits until all of them have arrived.
A plain arrive releases the CTA's earlier memory accesses and the wait acquires the others',
so shared-memory writes (an `mbarrier.init` a peer will signal, a buffer a peer will
overwrite) are ordered across the cluster; `relaxed` arrivals order nothing.

Interpreter: the CTAs of a cluster are co-scheduled (interpreter/cluster.py). An arrive counts
the CTA in; a wait hands the baton on until every CTA has arrived as often as this one, and a
barrier some CTA never reaches (it returned, or waits elsewhere) is a deadlock report. With
`num_ctas` 1 the cluster is the CTA itself and both ops do nothing.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, format_attrs
from shared_codegen.ir.types import int32
from shared_codegen.layouts.relations import OWN_LAYOUTS

CTA_RANK, ARRIVE, WAIT = "ttng.cluster_cta_rank", "ttng.cluster_arrive", "ttng.cluster_wait"


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


class ClusterCTARankOp(OpDef):
    """`ttng.cluster_cta_rank`: the CTA's rank in its cluster (i32)."""

    name = CTA_RANK
    layout_rule = OWN_LAYOUTS
    user_name = "cluster.cta_rank"
    pure = True
    cheap = True

    @staticmethod
    def build(b):
        return b.create(CTA_RANK, [], [int32]).result

    def interpret(self, op, frame):
        return [np.int32(frame.cta_rank)]


class ClusterArriveOp(OpDef):
    """`ttng.cluster_arrive {relaxed}`: this CTA reaches the cluster barrier."""

    name = ARRIVE
    layout_rule = OWN_LAYOUTS
    user_name = "cluster.arrive"

    @staticmethod
    def build(b, relaxed: bool = False):
        return b.create(ARRIVE, [], [], {"relaxed": bool(relaxed)})

    def print_attrs(self, op):
        return format_attrs({"relaxed": True}) if op.attrs.get("relaxed") else ""

    def interpret(self, op, frame):
        cluster = frame.cluster
        if cluster is None:
            return []
        rank = frame.cta_rank
        if cluster.arrived[rank] > cluster.waited[rank]:
            frame.error(op, "cluster.arrive twice without a cluster.wait in between (each "
                            "thread arrives once per phase of the cluster barrier, then "
                            "waits)")
        cluster.arrived[rank] += 1
        return []


class ClusterWaitOp(OpDef):
    """`ttng.cluster_wait`: block until every CTA of the cluster has arrived."""

    name = WAIT
    layout_rule = OWN_LAYOUTS
    user_name = "cluster.wait"

    @staticmethod
    def build(b):
        return b.create(WAIT, [], [])

    def interpret(self, op, frame):
        cluster = frame.cluster
        if cluster is None:
            return []
        rank = frame.cta_rank
        target = cluster.arrived[rank]
        if target <= cluster.waited[rank]:
            frame.error(op, "cluster.wait without a cluster.arrive before it (use "
                            "cluster.barrier(), or arrive first)")

        def everyone_arrived() -> bool:
            return all(n >= target for n in cluster.arrived)

        def waiting() -> str:
            missing = [f"{r}" + (" (returned)" if cluster.has_returned(r) else "")
                       for r, n in enumerate(cluster.arrived) if n < target]
            text = (f"waits at {_where(op)} on the cluster barrier (its arrival {target}) for "
                    f"CTA{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
            if op.loc.source_line:
                text += f"\n      {op.loc.source_line.strip()}"
            return text

        if not everyone_arrived():
            cluster.block(frame, everyone_arrived, waiting)
        cluster.waited[rank] = target
        return []


__all__ = ["ClusterCTARankOp", "ClusterArriveOp", "ClusterWaitOp", "CTA_RANK", "ARRIVE", "WAIT"]
