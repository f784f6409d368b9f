"""The shared IR: types, structure, builder, printer, verifier and the pass manager. The op
families that give op names their meaning are in `shared_codegen.ops`."""

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import (Block, Function, Location, Module, OpDef, Operation, Region,
                                    Value, VerificationError)
from shared_codegen.ir.printer import print_function, print_module
from shared_codegen.ir.verifier import verify_module

__all__ = ["Block", "Builder", "Function", "Location", "Module", "OpDef", "Operation", "Region",
           "Value", "VerificationError", "print_function", "print_module", "verify_module"]
