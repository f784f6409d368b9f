"""Gluon-like explicit-layout language.

`@gluon.jit` kernels use `from gluon import language as gl`; every tensor carries a layout
(`gluon.layouts`). `gluon.language` is imported on first use so that `import gluon.layouts`
(the layout tools and their CLI) does not load the languages.
"""

from gluon.jit import compile, jit
from shared_codegen.frontend.codegen import constexpr_function

__all__ = ["jit", "compile", "constexpr_function", "language"]


def __getattr__(name):
    if name == "language":
        import importlib

        return importlib.import_module(".language", __name__)
    raise AttributeError(f"module 'gluon' has no attribute {name!r}")
