"""The tile DSL: Triton's programming model (`@tile.jit`, `tile.language as tl`).

The compiler picks layouts, shared-memory staging and pipelining; kernels run on the GPU or,
without one, in the CPU interpreter.
"""

from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.errors import (ArgumentError, CompilationError, DeadlockError,
                                   DeviceCheckError, DeviceDeadlockError,
                                   DeviceOutOfBoundsError, InterpreterError, KernelError,
                                   OutOfResources, RaceError)
from tile.autotune import Config, autotune, heuristics
from tile.jit import compile, jit

__all__ = ["jit", "compile", "autotune", "Config", "heuristics", "constexpr_function",
           "KernelError", "CompilationError", "ArgumentError", "OutOfResources",
           "InterpreterError", "DeadlockError", "RaceError", "DeviceCheckError",
           "DeviceOutOfBoundsError", "DeviceDeadlockError", "cdiv"]


def cdiv(a: int, b: int) -> int:
    """Ceiling division on host ints (like triton.cdiv)."""
    return -(-a // b)
