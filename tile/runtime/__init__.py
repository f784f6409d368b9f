"""Triton's `triton.runtime` paths that kernels and tests import from (`errors`)."""
