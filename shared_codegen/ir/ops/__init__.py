"""Op families. Importing this package registers every op definition."""

from shared_codegen.ir.ops import (arith, async_copy, control, dot, math, memory, program, reduction,  # noqa: F401
               shared_memory, tensor, warp_specialize, wgmma)
