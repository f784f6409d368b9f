"""Host-side NVIDIA helpers with the paths of `triton.experimental.gluon.nvidia` 3.6:
`gluon.nvidia.hopper.TensorDescriptor`."""

import importlib

__all__ = ["hopper", "blackwell"]


def __getattr__(name):
    if name in ("hopper", "blackwell"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
