"""How many elements one global access may move: layout contiguity x axis analysis.

A thread may merge registers r..r+vec-1 into one `ld/st.global.v*` when
  1. the layout puts them on consecutive elements along one dim `d` (register bases 0..k-1
     are 1, 2, 4, ... along `d`, and no other basis touches those low bits, so every group
     starts at a multiple of `vec`);
  2. the axis analysis says the pointer tensor is contiguous along `d` in runs of >= vec
     elements and its first element of each run is aligned to vec * itemsize bytes;
  3. the mask (if any) is constant over runs of >= vec along `d`;
  4. vec * itemsize <= 16 bytes (the widest PTX access, ld.global.v4.b32).

The axis analysis lives in `shared_codegen/analysis/axis_info.py` (another owner); this
module reads it through `axis_facts`, so only that function knows its API. Without it every
access is scalar, which is always correct.
"""

from __future__ import annotations

from typing import Optional, Tuple

from shared_codegen.ir.core import Value
from shared_codegen.ir.types import PointerType, TensorType, scalar_of

MAX_ACCESS_BYTES = 16


def layout_vector(ctx, ty: TensorType) -> Tuple[int, int]:
    """(dim, n): the first n registers of each group of n hold consecutive elements along
    `dim`, and groups start at multiples of n. (0, 1) when nothing is contiguous."""
    ll = ctx.linear_layout(ty)
    regs = list(ll.bases.get("register", []))
    if not regs:
        return 0, 1
    first = regs[0]
    nonzero = [d for d, c in enumerate(first) if c]
    if len(nonzero) != 1 or first[nonzero[0]] != 1:
        return 0, 1
    dim = nonzero[0]
    k = 0
    for vec in regs:
        want = 1 << k
        if all((c == want) if d == dim else (c == 0) for d, c in enumerate(vec)):
            k += 1
        else:
            break
    low = (1 << k) - 1
    others = regs[k:] + [v for name in ("lane", "warp", "block") for v in ll.bases.get(name, [])]
    while k and any(v[dim] & low for v in others):
        k -= 1  # a group could start off a multiple of 2**k: shrink until none does
        low = (1 << k) - 1
    return dim, 1 << k


def axis_facts(ctx, value: Value):
    """(contiguity, divisibility, constancy) lists per dim for `value`, or None when no axis
    analysis ran. Divisibility of a pointer is in bytes (Triton's convention)."""
    info = ctx.axis_info
    if info is None:
        return None
    facts = None
    for getter in ("get", "lookup", "__getitem__"):
        fn = getattr(info, getter, None)
        if fn is None:
            continue
        try:
            facts = fn(value)
        except (KeyError, TypeError):
            facts = None
        if facts is not None:
            break
    if facts is None:
        return None
    return (list(facts.contiguity), list(facts.divisibility), list(facts.constancy))


def _pow2_floor(n: int) -> int:
    n = max(int(n), 1)
    return 1 << (n.bit_length() - 1)


def vector_width(ptr_value: Value, ctx, mask_value: Optional[Value] = None) -> int:
    """Elements per access for a load/store/atomic through the pointer tensor `ptr_value`."""
    ty = ptr_value.type
    if not isinstance(ty, TensorType):
        return 1
    elem = scalar_of(ty).element if isinstance(scalar_of(ty), PointerType) else None
    if elem is None:
        return 1
    itemsize = max(1, elem.bits // 8) if not isinstance(elem, PointerType) else 8
    dim, vec = layout_vector(ctx, ty)
    vec = min(vec, MAX_ACCESS_BYTES // itemsize)
    if vec == 1:
        return 1
    facts = axis_facts(ctx, ptr_value)
    if facts is None:
        return 1
    contiguity, divisibility, _ = facts
    vec = min(vec, _pow2_floor(contiguity[dim]))
    align_elems = max(1, divisibility[dim] // itemsize)
    vec = min(vec, _pow2_floor(align_elems))
    if mask_value is not None and isinstance(mask_value.type, TensorType):
        mfacts = axis_facts(ctx, mask_value)
        if mfacts is None:
            return 1
        vec = min(vec, _pow2_floor(mfacts[2][dim]))
    return max(1, vec)
