"""Matrix products in registers: `ttg.mma_v2` (tensor-core `mma.sync`) and `ttg.dot_fma`.

Both compute `acc + a @ b` for rank-2 tensors a (M, K), b (K, N), acc (M, N) whose layouts
say exactly how the product is distributed, as Gluon 3.6's `mma_v2` and `dot_fma` do:

- `ttg.mma_v2`: acc has `NVMMADistributedLayout(version=[2, 0], warps_per_cta, [16, 8])`;
  a is `DotOperandLayout(0, acc's layout, k_width)` and b `DotOperandLayout(1, ...)`, with
  `k_width` = 32 bits / element bits, so each thread's registers are exactly the PTX
  fragments of `mma.sync.aligned.m16n8kK` (PTX ISA 9.7.14.5.8 and neighbours). Supported:
  fp16 x fp16 and bf16 x bf16 -> fp32 (m16n8k16), fp32 x fp32 as tf32 -> fp32 (m16n8k8,
  inputs rounded to tf32), int8 x int8 and uint8 x uint8 -> int32 (m16n8k32).
- `ttg.dot_fma`: acc has a `BlockedLayout`; a and b are `DotOperandLayout(i, acc's layout,
  k_width=0)`, which give every thread the whole K extent of its rows / columns, so the
  product is a chain of fused multiply-adds per accumulator register. Operands are converted
  to the accumulator's type first (Triton decomposes mixed-type FMA dots the same way).

The lowering rules live in `shared_codegen/ops/dot/lowering.py`.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ir.core import OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import TensorType, bfloat16, float16, float32, float64, int32
from shared_codegen.layouts.relations import OWN_LAYOUTS, LayoutRule, Same

# (a/b element, accumulator element) -> (instruction K, the PTX type names).
MMA_V2_TYPES = {
    ("fp16", "fp32"): 16,
    ("fp16", "fp16"): 16,    # f16 accumulators: two per 32-bit C/D register
    ("bf16", "fp32"): 16,
    ("fp32", "fp32"): 8,     # tf32 inputs
    ("i8", "i32"): 32,
    ("u8", "i32"): 32,
}


def _layouts():
    # Imported lazily: the IR package must not need the layouts package to load.
    from shared_codegen.layouts import BlockedLayout, DotOperandLayout, NVMMADistributedLayout
    return BlockedLayout, DotOperandLayout, NVMMADistributedLayout


def mma_v2_k_width(elem) -> int:
    """The `k_width` mma_v2 operands of `elem` need: one 32-bit register of consecutive K."""
    return max(1, 32 // elem.bits)


def mma_v2_instr_k(a_elem, acc_elem) -> int:
    return MMA_V2_TYPES[(a_elem.name, acc_elem.name)]


def check_matrix_types(a, b, acc, what: str) -> None:
    """ValueError unless a (M, K), b (K, N), acc (M, N) are rank-2 tensors."""
    for name, ty in (("a", a), ("b", b), ("acc", acc)):
        if not isinstance(ty, TensorType):
            raise ValueError(f"{name} must be a tensor, got {ty}")
        if len(ty.shape) != 2:
            raise ValueError(f"{what} takes rank-2 tensors; {name} has shape {list(ty.shape)}")
    (m, k), (k2, n), (m2, n2) = a.shape, b.shape, acc.shape
    if k != k2 or m != m2 or n != n2:
        raise ValueError(f"shapes do not multiply: a {list(a.shape)} @ b "
                         f"{list(b.shape)} -> acc {list(acc.shape)} (need (M, K) x (K, N) -> "
                         f"(M, N))")


def check_batched_matrix_types(a, b, acc) -> None:
    """ValueError unless a (B, M, K), b (B, K, N), acc (B, M, N) multiply (dot_fma only)."""
    (nb, m, k), (nb2, k2, n), (nb3, m2, n2) = a.shape, b.shape, acc.shape
    if k != k2 or m != m2 or n != n2 or not nb == nb2 == nb3:
        raise ValueError(f"shapes do not multiply: a {list(a.shape)} @ b {list(b.shape)} -> "
                         f"acc {list(acc.shape)} (need (B, M, K) x (B, K, N) -> (B, M, N))")


def _check_operand_layouts(a, b, acc, k_width, what) -> None:
    _, DotOperandLayout, _ = _layouts()
    for index, name, ty in ((0, "a", a), (1, "b", b)):
        want = DotOperandLayout(index, acc.layout, k_width)
        if ty.layout != want:
            raise ValueError(f"{name} must have layout {want!r}, got {ty.layout!r}")


def check_mma_v2(a, b, acc, input_precision) -> None:
    """ValueError, in the user's terms, unless `acc + a @ b` (tensor types) is an mma_v2
    this compiler can lower; `input_precision` as the op stores it ('tf32' for fp32)."""
    what = "mma_v2"
    check_matrix_types(a, b, acc, what)
    _, _, NVMMADistributedLayout = _layouts()
    lay = acc.layout
    if not (isinstance(lay, NVMMADistributedLayout) and lay.version[0] == 2):
        raise ValueError(f"acc must have layout NVMMADistributedLayout(version=[2, 0], "
                         f"warps_per_cta=..., instr_shape=[16, 8]), got {lay!r}")
    if a.element != b.element:
        raise ValueError(f"a and b must have the same element type, got {a.element} "
                         f"and {b.element}")
    if (a.element.name, acc.element.name) not in MMA_V2_TYPES:
        raise ValueError(f"{what} supports fp16/bf16 -> fp32, fp16 -> fp16, fp32 (tf32) -> "
                         f"fp32 and int8/uint8 -> int32; got {a.element} x {b.element} -> "
                         f"{acc.element}")
    _check_operand_layouts(a, b, acc, mma_v2_k_width(a.element), what)
    if a.element == float32 and input_precision != "tf32":
        raise ValueError(f"{what} on fp32 inputs computes in tf32 (input_precision='tf32'), "
                         f"got {input_precision!r}; use dot_fma for full fp32 precision")
    (m, k), n = a.shape, b.shape[1]
    instr_k = mma_v2_instr_k(a.element, acc.element)
    if m % 16 or n % 8 or k % instr_k:
        raise ValueError(f"{what} with {a.element} inputs works on m16n8k{instr_k} tiles: M "
                         f"must be a multiple of 16, N of 8, K of {instr_k}; got M={m}, N={n}, "
                         f"K={k}")


_FMA_FLOATS = (float16, bfloat16, float32, float64)


def check_dot_fma(a, b, acc) -> None:
    """ValueError, in the user's terms, unless `acc + a @ b` is a valid dot_fma."""
    what = "dot_fma"
    if all(isinstance(t, TensorType) and len(t.shape) == 3 for t in (a, b, acc)):
        check_batched_matrix_types(a, b, acc)
    else:
        check_matrix_types(a, b, acc, what)
    BlockedLayout, _, _ = _layouts()
    if not isinstance(acc.layout, BlockedLayout):
        raise ValueError(f"acc must have a BlockedLayout, got {acc.layout!r}")
    _check_operand_layouts(a, b, acc, 0, what)
    if a.element != b.element:
        raise ValueError(f"a and b must have the same element type, got {a.element} "
                         f"and {b.element}")
    ok = ((a.element in _FMA_FLOATS and acc.element in _FMA_FLOATS
           and a.element.bits <= acc.element.bits)
          or (a.element.is_int() and acc.element.is_int() and a.element.bits <= acc.element.bits))
    if not ok:
        raise ValueError(f"{what} converts a and b to the accumulator type; {a.element} -> "
                         f"{acc.element} is not a widening (or same-type) conversion")


