"""The codegen core both kernel languages enter: IR, frontend, lowering, runtime, interpreter."""

__version__ = "0.1.0"
