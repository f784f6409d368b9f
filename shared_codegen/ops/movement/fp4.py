"""`ttg.fp4_to_fp`: unpack fp4 (e2m1) values, two per byte, into a wider float type.

    %r = ttg.fp4_to_fp %x {axis = 1} : tensor<64x32xi8, #blocked> -> tensor<64x64xbf16, ...>

Semantics (Triton 3.6's `gl.fp4_to_fp(src, elem_type, axis)`): each i8 element holds two
e2m1 values; the low nibble is element 2i along `axis` and the high nibble element 2i + 1, so
the result's `axis` is twice as long. e2m1 is sign, 2 exponent bits (bias 1), 1 mantissa
bit: the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6, exact in fp16, bf16 and fp32.

Layout (`fp4_result_layout`): both nibbles of a byte stay in the thread that holds it, in
consecutive registers. A `BlockedLayout` doubles `size_per_thread[axis]` (Triton's inferred
encoding); any other layout gets a new lowest register bit along `axis` and keeps its other
bases with the `axis` coordinate doubled. The lowering is then per register
(`fp4_lowering.py`).
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import TensorType, bfloat16, float16, float32, int8, uint8
from shared_codegen.layouts import BlockedLayout, to_linear_layout
from shared_codegen.layouts.relations import OWN_LAYOUTS, _layout_from_bases

FP4_TO_FP = "ttg.fp4_to_fp"
RESULT_TYPES = (float16, bfloat16, float32)
# e2m1 codes 0..15 -> value (bit 3 is the sign).
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def fp4_result_layout(layout, src_shape, axis: int):
    """The layout of the unpacked tensor when the packed one has `layout` (module
    docstring)."""
    if isinstance(layout, BlockedLayout):
        spt = list(layout.size_per_thread)
        spt[axis] *= 2
        return BlockedLayout(tuple(spt), layout.threads_per_warp, layout.warps_per_cta,
                             layout.order, layout.cga_layout)
    ll = to_linear_layout(layout, src_shape)

    def doubled(v):
        return tuple(c * 2 if d == axis else c for d, c in enumerate(v))

    bases = {name: [doubled(v) for v in vectors] for name, vectors in ll.bases.items()}
    first = tuple(1 if d == axis else 0 for d in range(len(src_shape)))
    bases["register"] = [first] + bases.get("register", [])
    shape = [s * 2 if d == axis else s for d, s in enumerate(src_shape)]
    return _layout_from_bases(bases, shape)


def check_fp4_to_fp(src_ty, elem_type, axis) -> None:
    """ValueError / TypeError in the user's terms unless the arguments are valid."""
    if not isinstance(src_ty, TensorType):
        raise TypeError(f"fp4_to_fp: src must be a tensor of packed fp4 bytes, got {src_ty}")
    if src_ty.element not in (int8, uint8):
        raise TypeError(f"fp4_to_fp: src must hold int8 or uint8 bytes (two e2m1 values "
                        f"each), got {src_ty.element}")
    if elem_type not in RESULT_TYPES:
        raise TypeError(f"fp4_to_fp: elem_type must be gl.float16, gl.bfloat16 or "
                        f"gl.float32, got {elem_type}")
    rank = len(src_ty.shape)
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < rank:
        raise ValueError(f"fp4_to_fp: axis must be a compile-time int in [0, {rank}), got "
                         f"{axis!r}")


class Fp4ToFpOp(OpDef):
    """`ttg.fp4_to_fp %src {axis}`: packed e2m1 bytes -> floats, `axis` twice as long."""

    name = FP4_TO_FP
    layout_rule = OWN_LAYOUTS
    pure = True
    user_name = "fp4_to_fp"
    spelling = "fp4_to_fp"

    @staticmethod
    def build(b, src, elem_type, axis: int, layout):
        shape = tuple(s * 2 if d == axis else s for d, s in enumerate(src.type.shape))
        ty = TensorType(shape, elem_type, layout)
        return b.create(FP4_TO_FP, [src], [ty], {"axis": int(axis)}).result

    def verify(self, op):
        src_ty, res_ty = op.operands[0].type, op.result.type
        axis = op.attrs.get("axis")
        try:
            check_fp4_to_fp(src_ty, res_ty.element, axis)
        except (TypeError, ValueError) as exc:
            raise VerificationError(str(exc), op) from None
        want = tuple(s * 2 if d == axis else s for d, s in enumerate(src_ty.shape))
        if tuple(res_ty.shape) != want:
            raise VerificationError(f"fp4_to_fp of {list(src_ty.shape)} along axis {axis} "
                                    f"must give {list(want)}, got {list(res_ty.shape)}", op)

    def interpret(self, op, frame):
        axis = op.attrs["axis"]
        raw = np.asarray(frame[op.operands[0]]).view(np.uint8)
        pairs = np.stack([raw & 0xF, raw >> 4], axis=axis + 1)
        codes = pairs.reshape(op.result.type.shape)
        return [E2M1_VALUES[codes].astype(op.result.type.element.np)]


__all__ = ["Fp4ToFpOp", "fp4_result_layout", "check_fp4_to_fp", "E2M1_VALUES"]
