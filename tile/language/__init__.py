"""`tile.language` (`import tile.language as tl`): the tile DSL, with `triton.language` 3.6's
names and semantics and no layouts (the compiler assigns them).

The dtype objects are the IR's own (`tl.float16 is shared_codegen.ir.types.float16`);
`tl.tensor` and `tl.constexpr` are the shared frontend's classes.
"""

from shared_codegen.frontend import missing_names as _missing_names
from shared_codegen.frontend.values import constexpr, tensor
from shared_codegen.ir.types import IRType as dtype
from shared_codegen.ir.types import PointerType as pointer_type
from shared_codegen.ir.types import (bfloat16, block_type, float8e4nv, float8e5, float16, float32,
                                     float64, int1, int8, int16, int32, int64, uint8, uint16,
                                     uint32, uint64, void)
from tile.language import distributed, extra, math
from tile.language._block_pointer import advance, make_block_ptr
from tile.language._descriptors import make_tensor_descriptor, tensor_descriptor
from tile.language._types import TRITON_MAX_TENSOR_NUMEL
from tile.language.core import (CompileTimeAssertionFailure, PropagateNan, arange, associative_scan,
                                assume, atomic_add, atomic_and, atomic_cas, atomic_max,
                                atomic_min, atomic_or, atomic_xchg, atomic_xor, broadcast,
                                broadcast_to, cast,
                                clamp, debug_barrier, device_assert, device_print, expand_dims,
                                full, load, max_constancy, max_contiguous, maximum, minimum,
                                multiple_of, num_programs, permute, program_id, range, reduce,
                                reshape, static_assert, static_print, static_range, store, trans,
                                view, where)
from tile.language._dot import dot
from tile.language.math import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,
                                rsqrt, sin, sqrt, sqrt_rn, umulhi)
from tile.language.inline_asm import inline_asm_elementwise
from tile.language.movement import (cat, gather, histogram, interleave, join, map_elementwise,
                                    split, swizzle2d)
from tile.language.sorting import bitonic_merge, flip, sort, topk
from tile.language.standard import (argmax, argmin, cdiv, cumprod, cumsum, max, min, ravel,
                                    reduce_or, sigmoid, softmax, sum, xor_sum, zeros, zeros_like)

# Triton's name for a pointer to int32 (`x.to(tl.pi32_t)` reinterprets a pointer).
pi32_t = pointer_type(int32)

__all__ = [
    # types
    "constexpr", "tensor", "dtype", "pointer_type", "block_type", "void", "int1", "int8",
    "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float8e4nv", "float8e5",
    "float16", "bfloat16", "float32", "float64", "pi32_t", "PropagateNan", "TRITON_MAX_TENSOR_NUMEL",
    "CompileTimeAssertionFailure",
    # programs, creation, shapes
    "program_id", "num_programs", "arange", "full", "zeros", "zeros_like", "cast", "broadcast",
    "broadcast_to", "reshape", "view", "ravel", "trans", "permute", "expand_dims",
    # data movement between elements, sorting
    "join", "split", "cat", "interleave", "gather", "histogram", "swizzle2d", "sort", "topk",
    "bitonic_merge", "flip", "map_elementwise", "inline_asm_elementwise",
    # memory and atomics
    "load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
    "atomic_xor", "atomic_xchg", "atomic_cas", "make_block_ptr", "advance",
    "make_tensor_descriptor", "tensor_descriptor",
    # elementwise
    "where", "maximum", "minimum", "clamp", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn",
    "rsqrt", "abs", "sin", "cos", "erf", "floor", "ceil", "fma", "umulhi", "fdiv", "div_rn",
    "sigmoid", "softmax", "cdiv",
    # linear algebra
    "dot",
    # reductions and scans
    "reduce", "sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce_or",
    "associative_scan", "cumsum", "cumprod",
    # hints, debugging, loops
    "multiple_of", "max_contiguous", "max_constancy", "assume", "debug_barrier", "static_assert",
    "static_print", "device_print", "device_assert", "static_range", "range", "math", "extra",
    # other GPUs' memory (docs/distributed.md)
    "distributed",
]

# `tl.<missing>` raises "tl.<name> is not supported by this compiler (yet)" with a close match.
__getattr__ = _missing_names.module_getattr(__name__, globals())
