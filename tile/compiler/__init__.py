"""Triton's `triton.compiler` paths that kernels and tests import from (`errors`)."""
