"""`gluon.nvidia.blackwell.TensorDescriptor` (Triton 3.6's path): the same host descriptor as
`gluon.nvidia.hopper`'s, since TMA descriptors do not differ between the two."""

from gluon.nvidia.hopper import TensorDescriptor

__all__ = ["TensorDescriptor"]
