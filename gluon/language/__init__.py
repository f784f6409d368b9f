"""`gluon.language` (`from gluon import language as gl`): the explicit-layout language, with
`triton.experimental.gluon.language` 3.6's names.

Tensors are (shape, dtype, layout). Elementwise, math, memory, reduction and debugging
builtins are the tile language's own functions: they delegate to the semantic object, and
Gluon's (`GluonSemantic`) enforces the layout rules. Builtins whose signature differs (a
`layout` argument, layout conversion and queries) live in `_core.py`.
"""

from gluon.language import distributed, extra, nvidia
from gluon.language._core import (add, arange, assume, bank_conflicts, barrier_any,
                                  convert_layout, distributed_type, full, full_like, mul,
                                  num_ctas, num_warps, set_auto_layout, sub, thread_barrier,
                                  to_linear_layout, to_tensor, warp_any, zeros, zeros_like)
from gluon.language._fp4 import fp4_to_fp
from gluon.language._movement import histogram
from gluon.language._newer_names import barrier  # Triton 3.8's name for thread_barrier
from gluon.language._layouts import (AutoLayout, BlockedLayout, CoalescedLayout, DistributedLayout,
                                     DistributedLinearLayout, DotOperandLayout,
                                     NVMMADistributedLayout, NVMMASharedLayout, SharedLayout,
                                     PaddedSharedLayout, SharedLinearLayout, SliceLayout,
                                     SwizzledSharedLayout)
from gluon.language._smem import (allocate_shared_memory, shared_memory_descriptor,
                                  shared_memory_descriptor_type)
from gluon.language._warp_spec import warp_specialize
from gluon.language.nvidia.ampere import dot_fma  # Triton exports it at the top level too
from shared_codegen.frontend.codegen import constexpr_function  # also gl.*, as upstream
from shared_codegen.frontend.values import constexpr, tensor
from shared_codegen.ir.types import IRType as dtype
from shared_codegen.ir.types import PointerType as pointer_type
from shared_codegen.ir.types import (bfloat16, block_type, float8e4nv, float8e5, float16, float32,
                                     float64, int1, int8, int16, int32, int64, uint8, uint16,
                                     uint32, uint64, void)
from tile.language.core import (PropagateNan, associative_scan, atomic_add, atomic_and, atomic_cas,
                                atomic_max, atomic_min, atomic_or, atomic_xchg, atomic_xor,
                                broadcast, broadcast_to, cast, clamp, device_assert, device_print,
                                expand_dims, load, max_constancy, max_contiguous, maximum, minimum,
                                multiple_of, num_programs, permute, program_id, reduce, reshape,
                                static_assert, static_print, static_range, store, trans, where)
from tile.language.inline_asm import inline_asm_elementwise
from tile.language.movement import gather, join, map_elementwise, split
from tile.language.math import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,
                                rsqrt, sin, sqrt, sqrt_rn, umulhi)
from tile.language.standard import (argmax, argmin, cdiv, cumprod, cumsum, max, min, ravel,
                                    reduce_or, sigmoid, softmax, sum, xor_sum)

__all__ = [
    # types
    "constexpr", "constexpr_function", "tensor", "dtype", "pointer_type", "block_type",
    "distributed_type", "void",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float8e4nv", "float8e5", "float16", "bfloat16", "float32", "float64", "PropagateNan",
    # layouts
    "AutoLayout", "CoalescedLayout", "BlockedLayout", "SliceLayout", "DistributedLayout",
    "DistributedLinearLayout", "DotOperandLayout", "NVMMADistributedLayout", "SharedLayout",
    "NVMMASharedLayout", "SwizzledSharedLayout", "SharedLinearLayout", "PaddedSharedLayout",
    "convert_layout", "set_auto_layout", "to_linear_layout", "bank_conflicts",
    # programs, creation, shapes
    "program_id", "num_programs", "num_warps", "num_ctas", "arange", "full", "zeros",
    "full_like", "zeros_like", "to_tensor", "cast", "broadcast", "broadcast_to", "reshape",
    "ravel", "permute", "trans", "expand_dims", "join", "split", "gather", "histogram",
    "map_elementwise", "fp4_to_fp", "inline_asm_elementwise",
    # memory and atomics
    "allocate_shared_memory", "shared_memory_descriptor", "shared_memory_descriptor_type",
    "load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
    "atomic_xor", "atomic_xchg", "atomic_cas",
    # elementwise
    "add", "sub", "mul", "assume",
    "where", "maximum", "minimum", "clamp", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn",
    "rsqrt", "abs", "sin", "cos", "erf", "floor", "ceil", "fma", "umulhi", "fdiv", "div_rn",
    "sigmoid", "softmax", "cdiv",
    # reductions and scans
    "reduce", "sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce_or",
    "associative_scan", "cumsum", "cumprod", "dot_fma",
    # hints, debugging, synchronization, loops
    "multiple_of", "max_contiguous", "max_constancy", "thread_barrier", "static_assert",
    "static_print", "device_print", "device_assert", "static_range", "nvidia", "extra", "barrier",
    "barrier_any",
    "warp_any",
    # warp specialization
    "warp_specialize",
    # other GPUs' memory (docs/distributed.md)
    "distributed",
]
