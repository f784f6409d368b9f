"""Argument checks shared by the layout dataclasses: they raise ``ValueError`` naming the
class, the parameter and the broken constraint, in the user's terms."""

from __future__ import annotations

import operator
from collections.abc import Sequence


def int_tuple(owner: str, name: str, value) -> tuple[int, ...]:
    try:
        items = tuple(value)
    except TypeError:
        raise ValueError(f"{owner}: {name} must be a list of ints, got {value!r}") from None
    ints = []
    for item in items:
        # Anything with __index__ is an int here (a constexpr-wrapped int inside a list, a
        # numpy integer), as Triton's bindings take it; bools and floats are not.
        try:
            ints.append(None if isinstance(item, bool) else operator.index(item))
        except TypeError:
            ints.append(None)
        if ints[-1] is None or isinstance(getattr(item, "value", None), bool):
            raise ValueError(f"{owner}: {name} must be a list of ints, got {list(items)}")
    return tuple(ints)


def bases_tuple(owner: str, name: str, value, rank: int | None) -> tuple[tuple[int, ...], ...]:
    bases = tuple(int_tuple(owner, name, basis) for basis in (value or ()))
    for basis in bases:
        if rank is not None and len(basis) != rank:
            raise ValueError(f"{owner}: every basis in {name} must have {rank} entries (the "
                             f"rank), got {list(basis)}")
        if any(component < 0 for component in basis):
            raise ValueError(f"{owner}: {name} entries must be non-negative, got {list(basis)}")
    return bases


def powers_of_two(owner: str, name: str, values: Sequence[int]):
    for value in values:
        if value <= 0 or value & (value - 1):
            raise ValueError(f"{owner}: {name} entries must be powers of two, got "
                             f"{list(values)}")


def power_of_two(owner: str, name: str, value: int, allow_zero: bool = False):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{owner}: {name} must be an int, got {value!r}")
    if allow_zero and value == 0:
        return
    if value <= 0 or value & (value - 1):
        raise ValueError(f"{owner}: {name} must be a power of two, got {value}")


def same_rank(owner: str, reference: str, rank: int, **named):
    for name, values in named.items():
        if len(values) != rank:
            raise ValueError(f"{owner}: {name} has {len(values)} entries but {reference} has "
                             f"{rank}; all must have one entry per tensor dim")


def permutation(owner: str, name: str, order: Sequence[int], rank: int):
    if sorted(order) != list(range(rank)):
        raise ValueError(f"{owner}: {name} must be a permutation of 0..{rank - 1}, got "
                         f"{list(order)}")


def cga_bases(owner: str, cga_layout, rank: int) -> tuple[tuple[int, ...], ...]:
    bases = bases_tuple(owner, "cga_layout", cga_layout, rank)
    for basis in bases:
        nonzero = [c for c in basis if c]
        if len(nonzero) > 1 or any(c & (c - 1) for c in nonzero):
            raise ValueError(f"{owner}: each cga_layout basis must have at most one nonzero "
                             f"entry, a power of two; got {list(basis)}")
    return bases


def check_shape(owner: str, shape: Sequence[int], rank: int | None = None) -> tuple[int, ...]:
    shape = int_tuple(owner, "shape", shape)
    if rank is not None and len(shape) != rank:
        raise ValueError(f"{owner}: shape {list(shape)} has rank {len(shape)} but the layout "
                         f"has rank {rank}")
    for size in shape:
        if size <= 0 or size & (size - 1):
            raise ValueError(f"{owner}: shape entries must be powers of two, got {list(shape)}")
    return shape


def format_value(value) -> str:
    """Python source for a field value: tuples print as lists, like Gluon's constructors."""
    if isinstance(value, tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return repr(value)


def constructor_repr(obj, fields: Sequence[str], defaults: dict | None = None) -> str:
    defaults = defaults or {}
    parts = []
    for name in fields:
        value = getattr(obj, name)
        if name in defaults and value == defaults[name]:
            continue
        parts.append(f"{name}={format_value(value)}")
    return f"{type(obj).__name__}({', '.join(parts)})"
