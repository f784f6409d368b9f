"""`triton.compiler.errors`' names: the compile errors of the shared hierarchy
(shared_codegen/errors.py)."""

from shared_codegen.errors import CompilationError, KernelError

__all__ = ["CompilationError", "KernelError"]
