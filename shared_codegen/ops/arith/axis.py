"""Axis rules of the arith family (`axis_rule` trait): what integer arithmetic keeps of the
contiguity, divisibility and constancy of its operands (see `shared_codegen.analysis.axis_info`
for the facts and the driver). Triton's AxisInfo.cpp visitors, one function per op kind."""

from __future__ import annotations

import math

import numpy as np

from shared_codegen.analysis.axis_info import (MAX_DIVISOR, AxisInfo, div_at, elem_bytes,
                                               every_element_div, fold_constant, full_constancy,
                                               gcd_all, is_const, mul_div, rule_elementwise,
                                               rule_passthrough, shape_of, with_constant)
from shared_codegen.ir.types import ScalarType, TensorType, scalar_of


def rule_constant(op, ins):
    shape = shape_of(op.result)
    if op.attrs.get("undef"):  # never read: every fact holds (Triton's ub.poison)
        top = (MAX_DIVISOR,) * max(len(shape), 1)
        return [AxisInfo(top, top, top)]
    value = op.attrs["value"]
    elem = scalar_of(op.result.type)
    if isinstance(elem, ScalarType) and elem.is_int() and isinstance(
            value, (bool, int, np.integer, np.bool_)):
        return [AxisInfo.of_constant(int(value), shape)]
    # A float splat is still constant everywhere; its "divisibility" means nothing.
    ones = (1,) * len(shape)
    return [AxisInfo(ones, ones, full_constancy(shape))]


