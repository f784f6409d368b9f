"""Floating-point math: exp, log, sin, sqrt, erf, fma, ... (approximate PTX instructions or
polynomials).

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.math import definition, lowering  # noqa: F401
