"""`tl.dot`: the matrix product of the tile DSL, with Triton 3.6's typing rules and messages.

The builtin builds one layout-free `tt.dot` (shared_codegen/ops/dot); the tile layout pass
picks the instruction (wgmma, mma.sync or FMA) and the layouts. `input_precision="tf32x3"` is
split here into three tf32 products of the big and small halves of each input (Triton's
F32DotTC decomposition), so every later stage only sees 'tf32' or 'ieee'.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, constexpr, tensor
from shared_codegen.ir.types import (TensorType, bfloat16, float16, float32, float64, int8, int32,
                                     uint8)
from shared_codegen.ops.dot.definition import DOT_INPUT_PRECISIONS, DotOp
from tile.language import _types as T

_PLAIN_OPERAND_TYPES = (int8, uint8, float16, bfloat16, float32, float64)
# tf32: the 13 low mantissa bits the tensor cores drop.
_TF32_MASK = -(1 << 13)


def _unwrap(x):
    return x.value if isinstance(x, constexpr) else x


def _shape(x: tensor):
    return list(x.type.shape)


def min_dot_size(elem):
    """(M, N, K) lower bounds Triton 3.6 sets for NVIDIA targets: K >= 32 for 8-bit inputs,
    K >= 16 otherwise; small M and N are allowed (we compute them with FMA)."""
    return (1, 1, 32) if elem.bits == 8 else (1, 1, 16)


@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=float32, _semantic=None):
    """acc + input @ other for 2-D (M, K) x (K, N) or batched 3-D (B, M, K) x (B, K, N) tiles.

    Inputs: fp16, bf16, fp8 (float8e4nv, float8e5, mixable), fp32 (input_precision 'tf32'
    (default), 'tf32x3' or 'ieee'), fp64, int8 (int32 result). The result is fp32 except:
    int8 -> int32, fp64 -> fp64, fp16 / fp8 with `out_dtype=tl.float16` -> fp16."""
    input_precision, allow_tf32 = _unwrap(input_precision), _unwrap(allow_tf32)
    if input_precision is not None and allow_tf32 is not None:
        raise ValueError("Only one of input_precision and allow_tf32 can be specified")
    if input_precision is None:
        input_precision = "tf32" if (allow_tf32 or allow_tf32 is None) else "ieee"
    return build_dot(_semantic, input, other, _unwrap(acc), input_precision,
                     _unwrap(max_num_imprecise_acc), _unwrap(out_dtype))


def build_dot(sem, lhs, rhs, acc, input_precision, max_num_imprecise_acc, out_dtype) -> tensor:
    for what, x in (("input", lhs), ("other", rhs)):
        if not isinstance(x, tensor) or not isinstance(x.type, TensorType):
            raise TypeError(f"dot: `{what}` must be a tensor (a block), got {T.describe(x)}")
    out_dtype = T.as_dtype(out_dtype, "out_dtype")
    a_elem, b_elem = lhs.type.element, rhs.type.element
    if not (a_elem.is_fp8() and b_elem.is_fp8()):
        for side, elem in (("lhs", a_elem), ("rhs", b_elem)):
            if elem not in _PLAIN_OPERAND_TYPES:
                raise TypeError(f"Unsupported {side} dtype {elem}")
        if a_elem != b_elem:
            raise TypeError(f"Both operands must be same dtype. Got {a_elem} and {b_elem}")
    if not isinstance(input_precision, str) or input_precision.lower() not in \
            DOT_INPUT_PRECISIONS:
        raise ValueError(f"input_precision must be one of {DOT_INPUT_PRECISIONS}. Got "
                         f"{input_precision}")
    input_precision = input_precision.lower()
    a_shape, b_shape = _shape(lhs), _shape(rhs)
    if not (len(a_shape) == len(b_shape) and len(a_shape) in (2, 3)):
        raise ValueError(f"Both inputs must be either 2D or 3D; (lhs: {a_shape} vs rhs: "
                         f"{b_shape})")
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"First input shape ({a_shape}) and second input shape {b_shape} are "
                         f"not compatible for matmul (second index of first shape "
                         f"({a_shape[-1]}) must be equal to first index of second shape "
                         f"({b_shape[-2]})")
    if len(a_shape) == 3 and a_shape[0] != b_shape[0]:
        raise ValueError(f"batched dot: the batch dims differ (lhs: {a_shape} vs rhs: "
                         f"{b_shape})")
    min_m, min_n, min_k = min_dot_size(a_elem)
    if a_shape[-2] < min_m or a_shape[-1] < min_k or b_shape[-1] < min_n:
        raise ValueError(f"Input shapes should have M >= {min_m}, N >= {min_n} and K >= "
                         f"{min_k}")
    if a_elem.is_int():
        if a_elem != int8:
            raise TypeError("only int8 supported!")
        ret_elem = int32
    elif out_dtype == bfloat16:
        raise ValueError("out_dtype=bfloat16 is unsupported. Please use out_dtype=float32/"
                         "float16 and cast with `.to(tl.bfloat16)`")
    elif a_elem in (float32, bfloat16):
        ret_elem = float32
    elif a_elem == float64:
        ret_elem = float64
    else:  # fp16 and fp8
        ret_elem = float16 if out_dtype == float16 else float32
    ret_shape = [*a_shape[:-1], b_shape[-1]]
    if acc is None:
        acc = sem.full(ret_shape, 0, ret_elem)
    else:
        if not isinstance(acc, tensor) or not isinstance(acc.type, TensorType) or \
                _shape(acc) != ret_shape or acc.type.element != out_dtype:
            raise ValueError(f"dot: acc must be a {ret_shape} tensor of out_dtype={out_dtype} "
                             f"(the result's shape and the out_dtype argument), got "
                             f"{T.describe(acc)}")
    fp8 = a_elem.is_fp8() and b_elem.is_fp8()
    if max_num_imprecise_acc is not None:
        if fp8 and max_num_imprecise_acc > a_shape[-1]:
            raise ValueError(f"max_num_imprecise_acc ({max_num_imprecise_acc}) must be <= K "
                             f"({a_shape[-1]})")
        if not fp8:
            max_num_imprecise_acc = None  # only fp8 products accumulate imprecisely
    if a_elem == float32 and input_precision == "tf32x3":
        return _dot_tf32x3(sem, lhs, rhs, acc)
    return sem.make_tensor(DotOp.build(sem.builder, lhs.handle, rhs.handle, acc.handle,
                                       input_precision, max_num_imprecise_acc))


def _split_tf32(sem, x: tensor):
    """x = big + small, big the tf32 truncation of x (exact in fp32, and so is small)."""
    bits = sem.bitcast(x, int32)
    big = sem.bitcast(sem.bitwise("and", bits, _TF32_MASK), float32)
    return big, sem.sub(x, big)


def _dot_tf32x3(sem, lhs, rhs, acc) -> tensor:
    """fp32 accuracy from three tf32 products: a_s @ b_b + a_b @ b_s first (the small terms),
    then a_b @ b_b, then the accumulator (a_s @ b_s is below fp32's rounding)."""
    a_big, a_small = _split_tf32(sem, lhs)
    b_big, b_small = _split_tf32(sem, rhs)
    zero = sem.full(_shape(acc), 0, float32)
    build = DotOp.build
    part = build(sem.builder, a_small.handle, b_big.handle, zero.handle, "tf32")
    part = build(sem.builder, a_big.handle, b_small.handle, part, "tf32")
    part = build(sem.builder, a_big.handle, b_big.handle, part, "tf32")
    return sem.add(sem.make_tensor(part), acc)


__all__ = ["dot", "build_dot", "min_dot_size"]
