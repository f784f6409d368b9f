"""Analyses over the shared IR that passes and lowering query (axis info, ...)."""

from .axis_info import MAX_DIVISOR, AxisAnalysis, AxisInfo

__all__ = ["AxisInfo", "AxisAnalysis", "MAX_DIVISOR"]