def rule_add_sub(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    is_ptr = op.name == "tt.addptr"
    # addptr counts the offset in elements but pointer divisibility is in bytes.
    scale = elem_bytes(op.operands[0].type) if is_ptr else 1
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
        div.append(math.gcd(div_at(lhs, d, c), mul_div(div_at(rhs, d, c), scale)))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    if is_ptr:
        return [info]
    sign = -1 if op.name == "arith.subi" else 1
    folded = fold_constant(ins, lambda a, b: a + sign * b)
    return [with_constant(info, folded, shape, op.result.type)]


def rule_mul(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    if is_const(lhs, 0) or is_const(rhs, 0):
        return [AxisInfo.of_constant(0, shape)]
    contig, div, const = [], [], []
    for d in range(len(shape)):
        c = 1
        if is_const(rhs, 1):
            c = lhs.contiguity[d]
        elif is_const(lhs, 1):
            c = rhs.contiguity[d]
        contig.append(c)
        # Scaling a run [k, k+1, ...] by s gives multiples of s at every position, but the
        # divisibility of k itself only holds for the first element; use every-element facts.
        ld = lhs.divisibility[d] if (is_const(rhs, 1) or lhs.contiguity[d] == 1) else 1
        rd = rhs.divisibility[d] if (is_const(lhs, 1) or rhs.contiguity[d] == 1) else 1
        div.append(mul_div(ld, rd))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [with_constant(info, fold_constant(ins, lambda a, b: a * b), shape, op.result.type)]


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_rem(a: int, b: int) -> int:
    return a - _c_div(a, b) * b


def rule_div(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    contig, div, const = [], [], []
    for d in range(len(shape)):
        contig.append(lhs.contiguity[d] if is_const(rhs, 1) else 1)
        k = math.gcd(lhs.constancy[d], rhs.constancy[d])
        if lhs.contiguity[d] > 1 and rhs.constancy[d] > 1:
            # An aligned run of g consecutive values starting at a multiple of g, divided by a
            # multiple of g, gives one quotient: [64..79] // 16 is all 4.
            g = gcd_all(lhs.contiguity[d], rhs.constancy[d], lhs.divisibility[d],
                     rhs.divisibility[d])
            k = max(k, g)
        const.append(k)
        if is_const(lhs, 0) or is_const(rhs, 1):
            div.append(lhs.divisibility[d])
        else:
            div.append(1)
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [with_constant(info, fold_constant(ins, _c_div), shape, op.result.type)]


def rule_rem(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    if is_const(rhs, 1):
        return [AxisInfo.of_constant(0, shape)]
    contig, div, const = [], [], []
    for d in range(len(shape)):
        c = 1
        if lhs.contiguity[d] > 1 and rhs.constancy[d] > 1:
            # [k*g .. k*g+g-1] % (m*g) stays consecutive: (64..79) % 32 = 0..15.
            c = gcd_all(lhs.contiguity[d], rhs.constancy[d], lhs.divisibility[d],
                     rhs.divisibility[d])
        contig.append(c)
        div.append(math.gcd(div_at(lhs, d, c), rhs.divisibility[d]))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [with_constant(info, fold_constant(ins, _c_rem), shape, op.result.type)]


def rule_shl(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    shift = rhs.constant_value if rhs.constant_value is not None else 0
    contig, div, const = [], [], []
    for d in range(len(shape)):
        contig.append(lhs.contiguity[d] if shift == 0 and rhs.constant_value == 0 else 1)
        ld = 1 if (lhs.contiguity[d] > 1 and shift) else lhs.divisibility[d]
        div.append(mul_div(ld, 1 << max(0, min(shift, 62))))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [with_constant(info, fold_constant(ins, lambda a, b: a << b if 0 <= b < 64 else None),
                           shape, op.result.type)]


def rule_shr(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    shift = rhs.constant_value
    contig, div, const = [], [], []
    for d in range(len(shape)):
        contig.append(lhs.contiguity[d] if shift == 0 else 1)
        k = math.gcd(lhs.constancy[d], rhs.constancy[d])
        if shift is not None and shift > 0:
            ld = 1 if lhs.contiguity[d] > 1 else lhs.divisibility[d]
            div.append(max(1, ld >> shift))
            if lhs.contiguity[d] > 1:  # like `// 2**shift`
                k = max(k, gcd_all(lhs.contiguity[d], lhs.divisibility[d], 1 << min(shift, 62)))
        else:
            div.append(lhs.divisibility[d] if shift == 0 else 1)
        const.append(k)
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    return [with_constant(info, fold_constant(ins, lambda a, b: a >> b if 0 <= b < 64 else None),
                           shape, op.result.type)]


_LOGICAL = {"arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
            "arith.xori": lambda a, b: a ^ b}


def rule_logical(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    div, const = [], []
    for d in range(len(shape)):
        ld, rd = every_element_div(lhs, d), every_element_div(rhs, d)
        # x & y keeps the low zero bits of either side; | and ^ only those both have.
        div.append(max(ld, rd) if op.name == "arith.andi" else math.gcd(ld, rd))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo((1,) * len(shape), tuple(div), tuple(const))
    return [with_constant(info, fold_constant(ins, _LOGICAL[op.name]), shape, op.result.type)]


def _div_from_runs(lhs: AxisInfo, rhs: AxisInfo, d: int, run: int) -> int:
    return math.gcd(div_at(lhs, d, run), div_at(rhs, d, run))


def rule_max_min(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    contig, div, const = [], [], []
    for d in range(len(shape)):
        c = math.gcd(lhs.contiguity[d], rhs.contiguity[d])
        contig.append(c)
        div.append(_div_from_runs(lhs, rhs, d, c))
        const.append(math.gcd(lhs.constancy[d], rhs.constancy[d]))
    info = AxisInfo(tuple(contig), tuple(div), tuple(const))
    pick = max if "max" in op.name else min
    return [with_constant(info, fold_constant(ins, pick), shape, op.result.type)]


def rule_select(op, ins):
    cond, lhs, rhs = ins
    shape = shape_of(op.result)
    if cond.constant_value is not None:
        return [lhs if cond.constant_value else rhs]
    scalar_cond = not isinstance(op.operands[0].type, TensorType)
    contig, div, const = [], [], []
    for d in range(len(shape)):
        # A scalar condition picks one whole side; a tensor one switches between them in
        # runs of its constancy.
        k = shape[d] if scalar_cond else cond.constancy[d]
        c = gcd_all(lhs.contiguity[d], rhs.contiguity[d], k)
        contig.append(c)
        div.append(_div_from_runs(lhs, rhs, d, c))
        const.append(gcd_all(lhs.constancy[d], rhs.constancy[d], k))
    value = lhs.constant_value if (lhs.constant_value is not None
                                   and lhs.constant_value == rhs.constant_value) else None
    return [with_constant(AxisInfo(tuple(contig), tuple(div), tuple(const)), value, shape,
                           op.result.type)]


_SIGNED_CMP = {"slt": "lt", "ult": "lt", "sle": "le", "ule": "le", "sgt": "gt", "ugt": "gt",
               "sge": "ge", "uge": "ge", "eq": "eq", "ne": "ne"}


_COMPARE = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
            "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def rule_cmpi(op, ins):
    lhs, rhs = ins
    shape = shape_of(op.result)
    pred = _SIGNED_CMP.get(op.attrs.get("predicate"), "eq")
    const = []
    for d in range(len(shape)):
        k = math.gcd(lhs.constancy[d], rhs.constancy[d])
        # `x < n` with x running through an aligned block [a*g, a*g+g) and n a multiple of g
        # gives the same answer for the whole block. Only predicates that split at a multiple
        # of g qualify: x < n, x >= n (n on the right) and n > x, n <= x (n on the left).
        if pred in ("lt", "ge") and lhs.contiguity[d] > 1 and rhs.constancy[d] > 1:
            k = max(k, gcd_all(lhs.contiguity[d], rhs.constancy[d], lhs.divisibility[d],
                            rhs.divisibility[d]))
        elif pred in ("gt", "le") and rhs.contiguity[d] > 1 and lhs.constancy[d] > 1:
            k = max(k, gcd_all(rhs.contiguity[d], lhs.constancy[d], rhs.divisibility[d],
                            lhs.divisibility[d]))
        const.append(k)
    ones = (1,) * len(shape)
    info = AxisInfo(ones, ones, tuple(const))
    folded = fold_constant(ins, lambda a, b: int(_COMPARE[pred](a, b)))
    return [with_constant(info, folded, shape, op.result.type)]


_BINARY = {
    "arith.addi": rule_add_sub, "arith.subi": rule_add_sub, "arith.muli": rule_mul,
    "arith.divsi": rule_div, "arith.divui": rule_div, "arith.remsi": rule_rem,
    "arith.remui": rule_rem, "arith.shli": rule_shl, "arith.shrsi": rule_shr,
    "arith.shrui": rule_shr, "arith.andi": rule_logical, "arith.ori": rule_logical,
    "arith.xori": rule_logical, "arith.maxsi": rule_max_min, "arith.minsi": rule_max_min,
    "arith.maxui": rule_max_min, "arith.minui": rule_max_min,
}
# Casts that keep integer values pass their facts through; the others keep only constancy.
_VALUE_KEEPING_CASTS = ("arith.extsi", "arith.extui", "arith.trunci", "tt.bitcast",
                        "tt.ptr_to_int", "tt.int_to_ptr")


def binary_axis_rule(op, ins):
    """Integer arithmetic by its own rule; float arithmetic keeps only constancy."""
    return _BINARY.get(op.name, rule_elementwise)(op, ins)


def cast_axis_rule(op, ins):
    rule = rule_passthrough if op.name in _VALUE_KEEPING_CASTS else rule_elementwise
    return rule(op, ins)


def compare_axis_rule(op, ins):
    return (rule_cmpi if op.name == "arith.cmpi" else rule_elementwise)(op, ins)
