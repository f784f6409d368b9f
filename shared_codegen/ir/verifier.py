"""Structural checks every pass must preserve, then each op's own verifier.

Structure: every op has a definition, every operand is defined before its use in the same
block or an enclosing one (SSA dominance for structured control flow), and ops with regions
end their blocks with the terminator they require.
"""

from __future__ import annotations

from typing import Set

from shared_codegen.ir.core import Block, Module, VerificationError


def verify_module(module: Module) -> None:
    for fn in module.functions.values():
        visible: Set[int] = {id(a) for a in fn.args}
        _verify_block(fn.body.block, visible)


def _verify_block(block: Block, visible: Set[int]) -> None:
    scope = set(visible)
    scope.update(id(a) for a in block.args)
    for op in block.ops:
        if op.opdef is None:
            raise VerificationError(f"unknown op {op.name!r}", op)
        for i, v in enumerate(op.operands):
            if id(v) not in scope:
                raise VerificationError(
                    f"operand #{i} ({v.name_hint or 'unnamed'}: {v.type}) is used before it is "
                    "defined or outside its scope", op)
        for region in op.regions:
            _verify_block(region.block, scope)
        op.opdef.verify(op)
        scope.update(id(r) for r in op.results)
