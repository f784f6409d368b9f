"""`gluon.language.nvidia.blackwell.tma`: Hopper's TMA copies plus Blackwell's row gathers,
with the names and parameters of `triton.experimental.gluon.language.nvidia.blackwell.tma`
3.6 (`async_gather`, `async_scatter`; sm_100a TMA `gather4` / `scatter4`).

    @gluon.jit
    def kernel(desc, idx_ptr, ...):                # desc: block [1, M]
        rows = gl.load(idx_ptr + gl.arange(0, N, layout))
        smem = gl.allocate_shared_memory(desc.dtype, [N, M], desc.layout)
        mbarrier.expect(bar, N * M * elem_bytes)
        tma.async_gather(desc, rows, y, bar, smem)  # smem[i, :] = global[rows[i], y:y+M]
        mbarrier.wait(bar, 0)

Semantics, checks and PTX: `shared_codegen/ops/tma/gather_scatter.py`.
"""

from __future__ import annotations

from gluon.language._smem import _checked
from gluon.language.nvidia.hopper._common import i32_arg, pred_arg, smem_arg
from gluon.language.nvidia.hopper.mbarrier import _barrier
from gluon.language.nvidia.hopper.tma import (_desc, async_copy_global_to_shared,  # noqa: F401
                                              async_copy_shared_to_global, async_load,
                                              async_store, make_tensor_descriptor, store_wait,
                                              tensor_descriptor, tensor_descriptor_type)
from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.layouts import BlockedLayout
from shared_codegen.ops.tma.gather_scatter import (AsyncTMAGatherOp, AsyncTMAScatterOp,
                                                   check_gather)

__all__ = ["async_gather", "async_scatter", "async_copy_global_to_shared",
           "async_copy_shared_to_global", "store_wait", "tensor_descriptor", "tensor_descriptor_type",
           "make_tensor_descriptor", "async_load", "async_store"]


def _gather_args(name, tensor_desc, x_offsets, y_offset, smem, what, semantic):
    """(descriptor, offsets replicated in every thread, y_offset) after the checks."""
    desc = _desc(tensor_desc, name)
    if not isinstance(x_offsets, tensor) or not x_offsets.is_block():
        raise TypeError(f"{name}: x_offsets must be a 1D int32 tensor, got {x_offsets!r}")
    try:
        check_gather(desc.type, x_offsets.type, smem.type, what)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    target = semantic.builder.module.attrs.get("target") or "interpreter"
    if target != "interpreter":
        from shared_codegen.lowering.backend import parse_target
        arch, suffix = parse_target(target)
        if arch < 100 or suffix not in ("a", "f"):
            raise ValueError(f"{name}: TMA gather4/scatter4 needs sm_100a (Blackwell), not "
                             f"{target}")
    # Thread 0 issues every message, so it needs every row offset: replicate them (a
    # layout whose lanes and warps all hold the whole tensor).
    n = x_offsets.shape[0]
    warps = semantic.num_warps
    replicated = BlockedLayout([n], [32], [warps], [0])
    rows = semantic.convert_layout(x_offsets, replicated)
    return desc, rows, i32_arg(y_offset, semantic, name, "y_offset")


@builtin
def async_gather(tensor_desc, x_offsets, y_offset, barrier, result, pred=True, _semantic=None):
    """Start copying global rows `x_offsets[i]`, columns `[y_offset, y_offset + M)`, into
    row i of `result` (an [N, M] shared buffer in the descriptor's layout; the descriptor's
    block is [1, M]); the bytes complete on `barrier`. Out-of-bounds elements read zero."""
    name = "tma.async_gather"
    smem = smem_arg(result, name, "result")
    bar = _barrier(barrier, name)
    desc, rows, y = _gather_args(name, tensor_desc, x_offsets, y_offset, smem, "result",
                                 _semantic)
    _checked(AsyncTMAGatherOp.build(_semantic.builder, desc.handle, rows.handle, y,
                                    bar.handle, smem.handle, pred_arg(pred, _semantic, name)))


@builtin
def async_scatter(tensor_desc, x_offsets, y_offset, src, _semantic=None):
    """Start copying row i of `src` to global row `x_offsets[i]`, columns
    `[y_offset, y_offset + M)` (clipped to the tensor); retire it with `store_wait`, like a
    TMA store."""
    name = "tma.async_scatter"
    smem = smem_arg(src, name, "src")
    desc, rows, y = _gather_args(name, tensor_desc, x_offsets, y_offset, smem, "src",
                                 _semantic)
    _checked(AsyncTMAScatterOp.build(_semantic.builder, desc.handle, rows.handle, y,
                                     smem.handle))
