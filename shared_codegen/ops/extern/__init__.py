"""Elementwise calls of external device functions (NVIDIA's libdevice `__nv_*`)."""

from shared_codegen.ops.extern import definition, lowering  # noqa: F401
