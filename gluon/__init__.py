"""Gluon-like explicit-layout language.

`@gluon.jit` kernels use `from gluon import language as gl`; every tensor carries a layout
(`gluon.layouts`). `gluon.language` is imported on first use so that `import gluon.layouts`
(the layout tools and their CLI) does not load the languages.
"""

from gluon.jit import compile, jit
from shared_codegen.frontend.aggregates import aggregate
from shared_codegen.frontend.codegen import constexpr_function
# The exceptions kernel authors catch, the same classes as `tile.*`'s (shared_codegen/errors.py).
from shared_codegen.errors import (ArgumentError, CompilationError, DeadlockError,
                                   DeviceCheckError, DeviceDeadlockError,
                                   DeviceOutOfBoundsError, InterpreterError, KernelError,
                                   OutOfResources, PerformanceWarning, RaceError)

__all__ = ["jit", "compile", "constexpr_function", "must_use_result", "aggregate", "language",
           "KernelError", "CompilationError", "ArgumentError", "OutOfResources",
           "InterpreterError", "DeadlockError", "RaceError", "DeviceCheckError",
           "DeviceOutOfBoundsError", "DeviceDeadlockError", "PerformanceWarning"]


def must_use_result(fn, message=True):
    """Triton's marker for functions whose result must be used (`@gluon.must_use_result` or
    `@gluon.must_use_result("why")`). A kernel statement that drops the result of a marked
    function is a compile error (`shared_codegen/frontend/unused_results.py`)."""
    if isinstance(fn, str):
        return lambda f: must_use_result(f, fn)
    fn._must_use_result = message
    return fn


def __getattr__(name):
    if name in ("language", "nvidia"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'gluon' has no attribute {name!r}")
