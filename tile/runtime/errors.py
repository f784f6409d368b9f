"""`triton.runtime.errors`' names: the runtime errors of the shared hierarchy
(shared_codegen/errors.py)."""

from shared_codegen.errors import (ArgumentError, DeadlockError, InterpreterError, KernelError,
                                   OutOfResources, RaceError)

__all__ = ["OutOfResources", "InterpreterError", "DeadlockError", "RaceError", "ArgumentError",
           "KernelError"]
