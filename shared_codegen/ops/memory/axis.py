"""Axis rule of the memory family (`axis_rule` trait)."""

from __future__ import annotations

from shared_codegen.analysis.axis_info import AxisInfo, gcd_all, shape_of


def rule_load(op, ins):
    """Loads through pointers that repeat (with a mask that repeats) repeat their values."""
    shape = shape_of(op.result)
    const = tuple(gcd_all(*(i.constancy[d] for i in ins)) for d in range(len(shape)))
    ones = (1,) * len(shape)
    return [AxisInfo(ones, ones, const)]
