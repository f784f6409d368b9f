"""Op families, one folder each: `definition.py` (builder, type rule, traits, verifier, printer,
interpreter rule) and `lowering.py` (lowering rules, registered with
`shared_codegen.ir.core.lowering_rule`). Importing this package registers every op.

Adding a family: a new folder here, its name in `FAMILIES`, and its tests (docs/extending.md).
"""

import importlib

FAMILIES = ("arith", "async_copy", "cluster", "control", "distributed", "dot", "extern",
            "fence", "griddepcontrol", "inline_asm", "map_elementwise", "math", "mbarrier",
            "memory", "movement", "profile", "program", "reduction", "shared_memory", "tcgen05",
            "tensor", "tensor_memory", "tma", "warp_specialize", "wgmma")

# Importing a family registers its op definitions and lowering rules.
for _family in FAMILIES:
    importlib.import_module(f"{__name__}.{_family}")
