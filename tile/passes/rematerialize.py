"""Clone cheap index computations once per use, before layouts are assigned.

A range or an offset tensor used in two places may be wanted in two layouts (`offs_k[None, :]`
indexes A's tile, `offs_k[:, None]` B's). Recomputing it is a few integer instructions, far
cheaper than a layout conversion through shared memory, so each use gets its own copy and
layout assignment is free to lay each copy out like its consumer. Triton reaches the same end by
rematerializing backward slices in RemoveLayoutConversions. Copies that end up identical (same
operands, attributes and layout) are merged again by the `cse` pass.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from shared_codegen.ir.core import Function, Operation, Value
from shared_codegen.ir.types import TensorType

# Bounds the copies for pathological DAGs (each reuse doubles what is below it).
MAX_CLONES = 4096


def is_cheap(op: Operation) -> bool:
    """Index arithmetic (the op's `cheap` trait): cheap to recompute, never worth a
    conversion."""
    return op.opdef is not None and op.opdef.is_cheap(op)


def _is_cheap(op: Operation) -> bool:
    return (is_cheap(op) and not op.regions and len(op.results) == 1
            and isinstance(op.result.type, TensorType))


def _uses(fn: Function) -> Dict[Value, List[Tuple[Operation, int]]]:
    uses: Dict[Value, List[Tuple[Operation, int]]] = {}
    for op in fn.walk():
        for i, v in enumerate(op.operands):
            uses.setdefault(v, []).append((op, i))
    return uses


def _clone_after(op: Operation) -> Operation:
    copy = Operation(op.name, list(op.operands), [r.type for r in op.results], dict(op.attrs),
                     loc=op.loc)
    for src, dst in zip(op.results, copy.results):
        dst.name_hint = src.name_hint
    block = op.parent
    block.ops.insert(block.ops.index(op) + 1, copy)
    copy.parent = block
    return copy


def rematerialize_cheap_values(fn: Function) -> int:
    """Give every use of a cheap tensor value its own producer. Returns the number of copies.

    Consumers are visited before producers (reverse program order), so the copies made for a
    consumer count as uses of its operands when those are visited in turn."""
    uses = _uses(fn)
    clones = 0
    for op in reversed(list(fn.walk())):
        if not _is_cheap(op):
            continue
        users = uses.get(op.result, [])
        for user, index in users[1:]:
            if clones >= MAX_CLONES:
                return clones
            copy = _clone_after(op)
            clones += 1
            user.operands[index] = copy.result
            for j, v in enumerate(copy.operands):
                uses.setdefault(v, []).append((copy, j))
        uses[op.result] = users[:1]
    return clones
