"""Compile and argument errors of the frontend: the shared hierarchy's classes
(shared_codegen/errors.py), re-exported here where the frontend always imported them from."""

from __future__ import annotations

from shared_codegen.errors import ArgumentError, CompilationError

__all__ = ["ArgumentError", "CompilationError"]
