"""The shared IR: types, structure, builder, printer, verifier and op families."""

from . import ops  # noqa: F401  (registers op definitions)
from .builder import Builder
from .core import (Block, Function, Location, Module, OpDef, Operation, Region, Value,
                   VerificationError)
from .printer import print_function, print_module
from .verifier import verify_module

__all__ = ["Block", "Builder", "Function", "Location", "Module", "OpDef", "Operation", "Region",
           "Value", "VerificationError", "print_function", "print_module", "verify_module"]
