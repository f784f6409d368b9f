"""Blackwell (sm_100a) builtins with the names of
`triton.experimental.gluon.language.nvidia.blackwell` 3.6: tensor memory
(`TensorMemoryLayout`, `TensorMemoryScalesLayout`, `allocate_tensor_memory`,
`tensor_memory_descriptor`, `get_tmem_reg_layout`), the tensor cores (`tcgen05_mma`,
`tcgen05_mma_scaled`, `tcgen05_commit`, `tcgen05_copy`), `tma` (Hopper's copies plus the
gather4 / scatter4 row gathers, `blackwell/tma.py`), and Hopper's `mbarrier`,
`fence_async_shared`, which Blackwell kernels use too.

The ops behind them are in `shared_codegen/ops/tensor_memory/` and `shared_codegen/ops/tcgen05/`.
`float2` holds the packed fp32x2 math (`Float2Tensor`, `pack`, `fma`, ...).
"""

from __future__ import annotations

from gluon.language.nvidia.ampere import async_copy, mma_v2
from gluon.language.nvidia.blackwell._tcgen05 import (tcgen05_commit, tcgen05_copy,
                                                      tcgen05_mma, tcgen05_mma_scaled)
from gluon.language.nvidia.blackwell._tmem import (allocate_tensor_memory, get_tmem_reg_layout,
                                                   tensor_memory_descriptor,
                                                   tensor_memory_descriptor_type)
from gluon.language.nvidia.blackwell import float2
from gluon.language.nvidia.blackwell import tma
from gluon.language.nvidia.hopper import cluster, fence_async_shared, mbarrier
from shared_codegen.layouts import SharedLinearLayout  # noqa: F401 (upstream's namespace)
from shared_codegen.layouts import TensorMemoryLayout, TensorMemoryScalesLayout

__all__ = ["TensorMemoryLayout", "TensorMemoryScalesLayout", "allocate_tensor_memory",
           "async_copy", "cluster", "fence_async_shared", "float2", "get_tmem_reg_layout",
           "mbarrier", "mma_v2", "tcgen05_commit", "tcgen05_copy", "tcgen05_mma",
           "tcgen05_mma_scaled", "tensor_memory_descriptor", "tensor_memory_descriptor_type",
           "tma"]