def _verify_with(op, check, *extra) -> None:
    a, b, acc = (v.type for v in op.operands)
    try:
        check(a, b, acc, *extra)
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None
    if op.result.type != acc:
        raise VerificationError(f"result type {op.result.type} must be acc's type {acc}", op)


class MmaV2Op(OpDef):
    """`ttg.mma_v2 a, b, acc {input_precision}`: acc + a @ b on tensor cores (mma.sync)."""

    name = "ttg.mma_v2"
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, a, bm, acc, input_precision=None):
        attrs = {}
        if a.type.element == float32:
            attrs["input_precision"] = input_precision or "tf32"
        return b.create("ttg.mma_v2", [a, bm, acc], [acc.type], attrs).result

    def verify(self, op):
        _verify_with(op, check_mma_v2, op.attrs.get("input_precision", ""))

    def interpret(self, op, frame):
        a, b, acc = (np.asarray(frame[v]) for v in op.operands)
        out_elem = op.result.type.element
        if out_elem == int32:
            # The s32 accumulator wraps like the hardware's (no .satfinite).
            prod = a.astype(np.int64) @ b.astype(np.int64) + acc.astype(np.int64)
            return [prod.astype(np.uint64).astype(np.uint32).view(np.int32)]
        if op.attrs.get("input_precision") == "tf32":
            a, b = round_to_tf32(a), round_to_tf32(b)
        # fp32 products and sums, rounded once to the accumulator (fp16 accumulators round
        # per instruction on the GPU, so results can differ in the last bits there).
        return [(a.astype(np.float32) @ b.astype(np.float32) + acc).astype(acc.dtype)]


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 -> the nearest tf32 (10 mantissa bits), ties away from zero: what
    `cvt.rna.tf32.f32` (PTX ISA 9.7.9.21 cvt) produces; inf and nan pass unchanged."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    # Adding half an ulp to the magnitude bits rounds ties away from zero (sign-magnitude).
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32)
    return np.where(finite, rounded, bits).view(np.float32)


