"""`gl.PaddedSharedLayout` (Triton 3.6): a shared layout that inserts `padding` elements
after every `interval` elements of a linear offset order (`offset_bases`, as
`SharedLinearLayout`), to spread rows over banks without a swizzle.

The class is Triton's (constructor, checks, `with_identity_for`, equality), so kernels that
build one import and compare layouts. Allocating shared memory with it is refused with a
clear error: padded addressing (an offset plus `(offset >> log2(interval)) << log2(padding)`
per pair, not a XOR-linear map) is not in our shared-memory lowering, allocator or the
interpreter's views yet. Its upstream users are the AMD backends' pipelines; the NVIDIA
tutorials do not use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List

from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.frontend.values import constexpr

__all__ = ["PaddedSharedLayout", "padded_refusal"]


def _ints(value):
    value = value.value if isinstance(value, constexpr) else value
    if isinstance(value, (list, tuple)):
        return tuple(_ints(v) for v in value)
    return int(value)


def _pow2(n) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True, eq=True)
class PaddedSharedLayout:
    interval_padding_pairs: List[List[int]]
    offset_bases: List[List[int]]
    block_bases: List[List[int]]
    shape: List[int]

    def __post_init__(self):
        for name in ("interval_padding_pairs", "offset_bases", "block_bases", "shape"):
            object.__setattr__(self, name, _ints(getattr(self, name)))
        rank = len(self.shape)
        for what in ("offset_bases", "block_bases"):
            for basis in getattr(self, what):
                if len(basis) != rank:
                    raise ValueError(f"PaddedSharedLayout: every {what} entry needs {rank} "
                                     f"coordinates (the rank of shape {list(self.shape)}), got "
                                     f"{list(basis)}")
        self.verify()

    def verify(self):
        pairs = self.interval_padding_pairs
        if not pairs:
            raise ValueError("PaddedSharedLayout interval_padding_pairs must have at least one "
                             "interval-padding pair")
        if not all(len(pair) == 2 for pair in pairs):
            raise ValueError(f"PaddedSharedLayout interval_padding_pairs must be [interval, "
                             f"padding] pairs, got {[list(p) for p in pairs]}")
        intervals = [p[0] for p in pairs]
        if len(set(intervals)) != len(intervals):
            raise ValueError(f"PaddedSharedLayout intervals must be distinct, got {intervals}")
        if not all(_pow2(n) for n in intervals):
            raise ValueError("PaddedSharedLayout interval values must all be power of two")
        if not all(_pow2(p[1]) for p in pairs):
            raise ValueError("PaddedSharedLayout padding values must all be power of two")
        if not self.shape:
            raise ValueError("PaddedSharedLayout order must not be empty")

    @staticmethod
    @constexpr_function
    def with_identity_for(interval_padding_pairs, shape, order):
        """The layout with these pairs and the identity offset order for `shape` / `order`
        (the `order[0]` dim fastest)."""
        shape, order = _ints(shape), _ints(order)
        if len(shape) != len(order):
            raise ValueError(f"PaddedSharedLayout.with_identity_for: shape {list(shape)} and "
                             f"order {list(order)} differ in rank")
        if not all(_pow2(n) for n in shape):
            raise ValueError(f"PaddedSharedLayout.with_identity_for: shape {list(shape)} must "
                             f"be powers of two")
        rank = len(shape)
        bases = [[1 << bit if i == dim else 0 for i in range(rank)]
                 for dim in order for bit in range(int(math.log2(shape[dim])))]
        return PaddedSharedLayout(interval_padding_pairs, bases, [], shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self):
        return (f"PaddedSharedLayout(interval_padding_pairs="
                f"{[list(p) for p in self.interval_padding_pairs]}, offset_bases="
                f"{[list(b) for b in self.offset_bases]}, block_bases="
                f"{[list(b) for b in self.block_bases]}, shape={list(self.shape)})")


def padded_refusal(where: str) -> TypeError:
    return TypeError(f"{where}: PaddedSharedLayout is not supported yet (padded shared "
                     f"addressing is not in the shared-memory lowering, allocator or "
                     f"interpreter); use a SwizzledSharedLayout or SharedLinearLayout")
