"""Axis analysis: what is known about the integer and pointer values of a kernel, per dimension.

For every value (scalars and tensors, including block arguments of `scf` regions) the analysis
computes three facts per dimension `d`, all powers of two, following Triton's `AxisInfo`:

- `contiguity[d]`: the tensor splits along `d` into aligned runs of this many elements whose
  values go up by one (`[8, 9, 10, 11 | 40, 41, 42, 43]` has contiguity 4).
- `divisibility[d]`: the largest power of two known to divide the *first* value of every such
  run (every value when the contiguity is 1). Integers count in elements; pointers count in
  BYTES, like Triton, so a 16-byte aligned fp32 base pointer has divisibility 16 whatever the
  element size. `make_range(0, n)` starts at 0, which every power divides: `MAX_DIVISOR`.
- `constancy[d]`: the tensor splits along `d` into aligned runs of this many equal values.

A worked example, `offs = pid * 1024 + tl.arange(0, 1024)` with `ptr` 16-byte aligned (fp32):

    pid                      contiguity (1,)     divisibility (1,)      constancy (1,)
    pid * 1024 (splat)       (1,)                (1024,)                (1024,)
    tl.arange(0, 1024)       (1024,)             (MAX_DIVISOR,)         (1,)
    offs                     (1024,)             (1024,)                (1,)
    ptr + offs               (1024,)             (16,)  bytes           (1,)

so a thread may load up to min(1024, 16 bytes / 4 bytes, 128 bits / 32 bits) = 4 fp32 with one
16-byte instruction (`vector_width`), and `offs < n` with `n` divisible by 16 is constant in
runs of 16 (`mask_constancy`), so the mask does not split those vectors.

Scalars are described like Triton does: tuples with ONE entry (rank 1), contiguity (1,),
constancy (1,) and the divisibility of the scalar. `AxisInfo.rank` is 1 for them.

The lattice: facts only shrink when information is merged (`join` takes the gcd of each entry,
and keeps a constant only when both sides agree). Loop-carried values start from their initial
value and are joined with what the loop body yields until nothing changes (a fixpoint), so
`ptrs += BLOCK` inside a loop keeps the divisibility that both the init and the step allow.

    info = AxisInfo.analyze(kernel_function)
    info[offs].contiguity            # (1024,)
    info.vector_width(ptrs)          # 4 for fp32
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from shared_codegen.ir.core import Block, Function, Operation, Value
from shared_codegen.ir.types import PointerType, ScalarType, TensorType, scalar_of

# 2**62, Triton's value for "divisible by every power of two we care about" (the value 0).
MAX_DIVISOR = 1 << 62
# Loops converge in a handful of rounds (facts are powers of two and only shrink); this bounds
# pathological cases, after which loop-carried values are treated as unknown.
_MAX_ROUNDS = 64


def highest_pow2_divisor(n: int) -> int:
    """The largest power of two dividing `n` (MAX_DIVISOR for 0), capped at MAX_DIVISOR."""
    if n == 0:
        return MAX_DIVISOR
    return min(n & -n, MAX_DIVISOR)


def _gcd(*xs: int) -> int:
    out = 0
    for x in xs:
        out = math.gcd(out, x)
    return out


def _mul_div(a: int, b: int) -> int:
    return min(a * b, MAX_DIVISOR)


@dataclass(frozen=True)
class AxisInfo:
    """The facts about one value. Tuples have one entry per dimension (one for scalars)."""

    contiguity: Tuple[int, ...]
    divisibility: Tuple[int, ...]
    constancy: Tuple[int, ...]
    # The value itself when every element is the same known integer (splat constants).
    constant_value: Optional[int] = None

    @property
    def rank(self) -> int:
        return len(self.contiguity)

    @staticmethod
    def analyze(function: Function) -> "AxisAnalysis":
        """Run the analysis over `function` (and every region in it)."""
        return AxisAnalysis(function)

    @staticmethod
    def unknown(rank: int) -> "AxisInfo":
        """Nothing known: every fact is 1 (the pessimistic state)."""
        ones = (1,) * max(rank, 1)
        return AxisInfo(ones, ones, ones)

    @staticmethod
    def of_constant(value: int, shape: Sequence[int]) -> "AxisInfo":
        shape = tuple(shape) or (1,)
        div = highest_pow2_divisor(int(value))
        return AxisInfo((1,) * len(shape), (div,) * len(shape),
                        tuple(shape) if len(shape) else (1,), int(value))

    def join(self, other: Optional["AxisInfo"]) -> "AxisInfo":
        """What holds for a value that is either `self` or `other` (a control-flow merge)."""
        if other is None or other == self:
            return self
        same = self.constant_value is not None and self.constant_value == other.constant_value
        return AxisInfo(tuple(map(math.gcd, self.contiguity, other.contiguity)),
                        tuple(map(math.gcd, self.divisibility, other.divisibility)),
                        tuple(map(math.gcd, self.constancy, other.constancy)),
                        self.constant_value if same else None)

    def __str__(self) -> str:
        def fmt(t):
            return "[" + ", ".join("MAX" if x == MAX_DIVISOR else str(x) for x in t) + "]"
        text = (f"contiguity = {fmt(self.contiguity)}, divisibility = {fmt(self.divisibility)}, "
                f"constancy = {fmt(self.constancy)}")
        if self.constant_value is not None:
            text += f", constant = {self.constant_value}"
        return "{" + text + "}"


# ---- small helpers the rules share -----------------------------------------------------------

def _shape(v: Value) -> Tuple[int, ...]:
    return tuple(v.type.shape) if isinstance(v.type, TensorType) else (1,)


def _elem_bytes(ptr_type) -> int:
    """Bytes of one pointee element of a pointer (or tensor of pointers)."""
    p = scalar_of(ptr_type)
    return max(1, p.element.bits // 8) if isinstance(p, PointerType) else 1


def _wrap(value: Optional[int], ty) -> Optional[int]:
    """Two's-complement wrap of a folded constant to the result's integer width."""
    if value is None:
        return None
    elem = scalar_of(ty)
    if not isinstance(elem, ScalarType) or not elem.is_int():
        return value
    bits = elem.bits
    if bits == 1:
        return value & 1
    value &= (1 << bits) - 1
    if elem.is_int_signed() and value >> (bits - 1):
        value -= 1 << bits
    return value


def _is_const(info: AxisInfo, value: int) -> bool:
    return info.constant_value is not None and info.constant_value == value


def _div_at(info: AxisInfo, d: int, run: int) -> int:
    """Divisibility of the first value of every aligned run of `run` elements along `d`.

    A run shorter than the value's own contiguous runs starts in the middle of one of them, at
    start + k*run, which only inherits gcd(divisibility, run) (`[8..15]` split in halves starts
    at 8 and 12)."""
    if info.contiguity[d] == run or info.contiguity[d] == 1:
        return info.divisibility[d]
    return math.gcd(info.divisibility[d], run)


def _every_element_div(info: AxisInfo, d: int) -> int:
    """A power of two dividing every element along `d` (not just the first of each run)."""
    return info.divisibility[d] if info.contiguity[d] == 1 else 1


def _full_constancy(shape) -> Tuple[int, ...]:
    return tuple(shape)


def _fold(info_list, fn) -> Optional[int]:
    if all(i.constant_value is not None for i in info_list):
        try:
            return fn(*(i.constant_value for i in info_list))
        except (ZeroDivisionError, ValueError, OverflowError):
            return None
    return None


def _with_constant(info: AxisInfo, value: Optional[int], shape, ty) -> AxisInfo:
    """Replace the facts by those of a splat constant when the result folded to one."""
    value = _wrap(value, ty)
    if value is None:
        return info
    return AxisInfo.of_constant(value, shape)


# ---- rules: one function per op family, (op, operand infos) -> result infos ------------------

Rule = Callable[[Operation, List[AxisInfo]], List[AxisInfo]]


def rule_make_range(op, ins):
    n = op.attrs["end"] - op.attrs["start"]
    return [AxisInfo((n,), (highest_pow2_divisor(op.attrs["start"]),), (1,))]


def rule_constant(op, ins):
    shape = _shape(op.result)
    value = op.attrs["value"]
    elem = scalar_of(op.result.type)
    if isinstance(elem, ScalarType) and elem.is_int() and isinstance(
            value, (bool, int, np.integer, np.bool_)):
        return [AxisInfo.of_constant(int(value), shape)]
    # A float splat is still constant everywhere; its "divisibility" means nothing.
    ones = (1,) * len(shape)
    return [AxisInfo(ones, ones, _full_constancy(shape))]


def rule_add_sub(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    is_ptr = op.name == "tt.addptr"
    # addptr counts the offset in elements but pointer divisibility is in bytes.
    scale = _elem_bytes(op.operands[0].type) if is_ptr else 1
    contig, div, const = [], [], []
    for d in range(len(shape)):
        if op.name == "arith.subi":
            # c - x runs downward, so only a constant subtrahend keeps runs increasing.
            c = math.gcd(lhs.contiguity[d], rhs.constancy[d])
        else:
            c = max(math.gcd(lhs.constancy[d], rhs.contiguity[d]),
                    math.gcd(lhs.contiguity[d], rhs.constancy[d]))
        contig.append(c)
        # (a*g + b*g) is a multiple of g: the first values of the result's runs are sums of
        # values at the same positions of both sides.
        div.append(math.gcd(_div_at(lhs, d, c), _mul_div(_div_at(rhs, d, c), scale)))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    if is_ptr:
        return [info]
    sign = -1 if op.name == "arith.subi" else 1
    return [_with_constant(info, _fold(ins, lambda a, b: a + sign * b), shape, op.result.type)]


def rule_mul(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    if _is_const(lhs, 0) or _is_const(rhs, 0):
        return [AxisInfo.of_constant(0, shape)]
    contig, div, const = [], [], []
    for d in range(len(shape)):
        c = 1
        if _is_const(rhs, 1):
            c = lhs.contiguity[d]
        elif _is_const(lhs, 1):
            c = rhs.contiguity[d]
        contig.append(c)
        # Scaling a run [k, k+1, ...] by s gives multiples of s at every position, but the
        # divisibility of k itself only holds for the first element; use every-element facts.
        ld = lhs.divisibility[d] if (_is_const(rhs, 1) or lhs.contiguity[d] == 1) else 1
        rd = rhs.divisibility[d] if (_is_const(lhs, 1) or rhs.contiguity[d] == 1) else 1
        div.append(_mul_div(ld, rd))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [_with_constant(info, _fold(ins, lambda a, b: a * b), shape, op.result.type)]


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_rem(a: int, b: int) -> int:
    return a - _c_div(a, b) * b


def rule_div(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    contig, div, const = [], [], []
    for d in range(len(shape)):
        contig.append(lhs.contiguity[d] if _is_const(rhs, 1) else 1)
        k = math.gcd(lhs.constancy[d], rhs.constancy[d])
        if lhs.contiguity[d] > 1 and rhs.constancy[d] > 1:
            # An aligned run of g consecutive values starting at a multiple of g, divided by a
            # multiple of g, gives one quotient: [64..79] // 16 is all 4.
            g = _gcd(lhs.contiguity[d], rhs.constancy[d], lhs.divisibility[d],
                     rhs.divisibility[d])
            k = max(k, g)
        const.append(k)
        if _is_const(lhs, 0) or _is_const(rhs, 1):
            div.append(lhs.divisibility[d])
        else:
            div.append(1)
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [_with_constant(info, _fold(ins, _c_div), shape, op.result.type)]


def rule_rem(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    if _is_const(rhs, 1):
        return [AxisInfo.of_constant(0, shape)]
    contig, div, const = [], [], []
    for d in range(len(shape)):
        c = 1
        if lhs.contiguity[d] > 1 and rhs.constancy[d] > 1:
            # [k*g .. k*g+g-1] % (m*g) stays consecutive: (64..79) % 32 = 0..15.
            c = _gcd(lhs.contiguity[d], rhs.constancy[d], lhs.divisibility[d],
                     rhs.divisibility[d])
        contig.append(c)
        div.append(math.gcd(_div_at(lhs, d, c), rhs.divisibility[d]))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [_with_constant(info, _fold(ins, _c_rem), shape, op.result.type)]


def rule_shl(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    shift = rhs.constant_value if rhs.constant_value is not None else 0
    contig, div, const = [], [], []
    for d in range(len(shape)):
        contig.append(lhs.contiguity[d] if shift == 0 and rhs.constant_value == 0 else 1)
        ld = 1 if (lhs.contiguity[d] > 1 and shift) else lhs.divisibility[d]
        div.append(_mul_div(ld, 1 << max(0, min(shift, 62))))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [_with_constant(info, _fold(ins, lambda a, b: a << b if 0 <= b < 64 else None),
                           shape, op.result.type)]


def rule_shr(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    shift = rhs.constant_value
    contig, div, const = [], [], []
    for d in range(len(shape)):
        contig.append(lhs.contiguity[d] if shift == 0 else 1)
        k = math.gcd(lhs.constancy[d], rhs.constancy[d])
        if shift is not None and shift > 0:
            ld = 1 if lhs.contiguity[d] > 1 else lhs.divisibility[d]
            div.append(max(1, ld >> shift))
            if lhs.contiguity[d] > 1:  # like `// 2**shift`
                k = max(k, _gcd(lhs.contiguity[d], lhs.divisibility[d], 1 << min(shift, 62)))
        else:
            div.append(lhs.divisibility[d] if shift == 0 else 1)
        const.append(k)
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [_with_constant(info, _fold(ins, lambda a, b: a >> b if 0 <= b < 64 else None),
                           shape, op.result.type)]


_LOGICAL = {"arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
            "arith.xori": lambda a, b: a ^ b}


def rule_logical(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    div, const = [], []
    for d in range(len(shape)):
        ld, rd = _every_element_div(lhs, d), _every_element_div(rhs, d)
        # x & y keeps the low zero bits of either side; | and ^ only those both have.
        div.append(max(ld, rd) if op.name == "arith.andi" else math.gcd(ld, rd))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo((1,) * len(shape), tuple(div), tuple(const))
    return [_with_constant(info, _fold(ins, _LOGICAL[op.name]), shape, op.result.type)]


def _div_from_runs(lhs: AxisInfo, rhs: AxisInfo, d: int, run: int) -> int:
    return math.gcd(_div_at(lhs, d, run), _div_at(rhs, d, run))


def rule_max_min(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    contig, div, const = [], [], []
    for d in range(len(shape)):
        c = math.gcd(lhs.contiguity[d], rhs.contiguity[d])
        contig.append(c)
        div.append(_div_from_runs(lhs, rhs, d, c))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    pick = max if "max" in op.name else min
    return [_with_constant(info, _fold(ins, pick), shape, op.result.type)]


def rule_select(op, ins):
    cond, lhs, rhs = ins
    shape = _shape(op.result)
    if cond.constant_value is not None:
        return [lhs if cond.constant_value else rhs]
    scalar_cond = not isinstance(op.operands[0].type, TensorType)
    contig, div, const = [], [], []
    for d in range(len(shape)):
        # A scalar condition picks one whole side; a tensor one switches between them in
        # runs of its constancy.
        k = shape[d] if scalar_cond else cond.constancy[d]
        c = _gcd(lhs.contiguity[d], rhs.contiguity[d], k)
        contig.append(c)
        div.append(_div_from_runs(lhs, rhs, d, c))
        const.append(_gcd(lhs.constancy[d], rhs.constancy[d], k))
    value = lhs.constant_value if (lhs.constant_value is not None
                                   and lhs.constant_value == rhs.constant_value) else None
    return [_with_constant(AxisInfo(tuple(contig), tuple(div), tuple(const)), value, shape,
                           op.result.type)]


_SIGNED_CMP = {"slt": "lt", "ult": "lt", "sle": "le", "ule": "le", "sgt": "gt", "ugt": "gt",
               "sge": "ge", "uge": "ge", "eq": "eq", "ne": "ne"}
_COMPARE = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
            "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def rule_cmpi(op, ins):
    lhs, rhs = ins
    shape = _shape(op.result)
    pred = _SIGNED_CMP.get(op.attrs.get("predicate"), "eq")
    const = []
    for d in range(len(shape)):
        k = math.gcd(lhs.constancy[d], rhs.constancy[d])
        # `x < n` with x running through an aligned block [a*g, a*g+g) and n a multiple of g
        # gives the same answer for the whole block. Only predicates that split at a multiple
        # of g qualify: x < n, x >= n (n on the right) and n > x, n <= x (n on the left).
        if pred in ("lt", "ge") and lhs.contiguity[d] > 1 and rhs.constancy[d] > 1:
            k = max(k, _gcd(lhs.contiguity[d], rhs.constancy[d], lhs.divisibility[d],
                            rhs.divisibility[d]))
        elif pred in ("gt", "le") and rhs.contiguity[d] > 1 and lhs.constancy[d] > 1:
            k = max(k, _gcd(rhs.contiguity[d], lhs.constancy[d], rhs.divisibility[d],
                            lhs.divisibility[d]))
        const.append(k)
    ones = (1,) * len(shape)
    info = AxisInfo(ones, ones, tuple(const))
    folded = _fold(ins, lambda a, b: int(_COMPARE[pred](a, b)))
    return [_with_constant(info, folded, shape, op.result.type)]


def rule_elementwise(op, ins):
    """Any elementwise op: equal inputs give equal outputs, so constancy survives."""
    shape = _shape(op.result)
    const = tuple(_gcd(*(i.constancy[d] for i in ins)) for d in range(len(shape))) if ins \
        else _full_constancy(shape)
    ones = (1,) * len(shape)
    return [AxisInfo(ones, ones, const)]


def rule_passthrough(op, ins):
    """Casts that keep integer values (ext/trunc/bitcast/ptr<->int) and layout conversions."""
    return [ins[0]]


def rule_splat(op, ins):
    shape = _shape(op.result)
    src = ins[0]
    return [AxisInfo((1,) * len(shape), (src.divisibility[0],) * len(shape),
                     _full_constancy(shape), src.constant_value)]


def rule_broadcast(op, ins):
    src = ins[0]
    src_shape, dst_shape = _shape(op.operands[0]), _shape(op.result)
    contig, const = [], []
    for d in range(len(dst_shape)):
        grown = src_shape[d] == 1
        contig.append(1 if grown else src.contiguity[d])
        const.append(dst_shape[d] if grown else src.constancy[d])
    return [AxisInfo(tuple(contig), src.divisibility, tuple(const), src.constant_value)]


def rule_expand_dims(op, ins):
    src = ins[0]
    axis = op.attrs["axis"]
    if src.constant_value is not None:
        new_div = highest_pow2_divisor(src.constant_value)
    else:
        # Along the new size-1 dimension every element is the start of a run, so only facts
        # true of every element carry over.
        new_div = _gcd(*(_every_element_div(src, d) for d in range(src.rank)))
    contig, div, const = list(src.contiguity), list(src.divisibility), list(src.constancy)
    contig.insert(axis, 1)
    div.insert(axis, new_div)
    const.insert(axis, 1)
    return [AxisInfo(tuple(contig), tuple(div), tuple(const), src.constant_value)]


def rule_trans(op, ins):
    src = ins[0]
    order = op.attrs["order"]
    return [AxisInfo(tuple(src.contiguity[i] for i in order),
                     tuple(src.divisibility[i] for i in order),
                     tuple(src.constancy[i] for i in order), src.constant_value)]


def rule_reshape(op, ins):
    src = ins[0]
    src_shape, dst_shape = _shape(op.operands[0]), _shape(op.result)
    if src.constant_value is not None:
        return [AxisInfo.of_constant(src.constant_value, dst_shape)]
    if all(c == s for c, s in zip(src.constancy, src_shape)):  # one value everywhere
        div = _gcd(*(_every_element_div(src, d) for d in range(src.rank)))
        return [AxisInfo((1,) * len(dst_shape), (div,) * len(dst_shape), dst_shape)]
    every = _gcd(*(_every_element_div(src, d) for d in range(src.rank)))
    rank = len(dst_shape)
    contig, div, const = [1] * rank, [every] * rank, [1] * rank
    # A row-major reshape that keeps the innermost size keeps each innermost row intact.
    if not op.attrs.get("allow_reorder") and src_shape[-1] == dst_shape[-1]:
        contig[-1], div[-1], const[-1] = src.contiguity[-1], src.divisibility[-1], \
            src.constancy[-1]
    return [AxisInfo(tuple(contig), tuple(div), tuple(const))]


def _hint_tuple(value, rank):
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return (int(value),) * rank


def rule_hint(op, ins):
    """`tl.multiple_of` / `tl.max_contiguous` / `tl.max_constancy`: promises by the user.

    Triton overwrites the computed facts with the hint; both hold, so we keep the larger."""
    src = ins[0]
    rank = src.rank
    facts = {"contiguity": list(src.contiguity), "divisibility": list(src.divisibility),
             "constancy": list(src.constancy)}
    for key in facts:
        if key in op.attrs and op.attrs[key] is not None:
            hint = _hint_tuple(op.attrs[key], rank)
            facts[key] = [max(a, b) for a, b in zip(facts[key], hint)]
    return [AxisInfo(tuple(facts["contiguity"]), tuple(facts["divisibility"]),
                     tuple(facts["constancy"]), src.constant_value)]


def rule_load(op, ins):
    """Loads through pointers that repeat (with a mask that repeats) repeat their values."""
    shape = _shape(op.result)
    const = tuple(_gcd(*(i.constancy[d] for i in ins)) for d in range(len(shape)))
    ones = (1,) * len(shape)
    return [AxisInfo(ones, ones, const)]


def rule_unknown(op, ins):
    return [AxisInfo.unknown(len(_shape(r))) for r in op.results]


def _build_rules() -> Dict[str, Rule]:
    from shared_codegen.ops.arith.definition import CAST_OPS, FLOAT_BINARY
    from shared_codegen.ops.math.definition import UNARY_FLOAT_RULES

    rules: Dict[str, Rule] = {
        "tt.make_range": rule_make_range, "arith.constant": rule_constant,
        "arith.addi": rule_add_sub, "arith.subi": rule_add_sub, "tt.addptr": rule_add_sub,
        "arith.muli": rule_mul, "arith.divsi": rule_div, "arith.divui": rule_div,
        "arith.remsi": rule_rem, "arith.remui": rule_rem,
        "arith.shli": rule_shl, "arith.shrsi": rule_shr, "arith.shrui": rule_shr,
        "arith.andi": rule_logical, "arith.ori": rule_logical, "arith.xori": rule_logical,
        "arith.maxsi": rule_max_min, "arith.minsi": rule_max_min,
        "arith.maxui": rule_max_min, "arith.minui": rule_max_min,
        "arith.select": rule_select, "arith.cmpi": rule_cmpi,
        "tt.splat": rule_splat, "tt.broadcast": rule_broadcast,
        "tt.expand_dims": rule_expand_dims, "tt.trans": rule_trans, "tt.reshape": rule_reshape,
        "ttg.convert_layout": rule_passthrough, "tt.hint": rule_hint, "tt.load": rule_load,
    }
    value_keeping_casts = ("arith.extsi", "arith.extui", "arith.trunci", "tt.bitcast",
                           "tt.ptr_to_int", "tt.int_to_ptr")
    for name in CAST_OPS:
        rules[name] = rule_passthrough if name in value_keeping_casts else rule_elementwise
    for name in list(FLOAT_BINARY) + list(UNARY_FLOAT_RULES) + ["arith.cmpf", "math.absi",
                                                                 "math.fma"]:
        rules.setdefault(name, rule_elementwise)
    return rules


RULES: Dict[str, Rule] = _build_rules()


# ---- the driver ------------------------------------------------------------------------------

class AxisAnalysis:
    """The analysis result of one function: `analysis[value]` gives its `AxisInfo`."""

    def __init__(self, function: Function):
        self.function = function
        self._info: Dict[Value, AxisInfo] = {}
        self._changed = False
        self._pessimize_loops = False
        self._run()

    # ---- queries ---------------------------------------------------------------------------
    def __getitem__(self, value: Value) -> AxisInfo:
        info = self._info.get(value)
        if info is None:
            raise KeyError(f"no axis info for {value!r}: not in the analyzed function "
                           "(re-run the analysis after rewriting the IR)")
        return info

    def get(self, value: Value, default=None):
        return self._info.get(value, default)

    def __contains__(self, value: Value) -> bool:
        return value in self._info

    def order(self, value: Value) -> Tuple[int, ...]:
        """Dimensions fastest first: the layout's order when the value has one, else by
        contiguity (ties favour the last dimension, like row-major and Triton's Coalesce)."""
        layout = getattr(value.type, "layout", None)
        order = getattr(layout, "order", None)
        if order is not None and len(order) == len(_shape(value)):
            return tuple(order)
        return order_from_contiguity(self[value].contiguity)

    def pointer_alignment(self, ptr: Value, order=None) -> int:
        """Consecutive elements, starting at a 16-byte..1-byte boundary, that a pointer tensor
        guarantees along its fastest dimension: min(contiguity, divisibility / element)."""
        if not isinstance(ptr.type, TensorType):
            return 1
        info = self[ptr]
        fast = (order or self.order(ptr))[0]
        multiple = max(1, info.divisibility[fast] // _elem_bytes(ptr.type))
        return max(1, min(multiple, info.contiguity[fast]))

    def vector_width(self, ptr: Value, elem_bits: Optional[int] = None, order=None,
                     max_bits: int = 128) -> int:
        """Most elements one thread may move with one instruction through `ptr`.

        min(contiguity along the fastest dim, byte divisibility / element bytes,
        max_bits / elem_bits). The lowering additionally clamps this by how many consecutive
        elements its layout gives each thread and by `mask_constancy`."""
        if not isinstance(ptr.type, TensorType):
            return 1
        if elem_bits is None:
            elem_bits = scalar_of(ptr.type).element.bits
        return max(1, min(self.pointer_alignment(ptr, order), max(1, max_bits // elem_bits)))

    def mask_constancy(self, mask: Optional[Value], order=None) -> int:
        """How many consecutive elements along the fastest dimension share one mask bit.

        A missing or scalar mask never splits a vector: it returns MAX_DIVISOR."""
        if mask is None or not isinstance(mask.type, TensorType):
            return MAX_DIVISOR
        fast = (order or self.order(mask))[0]
        return self[mask].constancy[fast]

    def dump(self) -> str:
        """Every value with its facts, in IR order (for debugging and tests)."""
        lines = []
        for v, info in self._info.items():
            lines.append(f"{v.name_hint or '?'}: {v.type} {info}")
        return "\n".join(lines)

    # ---- the fixpoint ----------------------------------------------------------------------
    def _run(self) -> None:
        fn = self.function
        for i, arg in enumerate(fn.args):
            self._info[arg] = _argument_info(fn, i, arg)
        for _ in range(_MAX_ROUNDS):
            self._changed = False
            self._visit_block(fn.body.block)
            if not self._changed:
                return
        # Not converged: drop what loops carry to "unknown" and settle once more.
        self._pessimize_loops = True
        for _ in range(2):
            self._visit_block(fn.body.block)

    def _set(self, value: Value, info: AxisInfo) -> None:
        if self._info.get(value) != info:
            self._info[value] = info
            self._changed = True

    def _carry(self, arg: Value, *incoming: Optional[AxisInfo]) -> None:
        """A region argument: the join of what flows into it, never growing between rounds."""
        if self._pessimize_loops:
            self._set(arg, AxisInfo.unknown(len(_shape(arg))))
            return
        known = [i for i in incoming if i is not None]
        info = known[0]
        for other in known[1:]:
            info = info.join(other)
        self._set(arg, info.join(self._info.get(arg)))

    def _visit_block(self, block: Block) -> None:
        for op in block.ops:
            visit = _CONTROL.get(op.name)
            if visit is not None:
                visit(self, op)
            elif op.results:
                ins = [self._info.get(v) or AxisInfo.unknown(len(_shape(v)))
                       for v in op.operands]
                rule = RULES.get(op.name, rule_unknown)
                for res, info in zip(op.results, rule(op, ins)):
                    self._set(res, info)
            for region in op.regions:
                if visit is None:  # e.g. combine regions: visit for completeness
                    for a in region.block.args:
                        self._set(a, AxisInfo.unknown(1))
                    self._visit_block(region.block)

    def _visit_for(self, op: Operation) -> None:
        lb, _, step = (self._info[v] for v in op.operands[:3])
        block = op.regions[0].block
        # The induction variable is lb + i*step: every value keeps what both divide.
        self._set(block.args[0], AxisInfo((1,), (math.gcd(lb.divisibility[0],
                                                          step.divisibility[0]),), (1,)))
        inits = op.operands[3:]
        term = block.terminator
        for i, (arg, init) in enumerate(zip(block.args[1:], inits)):
            self._carry(arg, self._info[init], self._info.get(term.operands[i]))
        self._visit_block(block)
        for i, (res, init) in enumerate(zip(op.results, inits)):
            self._carry(res, self._info[init], self._info.get(term.operands[i]))

    def _visit_if(self, op: Operation) -> None:
        for region in op.regions:
            self._visit_block(region.block)
        then_t, else_t = (r.block.terminator for r in op.regions)
        for i, res in enumerate(op.results):
            self._carry(res, self._info.get(then_t.operands[i]),
                        self._info.get(else_t.operands[i]))

    def _visit_while(self, op: Operation) -> None:
        before, after = op.regions[0].block, op.regions[1].block
        cond, yld = before.terminator, after.terminator
        for i, arg in enumerate(before.args):
            self._carry(arg, self._info[op.operands[i]], self._info.get(yld.operands[i]))
        self._visit_block(before)
        for i, arg in enumerate(after.args):
            self._carry(arg, self._info[cond.operands[1 + i]])
        self._visit_block(after)
        for i, res in enumerate(op.results):
            self._carry(res, self._info[cond.operands[1 + i]])


_CONTROL = {"scf.for": AxisAnalysis._visit_for, "scf.if": AxisAnalysis._visit_if,
            "scf.while": AxisAnalysis._visit_while}


def _argument_info(fn: Function, index: int, arg: Value) -> AxisInfo:
    """Kernel arguments: only what the launcher specialized on (16-byte divisibility) is known."""
    rank = len(_shape(arg))
    div = (fn.attrs.get("arg_divisibility") or {}).get(index, 1)
    ones = (1,) * rank
    return AxisInfo(ones, (int(div),) * rank, ones)


def order_from_contiguity(contiguity: Sequence[int]) -> Tuple[int, ...]:
    """Dimensions sorted by contiguity, largest first; ties put later dimensions first."""
    dims = list(reversed(range(len(contiguity))))
    dims.sort(key=lambda d: -contiguity[d])  # stable: ties keep the reversed order
    return tuple(dims)


def analyze(function: Function) -> AxisAnalysis:
    """Module-level spelling of `AxisInfo.analyze(function)`."""
    return AxisAnalysis(function)
