"""Host side of Blackwell Gluon kernels (Triton 3.6's
`triton.experimental.gluon.nvidia.blackwell`): the TMA `TensorDescriptor`, the same as
Hopper's."""

from gluon.nvidia.hopper import TensorDescriptor

__all__ = ["TensorDescriptor"]