class DotFmaOp(OpDef):
    """`ttg.dot_fma a, b, acc`: acc + a @ b as per-thread fused multiply-adds (rank 2, or
    rank 3 for a batch of products)."""

    name = "ttg.dot_fma"
    layout_rule = OWN_LAYOUTS

    @staticmethod
    def build(b, a, bm, acc):
        return b.create("ttg.dot_fma", [a, bm, acc], [acc.type]).result

    def verify(self, op):
        _verify_with(op, check_dot_fma)

    def interpret(self, op, frame):
        a, b, acc = (np.asarray(frame[v]) for v in op.operands)
        out = op.result.type.element.np
        if op.result.type.element.is_int():
            prod = a.astype(np.int64) @ b.astype(np.int64) + acc.astype(np.int64)
            return [prod.astype(out)]
        if out == np.float64:
            return [a.astype(np.float64) @ b.astype(np.float64) + acc]
        # fp16/bf16 accumulators: numpy has no bf16 matmul; compute in fp32 and round once.
        res = a.astype(np.float32) @ b.astype(np.float32) + acc.astype(np.float32)
        return [res.astype(out)]


# ---- tt.dot: the layout-free matrix product of the tile DSL -----------------------------------

DOT_INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee")


def _acc_is_result(op):
    # The accumulator and the result share a layout (the MMA's), so a loop-carried acc needs
    # no conversion.
    return [Same(op, (op.operands[2], op.result))]


