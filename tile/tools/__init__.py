"""`tile.tools` (`triton.tools` after `import tile as triton`): host-side helpers.
`tile.tools.tensor_descriptor.TensorDescriptor` is the host tensor descriptor kernels take."""

import importlib

__all__ = ["tensor_descriptor"]


def __getattr__(name):
    # `triton.tools.tensor_descriptor.TensorDescriptor` as an attribute chain works without
    # importing the submodule first, as it does in Triton.
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
