"""NVIDIA-specific Gluon builtins, one submodule per architecture generation, with the names
of `triton.experimental.gluon.language.nvidia` 3.6: `ampere` (mma_v2, cp.async), and
`hopper` / `blackwell` where they exist. Submodules load on first use."""

import importlib

from gluon.language.nvidia import ampere

__all__ = ["ampere", "hopper", "blackwell"]


def __getattr__(name):
    if name in ("hopper", "blackwell"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
