"""Axis rules of the tensor family (`axis_rule` trait): how ranges, splats and the shape ops
move the contiguity, divisibility and constancy facts (`shared_codegen.analysis.axis_info`)."""

from __future__ import annotations

from shared_codegen.analysis.axis_info import (AxisInfo, every_element_div, full_constancy, gcd_all,
                                               highest_pow2_divisor, shape_of)


def rule_make_range(op, ins):
    n = op.attrs["end"] - op.attrs["start"]
    return [AxisInfo((n,), (highest_pow2_divisor(op.attrs["start"]),), (1,))]


def rule_splat(op, ins):
    shape = shape_of(op.result)
    src = ins[0]
    return [AxisInfo((1,) * len(shape), (src.divisibility[0],) * len(shape),
                     full_constancy(shape), src.constant_value)]


def rule_broadcast(op, ins):
    src = ins[0]
    src_shape, dst_shape = shape_of(op.operands[0]), shape_of(op.result)
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
        new_div = gcd_all(*(every_element_div(src, d) for d in range(src.rank)))
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
    src_shape, dst_shape = shape_of(op.operands[0]), shape_of(op.result)
    if src.constant_value is not None:
        return [AxisInfo.of_constant(src.constant_value, dst_shape)]
    if all(c == s for c, s in zip(src.constancy, src_shape)):  # one value everywhere
        div = gcd_all(*(every_element_div(src, d) for d in range(src.rank)))
        return [AxisInfo((1,) * len(dst_shape), (div,) * len(dst_shape), dst_shape)]
    every = gcd_all(*(every_element_div(src, d) for d in range(src.rank)))
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
