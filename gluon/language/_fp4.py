"""`gl.fp4_to_fp(src, elem_type, axis)` (Triton 3.6): unpack bytes that hold two fp4 (e2m1)
values each into `elem_type` (fp16, bf16 or fp32), doubling `axis`. The low nibble comes
first. The result's layout is the one Triton infers (`shared_codegen/ops/movement/fp4.py`):
both values stay in the thread that held the byte."""

from __future__ import annotations

from gluon.language._layouts import is_auto
from shared_codegen.frontend.values import builtin, tensor, wrap
from shared_codegen.ops.movement.fp4 import Fp4ToFpOp, check_fp4_to_fp, fp4_result_layout


@builtin
def fp4_to_fp(src, elem_type, axis, _semantic=None) -> tensor:
    """Upcast packed fp4 (e2m1) bytes to `elem_type` along `axis` (see the module)."""
    if not isinstance(src, tensor) or not src.is_block():
        raise TypeError(f"fp4_to_fp: src must be a tensor of packed fp4 bytes, got {src!r}")
    elem_type = getattr(elem_type, "value", elem_type)
    axis = getattr(axis, "value", axis)
    check_fp4_to_fp(src.type, elem_type, axis)
    if is_auto(src.layout):
        raise ValueError("fp4_to_fp: src has no layout yet (AutoLayout); give it one with "
                         "gl.set_auto_layout")
    layout = fp4_result_layout(src.layout, list(src.shape), axis)
    handle = Fp4ToFpOp.build(_semantic.builder, src.handle, elem_type, axis, layout)
    return wrap(handle)


__all__ = ["fp4_to_fp"]
