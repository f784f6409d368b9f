"""`tt.descriptor_dim {kind, index}`: the global shape (i32) or stride (i64, in elements) of a
tensor descriptor along one dim, which kernels read as `desc.shape[i]` / `desc.strides[i]`
(Triton 3.6 Gluon's `tensor_descriptor.shape` / `.strides`); kind "base" (index 0) is the
tensor's address, a pointer to the element type, and "fill" whether out-of-bounds loads read
NaN (what a tile kernel below sm_90 accesses through).

The interpreter reads them from the descriptor it was handed. Compiled kernels read them from
the descriptor parameter, where the launcher puts them after the 128-byte map (the CUtensorMap
holds them only in an undocumented encoding; Triton also passes them next to the map):
`TensorDescriptorType.param_bytes`. A descriptor the kernel wrote itself has no such fields.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import PointerType, TensorDescriptorType, int32, int64
from shared_codegen.layouts.relations import NO_RELATION

DESC_DIM = "tt.descriptor_dim"
# base: a pointer to the element; fill: 1 when out-of-bounds loads read NaN, else 0.
KINDS = {"shape": int32, "stride": int64, "base": None, "fill": int64}


class TensorDescriptorDimOp(OpDef):
    name = DESC_DIM
    layout_rule = NO_RELATION  # scalar results
    pure = True
    user_name = "desc.shape"

    @staticmethod
    def build(b, desc, kind: str, index: int):
        ty = KINDS[kind] or PointerType(desc.type.element)
        return b.create(DESC_DIM, [desc], [ty], {"kind": kind, "index": int(index)}).results[0]

    def print_attrs(self, op):
        return format_attrs({"kind": op.attrs["kind"], "index": op.attrs["index"]})

    def verify(self, op):
        ty = op.operands[0].type if len(op.operands) == 1 else None
        if not isinstance(ty, TensorDescriptorType):
            raise VerificationError("expects one tensor descriptor operand", op)
        kind, index = op.attrs.get("kind"), op.attrs.get("index")
        if kind not in KINDS or not isinstance(index, int) or not 0 <= index < ty.rank:
            raise VerificationError(f"kind must be one of {', '.join(KINDS)} and index in "
                                    f"[0, {ty.rank}), got {kind!r}, {index!r}", op)

    def interpret(self, op, frame):
        tmap = frame[op.operands[0]]
        index = op.attrs["index"]
        if op.attrs["kind"] == "shape":
            return [np.int32(tmap.shape[index])]
        if op.attrs["kind"] == "base":
            return [np.int64(tmap.address)]
        if op.attrs["kind"] == "fill":
            return [np.int64(tmap.fill != 0)]
        itemsize = op.operands[0].type.element.itemsize
        return [np.int64(tmap.strides[index] // itemsize)]


__all__ = ["TensorDescriptorDimOp", "DESC_DIM"]
