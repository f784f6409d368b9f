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


def gcd_all(*xs: int) -> int:
    out = 0
    for x in xs:
        out = math.gcd(out, x)
    return out


def mul_div(a: int, b: int) -> int:
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

def shape_of(v: Value) -> Tuple[int, ...]:
    return tuple(v.type.shape) if isinstance(v.type, TensorType) else (1,)


def elem_bytes(ptr_type) -> int:
    """Bytes of one pointee element of a pointer (or tensor of pointers)."""
    p = scalar_of(ptr_type)
    return max(1, p.element.bits // 8) if isinstance(p, PointerType) else 1


def wrap_int(value: Optional[int], ty) -> Optional[int]:
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


def is_const(info: AxisInfo, value: int) -> bool:
    return info.constant_value is not None and info.constant_value == value


def div_at(info: AxisInfo, d: int, run: int) -> int:
    """Divisibility of the first value of every aligned run of `run` elements along `d`.

    A run shorter than the value's own contiguous runs starts in the middle of one of them, at
    start + k*run, which only inherits gcd(divisibility, run) (`[8..15]` split in halves starts
    at 8 and 12)."""
    if info.contiguity[d] == run or info.contiguity[d] == 1:
        return info.divisibility[d]
    return math.gcd(info.divisibility[d], run)


def every_element_div(info: AxisInfo, d: int) -> int:
    """A power of two dividing every element along `d` (not just the first of each run)."""
    return info.divisibility[d] if info.contiguity[d] == 1 else 1


def full_constancy(shape) -> Tuple[int, ...]:
    return tuple(shape)


def fold_constant(info_list, fn) -> Optional[int]:
    if all(i.constant_value is not None for i in info_list):
        try:
            return fn(*(i.constant_value for i in info_list))
        except (ZeroDivisionError, ValueError, OverflowError):
            return None
    return None


def with_constant(info: AxisInfo, value: Optional[int], shape, ty) -> AxisInfo:
    """Replace the facts by those of a splat constant when the result folded to one."""
    value = wrap_int(value, ty)
    if value is None:
        return info
    return AxisInfo.of_constant(value, shape)


# ---- rules: each op declares its `axis_rule` trait, (op, operand infos) -> result infos ------
# The op families' rules live beside their definitions (`shared_codegen/ops/<family>/axis.py`);
# here are the generic ones they share.

Rule = Callable[[Operation, List[AxisInfo]], List[AxisInfo]]


def rule_elementwise(op, ins):
    """Any elementwise op: equal inputs give equal outputs, so constancy survives."""
    shape = shape_of(op.result)
    const = tuple(gcd_all(*(i.constancy[d] for i in ins)) for d in range(len(shape))) if ins \
        else full_constancy(shape)
    ones = (1,) * len(shape)
    return [AxisInfo(ones, ones, const)]


def rule_passthrough(op, ins):
    """Casts that keep integer values (ext/trunc/bitcast/ptr<->int) and layout conversions."""
    return [ins[0]]


def rule_unknown(op, ins):
    return [AxisInfo.unknown(len(shape_of(r))) for r in op.results]


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
        if order is not None and len(order) == len(shape_of(value)):
            return tuple(order)
        return order_from_contiguity(self[value].contiguity)

    def pointer_alignment(self, ptr: Value, order=None) -> int:
        """Consecutive elements, starting at a 16-byte..1-byte boundary, that a pointer tensor
        guarantees along its fastest dimension: min(contiguity, divisibility / element)."""
        if not isinstance(ptr.type, TensorType):
            return 1
        info = self[ptr]
        fast = (order or self.order(ptr))[0]
        multiple = max(1, info.divisibility[fast] // elem_bytes(ptr.type))
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
            self._set(arg, AxisInfo.unknown(len(shape_of(arg))))
            return
        known = [i for i in incoming if i is not None]
        info = known[0]
        for other in known[1:]:
            info = info.join(other)
        self._set(arg, info.join(self._info.get(arg)))

    def _visit_block(self, block: Block) -> None:
        for op in block.ops:
            visit = self._control_visitor(op)
            if visit is not None:
                visit(self, op)
            elif op.results:
                ins = [self._info.get(v) or AxisInfo.unknown(len(shape_of(v)))
                       for v in op.operands]
                rule = (op.opdef.axis_rule if op.opdef is not None else None) or rule_unknown
                for res, info in zip(op.results, rule(op, ins)):
                    self._set(res, info)
            for region in op.regions:
                if visit is None:  # e.g. combine regions: visit for completeness
                    for a in region.block.args:
                        self._set(a, AxisInfo.unknown(1))
                    self._visit_block(region.block)

    @staticmethod
    def _control_visitor(op: Operation):
        """The visitor of a control-flow op (its regions carry values: the op's
        `axis_region_rule` trait), or None."""
        return op.opdef.axis_region_rule if op.opdef is not None else None

    def visit_for(self, op: Operation) -> None:
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

    def visit_if(self, op: Operation) -> None:
        for region in op.regions:
            self._visit_block(region.block)
        then_t, else_t = (r.block.terminator for r in op.regions)
        for i, res in enumerate(op.results):
            self._carry(res, self._info.get(then_t.operands[i]),
                        self._info.get(else_t.operands[i]))

    def visit_while(self, op: Operation) -> None:
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




def _argument_info(fn: Function, index: int, arg: Value) -> AxisInfo:
    """Kernel arguments: only what the launcher specialized on (16-byte divisibility) is known."""
    rank = len(shape_of(arg))
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
