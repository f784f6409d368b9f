"""The tile DSL: Triton's programming model (`@tile.jit`, `tile.language as tl`).

The compiler picks layouts, shared-memory staging and pipelining; kernels run on the GPU or,
without one, in the CPU interpreter.
"""

import importlib

from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.errors import (ArgumentError, CompilationError, DeadlockError,
                                   DeviceCheckError, DeviceDeadlockError,
                                   DeviceOutOfBoundsError, InterpreterError, KernelError,
                                   OutOfResources, PerformanceWarning, RaceError)
from shared_codegen.runtime.allocation import set_allocator
from tile.autotune import Config, autotune, heuristics
from tile.jit import compile, jit

__all__ = ["jit", "compile", "autotune", "Config", "heuristics", "constexpr_function",
           "KernelError", "CompilationError", "ArgumentError", "OutOfResources",
           "InterpreterError", "DeadlockError", "RaceError", "DeviceCheckError",
           "DeviceOutOfBoundsError", "DeviceDeadlockError", "PerformanceWarning", "cdiv", "next_power_of_2",
           "set_allocator", "language", "testing", "runtime", "tools", "profiler"]

# Submodules reachable as attributes (`triton.testing.do_bench` after `import tile as
# triton`), imported on first use so `import tile` stays light.
_SUBMODULES = ("language", "testing", "runtime", "tools", "profiler")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cdiv(a: int, b: int) -> int:
    """Ceiling division on host ints (like triton.cdiv)."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n (like triton.next_power_of_2; 0 and 1 give themselves)."""
    if isinstance(n, bool) or not isinstance(n, int):
        n = getattr(n, "value", n)
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"next_power_of_2: n must be an int, got {type(n).__name__}")
    if n <= 1:
        return max(n, 0)
    return 1 << (n - 1).bit_length()
