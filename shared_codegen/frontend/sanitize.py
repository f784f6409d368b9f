"""What the interpreter checks of a kernel before it runs it (the sanitizer's static part).

`needs_concurrent_programs`: whether the programs of the grid wait on each other (a `while`
loop that reaches an atomic or a volatile load), so that they must run interleaved
(`shared_codegen/interpreter/grid.py`).

`check_arguments`: arguments a kernel must not write, refused before the interpreter runs it.

Which arguments a kernel writes is read off the IR: every op whose `memory_effects` trait
writes global memory writes through its pointer or descriptor operands, and those operands
are traced back (through address arithmetic, splats, selects and loop-carried values) to the
kernel parameters they derive from. Then, before the first program runs:

- a written argument that is a read-only numpy array (`writeable=False`, e.g. a view of a
  broadcast or of bytes) is refused: the GPU would have written memory the caller declared
  constant, and the interpreter would raise halfway through instead;
- a written argument whose elements share memory (a stride-0 dim, as from `np.broadcast_to`
  or `expand`) is refused: programs would race on the shared elements;
- a written argument that overlaps another argument in part is refused. Passing the *same*
  array twice (same address, shape and strides: `add(x, y, out=x)`) stays allowed, as torch
  allows `out=` aliasing an input exactly (`at::assert_no_partial_overlap`), and so does any
  aliasing of arguments the kernel only reads.

Triton itself checks none of this on the GPU; the interpreter, being the sanitizer, does.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Set

import numpy as np

from shared_codegen.errors import ArgumentError
from shared_codegen.ir.core import MemoryEffect, Operation, Value
from shared_codegen.ir.types import PointerType, TensorDescriptorType, TensorType


def _is_address(ty) -> bool:
    if isinstance(ty, TensorType):
        ty = ty.element
    return isinstance(ty, (PointerType, TensorDescriptorType))


def _region_arg_sources(value: Value) -> List[Value]:
    """The values a region's block argument takes: loop inits and yields, captures."""
    from shared_codegen.ops.control.definition import ForOp, WhileOp
    from shared_codegen.ops.warp_specialize.definition import WarpSpecializeOp, worker_operands

    block = value.owner
    op = block.parent.parent if block.parent is not None else None
    if not isinstance(op, Operation):
        return []
    k = value.index
    if isinstance(op.opdef, ForOp):
        if k == 0:
            return []  # the induction variable
        return [op.operands[3 + k - 1], op.regions[0].block.terminator.operands[k - 1]]
    if isinstance(op.opdef, WhileOp):
        before, after = op.regions[0].block, op.regions[1].block
        if block is before:
            return [op.operands[k], after.terminator.operands[k]]
        return [before.terminator.operands[k + 1]]
    if isinstance(op.opdef, WarpSpecializeOp):
        region_index = next(i for i, r in enumerate(op.regions) if r.block is block)
        if region_index == 0:
            return []
        return [worker_operands(op)[region_index - 1][k]]
    return list(op.operands)  # unknown region op: any of its operands, conservatively


def _result_sources(value: Value) -> List[Value]:
    """The values an op's result derives from: its operands, or for region ops (scf.for,
    scf.if, scf.while) what its regions hand back in that position."""
    from shared_codegen.ops.control.definition import ForOp, IfOp, WhileOp

    op = value.owner
    k = value.index
    if isinstance(op.opdef, ForOp):
        return [op.operands[3 + k], op.regions[0].block.terminator.operands[k]]
    if isinstance(op.opdef, IfOp):
        return [r.block.terminator.operands[k] for r in op.regions if r.block.ops]
    if isinstance(op.opdef, WhileOp):
        return [op.regions[0].block.terminator.operands[k + 1]]
    # An op may say which operands its address derives from (distributed.symm_at: the
    # pointer, not the table of heap bases it reads).
    derived = getattr(op.opdef, "address_operands", None)
    sources = list(op.operands) if derived is None else [op.operands[i] for i in derived]
    for region in op.regions:
        term = region.block.terminator
        if term is not None and term.opdef is not None and term.opdef.terminator:
            sources.extend(term.operands)
    return sources


def written_arguments(fn) -> Set[int]:
    """Indices of `fn`'s arguments that some op writes global memory through."""
    params = {id(a): i for i, a in enumerate(fn.args)}
    written: Set[int] = set()
    seen: Set[int] = set()
    work: List[Value] = []
    for op in fn.walk():
        effects = op.opdef.memory_effects if op.opdef is not None else frozenset()
        if MemoryEffect.WRITE_GLOBAL in effects:
            work.extend(v for v in op.operands if _is_address(v.type))
    while work:
        v = work.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in params:
            written.add(params[id(v)])
            continue
        sources = _result_sources(v) if isinstance(v.owner, Operation) else \
            _region_arg_sources(v)
        work.extend(s for s in sources if _is_address(s.type))
    return written


def needs_concurrent_programs(fn) -> bool:
    """Whether a kernel spins on other programs: a `while` loop reaching a sync point, or an
    op that spins by itself (`sync_point` trait: a signal wait)."""
    from shared_codegen.interpreter.grid import is_sync_point
    from shared_codegen.ops.control.definition import WhileOp

    for op in fn.walk():
        if getattr(op.opdef, "sync_point", False) and not op.regions:
            return True
        if isinstance(op.opdef, WhileOp):
            if any(is_sync_point(inner) for region in op.regions
                   for inner_op in region.block.ops for inner in inner_op.walk()):
                return True
    return False


def _module_written(module) -> Set[int]:
    cached = getattr(module, "written_arguments", None)
    if cached is None:
        cached = written_arguments(module.kernel)
        module.written_arguments = cached
    return cached


def _internal_overlap(arr: np.ndarray) -> Optional[int]:
    """A dim along which distinct indices name the same element (stride 0), else None."""
    for d, (n, s) in enumerate(zip(arr.shape, arr.strides)):
        if n > 1 and s == 0:
            return d
    return None


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=1_000_000))
    except Exception:  # numpy's TooHardError: the exact answer costs too much
        return True  # cannot tell cheaply: the bounds overlap, so refuse as torch would


def check_arguments(module, kernel_name: str, arrays: Sequence[Optional[np.ndarray]],
                    names: Sequence[str]) -> None:
    """ArgumentError naming the argument if the kernel writes one it must not (module doc).
    `arrays[i]` is the host array behind the kernel's i-th parameter (None for scalars)."""
    written = _module_written(module)
    for i in sorted(written):
        arr = arrays[i] if i < len(arrays) else None
        if arr is None:
            continue
        name = names[i]
        if not arr.flags.writeable:
            raise ArgumentError(f"argument `{name}` of {kernel_name} is a read-only array "
                                f"(writeable=False) but the kernel writes it; pass a writable "
                                f"copy (`{name}.copy()`)")
        dim = _internal_overlap(arr)
        if dim is not None:
            raise ArgumentError(f"argument `{name}` of {kernel_name} has stride 0 in dim {dim} "
                                f"(its shape {list(arr.shape)} repeats one element), but the "
                                f"kernel writes it; programs would race on the shared "
                                f"elements; pass a contiguous copy")
        for j, other in enumerate(arrays):
            if j == i or other is None or _same_view(arr, other):
                continue
            if _overlap(arr, other):
                raise ArgumentError(f"arguments `{name}` and `{names[j]}` of {kernel_name} "
                                    f"overlap in memory and the kernel writes `{name}`; pass "
                                    f"the same array for both, or arrays that do not overlap")


__all__ = ["written_arguments", "check_arguments", "needs_concurrent_programs"]
