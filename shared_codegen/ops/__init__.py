"""Op families, one folder each: `definition.py` (builder, type rule, traits, verifier, printer,
interpreter rule) and `lowering.py` (lowering rules, registered with
`shared_codegen.ir.core.lowering_rule`). Importing this package registers every op.

Adding a family: a new folder here, its name in `FAMILIES`, and its tests (docs/extending.md).
"""

from shared_codegen.ops import (  # noqa: F401
                                arith,
                                async_copy,
                                control,
                                dot,
                                fence,
                                math,
                                mbarrier,
                                memory,
                                program,
                                reduction,
                                shared_memory,
                                tensor,
                                tma,
                                warp_specialize,
                                wgmma,
)

FAMILIES = ("arith", "async_copy", "control", "dot", "fence", "math", "mbarrier", "memory",
            "program", "reduction", "shared_memory", "tensor", "tma", "warp_specialize", "wgmma")
