"""Op families. Importing this package registers every op definition."""

from . import arith, control, math, memory, program, reduction, tensor  # noqa: F401