class DotOp(OpDef):
    """`tt.dot a, b, acc {input_precision, max_num_imprecise_acc}`: acc + a @ b for rank-2
    (M, K) x (K, N) or batched rank-3 (B, M, K) x (B, K, N) tensors, with no layouts: the tile
    layout pass (`tile/passes/dot_acceleration.py`) rewrites it into `ttng.warp_group_dot`,
    `ttg.mma_v2` or `ttg.dot_fma` with the layouts it picks for the target and shape.

    `input_precision` (fp32 inputs only): 'tf32' rounds the inputs to tf32 (10 mantissa bits)
    where a tensor-core instruction computes the product; 'ieee' computes in fp32 (FMA). The
    frontend splits 'tf32x3' into three tf32 products before building this op."""

    name = "tt.dot"
    user_name = "dot"
    layout_rule = LayoutRule("dot", _acc_is_result)

    @staticmethod
    def build(b, a, bm, acc, input_precision="tf32", max_num_imprecise_acc=None):
        attrs = {}
        if a.type.element == float32:
            attrs["input_precision"] = input_precision
        if max_num_imprecise_acc is not None:
            attrs["max_num_imprecise_acc"] = int(max_num_imprecise_acc)
        return b.create(DotOp.name, [a, bm, acc], [acc.type], attrs).result

    def print_attrs(self, op):
        return format_attrs(op.attrs)

    def verify(self, op):
        a, b, acc = (v.type for v in op.operands)
        for name, ty in (("a", a), ("b", b), ("acc", acc)):
            if not isinstance(ty, TensorType) or len(ty.shape) not in (2, 3):
                raise VerificationError(f"{name} must be a rank-2 or rank-3 tensor, got {ty}", op)
        if not len(a.shape) == len(b.shape) == len(acc.shape):
            raise VerificationError("a, b and acc must have the same rank", op)
        batch = tuple(a.shape[:-2])
        if (batch != tuple(b.shape[:-2]) or batch != tuple(acc.shape[:-2])
                or a.shape[-1] != b.shape[-2] or acc.shape[-2:] != (a.shape[-2], b.shape[-1])):
            raise VerificationError(f"shapes do not multiply: {list(a.shape)} @ "
                                    f"{list(b.shape)} -> {list(acc.shape)}", op)
        precision = op.attrs.get("input_precision")
        if a.element == float32 and precision not in DOT_INPUT_PRECISIONS:
            raise VerificationError(f"input_precision must be one of {DOT_INPUT_PRECISIONS}, "
                                    f"got {precision!r}", op)
        if op.result.type != acc:
            raise VerificationError(f"result type {op.result.type} must be acc's type {acc}", op)

    def interpret(self, op, frame):
        a, b, acc = (np.asarray(frame[v]) for v in op.operands)
        return [dot_reference(a, b, acc, op.result.type.element,
                              op.attrs.get("input_precision", "ieee"))]


def dot_reference(a, b, acc, out_elem, input_precision="ieee") -> np.ndarray:
    """acc + a @ b as the tensor cores compute it: integer products wrap in int32, tf32
    inputs are rounded to 10 mantissa bits (tf32x3 keeps the two largest cross terms of the
    big/small split), floats multiply and add in fp32 (fp64 in fp64) and round once."""
    if out_elem.is_int():
        prod = np.matmul(a.astype(np.int64), b.astype(np.int64)) + acc.astype(np.int64)
        return prod.astype(np.uint64).astype(np.uint32).view(np.int32).astype(out_elem.np)
    if out_elem == float64:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)) + acc
    a, b = a.astype(np.float32), b.astype(np.float32)
    if input_precision == "tf32":
        prod = np.matmul(round_to_tf32(a), round_to_tf32(b))
    elif input_precision == "tf32x3":
        a_big, b_big = round_to_tf32(a), round_to_tf32(b)
        a_small, b_small = round_to_tf32(a - a_big), round_to_tf32(b - b_big)
        prod = (np.matmul(a_small, b_big) + np.matmul(a_big, b_small)) + np.matmul(a_big, b_big)
    else:
        prod = np.matmul(a, b)
    return (prod + acc.astype(np.float32)).astype(out_elem.np)


__all__ = ["DotOp", "dot_reference", "DOT_INPUT_PRECISIONS", "MmaV2Op", "DotFmaOp",
           "check_mma_v2", "check_dot_fma", "round_to_tf32", "mma_v2_k_width", "mma_v2_instr_k", "MMA_V2_TYPES"]
