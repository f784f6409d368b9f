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

from shared_codegen.ir.core import OpDef, Operation, VerificationError, format_attrs
from shared_codegen.ir.types import int32
from shared_codegen.layouts.relations import OWN_LAYOUTS

CTA_RANK, ARRIVE, WAIT = "ttng.cluster_cta_rank", "ttng.cluster_arrive", "ttng.cluster_wait"


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


def check_placement(op) -> None:
    """A cluster barrier waits for every (non-exited) thread of the cluster. In a kernel with
    `gl.warp_specialize`, the worker warps run only their partitions: they repeat the
    kernel's top-level cluster barriers before the first hand-off (ops/warp_specialize/
    lowering.py) and have exited after a single call's join. Anything else would hang on the
    GPU, so it is refused here (the interpreter, which runs a CTA as one agent, would not
    notice)."""
    from shared_codegen.ops.warp_specialize.definition import WarpSpecializeOp

    name = op.opdef.user_name
    enclosing, block = [], op.parent
    while block is not None and isinstance(getattr(block.parent, "parent", None), Operation):
        enclosing.append(block.parent.parent)
        block = block.parent.parent.parent
    if block is None:
        return
    if any(isinstance(o.opdef, WarpSpecializeOp) for o in enclosing):
        raise VerificationError(
            f"{name} inside a gl.warp_specialize partition is not supported: the cluster "
            f"barrier waits for every thread of the cluster, the other partitions' warps "
            f"included; order partitions across CTAs with mbarrier arrivals "
            f"(mbarrier.arrive(..., from_cta=, multicast_cta=))", op)
    splits = [i for i, o in enumerate(block.ops) if isinstance(o.opdef, WarpSpecializeOp)]
    if not splits:
        return
    statement = block.ops.index(enclosing[-1] if enclosing else op)
    if statement < splits[0] and enclosing:
        raise VerificationError(
            f"{name} before gl.warp_specialize must be at the kernel's top level, not inside "
            f"a loop or branch: the worker warps repeat the top-level cluster barriers before "
            f"the hand-off", op)
    if statement > splits[0] and len(splits) > 1:
        raise VerificationError(
            f"{name} after gl.warp_specialize in a kernel with several gl.warp_specialize "
            f"calls is not supported: the worker warps wait for the next call and never reach "
            f"the cluster barrier", op)


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
    needs_all_warps = True

    @staticmethod
    def build(b, relaxed: bool = False):
        return b.create(ARRIVE, [], [], {"relaxed": bool(relaxed)})

    def print_attrs(self, op):
        return format_attrs({"relaxed": True}) if op.attrs.get("relaxed") else ""

    def verify(self, op):
        check_placement(op)

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
    needs_all_warps = True

    @staticmethod
    def build(b):
        return b.create(WAIT, [], [])

    def verify(self, op):
        check_placement(op)

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
