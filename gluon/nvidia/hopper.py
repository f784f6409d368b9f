"""`gluon.nvidia.hopper` (Triton 3.6's `triton.experimental.gluon.nvidia.hopper`):
`TensorDescriptor`, the host-side TMA descriptor Gluon kernels take. The class is shared with
the tile DSL and lives in `shared_codegen/runtime/tensor_descriptor.py`."""

from shared_codegen.layouts import NVMMASharedLayout  # noqa: F401 (upstream's namespace)
from shared_codegen.runtime.tensor_descriptor import TensorDescriptor

__all__ = ["TensorDescriptor"]
