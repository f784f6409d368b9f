"""Analyses over the shared IR that passes and lowering query (axis info, ...)."""

from shared_codegen.analysis.axis_info import MAX_DIVISOR, AxisAnalysis, AxisInfo

__all__ = ["AxisInfo", "AxisAnalysis", "MAX_DIVISOR"]
