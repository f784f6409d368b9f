"""`tt.elementwise_inline_asm {asm_string, constraints, pure, packed_element}`: run a PTX
snippet on every `packed_element` elements of the operands (Triton 3.6's
`inline_asm_elementwise`).

    %y = tt.elementwise_inline_asm %x {asm_string = "cvt.rn.f16.s8 $0, $1;",
         constraints = "=h,r", pure = true, packed_element = 4} : tensor<512xi8> -> f16

The operands share one shape and layout (the frontends broadcast them) and so do the results
(one per dtype). Registers, as Triton passes them: a snippet call gets `pack` elements of each
operand; elements narrower than 32 bits go `32 / width` (at most `pack`) to a register, the
first in the low bits. `$0..` name the outputs first (each result's registers in turn), then
the inputs (each operand's registers in turn).

Interpreter: the snippet runs in `ptx_subset.py`, a numpy interpreter of the PTX that such
snippets use; the packs are consecutive row-major elements (the GPU's are consecutive registers
of a thread: the same elements whenever each thread holds runs of `pack` along the minor dim).
An instruction outside the subset is a kernel error naming it.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError
from shared_codegen.ir.types import PointerType, ScalarType, TensorType
from shared_codegen.layouts.relations import SAME_LAYOUT
from shared_codegen.ops.inline_asm.ptx_subset import PtxUnsupported, run_ptx

INLINE_ASM = "tt.elementwise_inline_asm"


def element_width(ty) -> int:
    """Bits of one element in a register (pointers are 64-bit addresses)."""
    elem = ty.element if isinstance(ty, TensorType) else ty
    return 64 if isinstance(elem, PointerType) else elem.bits


def per_register(ty, pack: int) -> int:
    """How many elements of this type share one asm register."""
    width = element_width(ty)
    return min(32 // width, pack) if width < 32 else 1


def check_inline_asm(asm, constraints, arg_types, dtypes, pack) -> None:
    """TypeError / ValueError in the user's terms unless the call is valid."""
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise TypeError("inline_asm_elementwise: asm and constraints must be compile-time "
                        "strings")
    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
        raise ValueError(f"inline_asm_elementwise: pack must be a compile-time int >= 1, got "
                         f"{pack!r}")
    for what, tys in (("argument", arg_types), ("dtype", dtypes)):
        for i, t in enumerate(tys):
            elem = t.element if isinstance(t, TensorType) else t
            if isinstance(elem, ScalarType) and elem.bits < 8:
                raise TypeError(f"inline_asm_elementwise: {what} {i} is {elem}; booleans "
                                f"have no register form, cast them to int8 or int32 first")
    for t in list(arg_types) + list(dtypes):
        if pack % per_register(t, pack):
            raise ValueError(f"inline_asm_elementwise: pack={pack} must be a multiple of the "
                             f"{per_register(t, pack)} elements of {t} that share a register")


class ElementwiseInlineAsmOp(OpDef):
    name = INLINE_ASM
    layout_rule = SAME_LAYOUT
    user_name = "inline_asm_elementwise"
    spelling = "inline_asm_elementwise"

    @staticmethod
    def build(b, args, result_types, asm: str, constraints: str, pure: bool, pack: int):
        attrs = {"asm_string": asm, "constraints": constraints, "pure": bool(pure),
                 "packed_element": int(pack)}
        return b.create(INLINE_ASM, list(args), list(result_types), attrs)

    @staticmethod
    def num_outputs(op) -> int:
        pack = op.attrs["packed_element"]
        return sum(pack // per_register(r.type, pack) for r in op.results)

    def verify(self, op):
        if not op.results:
            raise VerificationError("inline_asm_elementwise needs at least one result", op)
        shapes = {tuple(v.type.shape) if isinstance(v.type, TensorType) else ()
                  for v in (*op.operands, *op.results)}
        if len(shapes) > 1:
            raise VerificationError(f"operands and results must share one shape, got "
                                    f"{sorted(shapes)}", op)
        try:
            check_inline_asm(op.attrs["asm_string"], op.attrs["constraints"],
                             [v.type for v in op.operands], [r.type for r in op.results],
                             op.attrs["packed_element"])
        except (TypeError, ValueError) as exc:
            raise VerificationError(str(exc), op) from None

    def interpret(self, op, frame):
        pack = op.attrs["packed_element"]
        shape = tuple(op.results[0].type.shape) if isinstance(op.results[0].type,
                                                              TensorType) else ()
        if not shape and op.operands:  # scalars of a combine function run as whole arrays
            shape = np.broadcast_shapes(*(np.shape(frame[v]) for v in op.operands))
        n = int(np.prod(shape)) if shape else 1
        groups = -(-n // pack)
        # Element k of group g is flat element min(g * pack + k, n - 1): a short last pack
        # repeats its last element, whose extra results are dropped.
        take = np.minimum(np.arange(groups)[:, None] * pack + np.arange(pack)[None, :], n - 1)
        inputs = []
        for v in op.operands:
            if isinstance(v.type.element if isinstance(v.type, TensorType) else v.type,
                          PointerType):
                frame.error(op, "inline_asm_elementwise with pointer operands cannot run in "
                                "the interpreter (its pointers are not GPU addresses)")
            width, k = element_width(v.type), per_register(v.type, pack)
            raw = _bits(np.broadcast_to(np.asarray(frame[v]), shape).reshape(-1), width)[take]
            for j in range(0, pack, k):
                reg = np.zeros(groups, np.uint64)
                for e in range(k):
                    reg |= raw[:, j + e] << np.uint64(width * e)
                inputs.append(reg)
        try:
            outputs = run_ptx(op.attrs["asm_string"], inputs, self.num_outputs(op), groups)
        except PtxUnsupported as exc:
            frame.error(op, f"inline_asm_elementwise in the interpreter: {exc}")
        results, cursor = [], 0
        for r in op.results:
            width, k = element_width(r.type), per_register(r.type, pack)
            elem = r.type.element if isinstance(r.type, TensorType) else r.type
            raw = np.zeros((groups, pack), np.uint64)
            for j in range(0, pack, k):
                reg = outputs[cursor]
                cursor += 1
                for e in range(k):
                    raw[:, j + e] = (reg >> np.uint64(width * e)) & np.uint64((1 << width) - 1)
            flat = raw.reshape(-1)[:n].astype(f"<u{width // 8}").view(np.dtype(elem.np))
            results.append(flat.reshape(shape) if shape else flat[0])
        return results


def _bits(values: np.ndarray, width: int) -> np.ndarray:
    return np.ascontiguousarray(values).view(f"<u{width // 8}").astype(np.uint64)


__all__ = ["ElementwiseInlineAsmOp", "check_inline_asm", "per_register", "element_width"]
