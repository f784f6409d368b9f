"""`gluon.language.nvidia.blackwell` (Triton 3.6's names), so kernels that import it for
their Blackwell path still import and run their Hopper path here.

What works: the tensor-memory layouts (`TensorMemoryLayout`, `TensorMemoryScalesLayout`,
`get_tmem_reg_layout`, as in `gluon.layouts`) and the re-exports shared with Hopper
(`async_copy`, `fence_async_shared`, `mbarrier`, `mma_v2`, `tma`). What does not yet: tensor
memory and tcgen05 (`allocate_tensor_memory`, `tcgen05_mma`, `tcgen05_mma_scaled`,
`tcgen05_commit`, `tcgen05_copy`): a kernel that calls one stops with a compile error that
says so, naming the call.
"""

from __future__ import annotations

from gluon.language.nvidia.ampere import mma_v2
from gluon.language.nvidia.hopper import async_copy, fence_async_shared, mbarrier, tma
from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.frontend.values import builtin
from shared_codegen.layouts import TensorMemoryLayout, TensorMemoryScalesLayout
from shared_codegen.layouts import get_tmem_reg_layout as _get_tmem_reg_layout

__all__ = ["TensorMemoryLayout", "TensorMemoryScalesLayout", "allocate_tensor_memory",
           "async_copy", "fence_async_shared", "get_tmem_reg_layout", "mbarrier", "mma_v2",
           "tcgen05_commit", "tcgen05_copy", "tcgen05_mma", "tcgen05_mma_scaled",
           "tensor_memory_descriptor", "tensor_memory_descriptor_type", "tma"]


@constexpr_function
def get_tmem_reg_layout(element_ty, shape, layout, num_warps, instr_variant="32x32b",
                        cga_layout=()):
    """The register layout tcgen05.ld/st use for a tensor-memory tile (a compile-time value)."""
    return _get_tmem_reg_layout(element_ty, shape, layout, num_warps, instr_variant,
                                cga_layout)


class tensor_memory_descriptor:
    """Tensor memory has no values here yet; the name exists for annotations."""


class tensor_memory_descriptor_type:
    """See `tensor_memory_descriptor`."""


def _not_yet(name):
    def fn(*args, _semantic=None, **kwargs):
        raise NotImplementedError(f"{name}: Blackwell tensor memory and tcgen05 are not "
                                  f"supported yet (sm_100a); use the Hopper path "
                                  f"(warpgroup_mma) on sm_90a")

    fn.__name__ = fn.__qualname__ = name
    return builtin(fn)


allocate_tensor_memory = _not_yet("allocate_tensor_memory")
tcgen05_mma = _not_yet("tcgen05_mma")
tcgen05_mma_scaled = _not_yet("tcgen05_mma_scaled")
tcgen05_commit = _not_yet("tcgen05_commit")
tcgen05_copy = _not_yet("tcgen05_copy")
