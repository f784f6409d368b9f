"""`ttng.fence_async_shared {cluster}`: order this thread's earlier generic-proxy shared-memory
accesses (`local_store`, `mbarrier.init`) before its later async-proxy ones (a TMA store
reading the buffer, wgmma reading its operands), and vice versa (PTX ISA 9.7.13.4.18,
membar/fence: `fence.proxy.async`).

Typical use: `smem.store(x); fence_async_shared(); tma.async_copy_shared_to_global(...)`.
The interpreter has no proxies (every access is immediately visible), so the op does nothing
there. Lowering (`lowering.py`): `fence.proxy.async.shared::cta` in every thread (each thread
orders its own writes; the `bar.sync` that joins the threads before the single-thread TMA
issue comes from the shared-memory barrier analysis). With `cluster=True` the fence covers the
cluster's shared memory (`.shared::cluster`).
"""

from __future__ import annotations

from shared_codegen.ir.core import OpDef, format_attrs
from shared_codegen.layouts.relations import OWN_LAYOUTS

FENCE = "ttng.fence_async_shared"


class FenceAsyncSharedOp(OpDef):
    name = FENCE
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, cluster: bool = False):
        return b.create(FENCE, [], [], {"cluster": bool(cluster)})

    def print_attrs(self, op):
        return format_attrs({"cluster": True}) if op.attrs.get("cluster") else ""

    def interpret(self, op, frame):
        return []


__all__ = ["FenceAsyncSharedOp", "FENCE"]
