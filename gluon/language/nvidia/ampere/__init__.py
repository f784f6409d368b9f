"""Ampere-class (sm_80+) builtins: `mma_v2` (warp-level tensor-core MMA, `mma.sync`), the
`async_copy` submodule (`cp.async`), and `dot_fma` (exported as `gl.dot_fma`).

Names and parameters follow `triton.experimental.gluon.language.nvidia.ampere` 3.6. Layout
rules are checked here, at the call, in the user's terms (`shared_codegen.ops.dot.definition`
`check_mma_v2` / `check_dot_fma` name the layout an operand needs); the op verifiers repeat
the same checks on the IR.
"""

from __future__ import annotations

from gluon.language.nvidia.ampere import async_copy
# Upstream's module namespace also shows the layouts mma_v2 takes.
from shared_codegen.layouts import DotOperandLayout, NVMMADistributedLayout  # noqa: F401
from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import float32
from shared_codegen.ops.dot.definition import DotFmaOp, MmaV2Op, check_dot_fma, check_mma_v2

__all__ = ["async_copy", "mma_v2", "dot_fma", "mbarrier"]


def __getattr__(name):
    # Loaded on first use: it imports the Hopper package, which imports this one.
    if name == "mbarrier":
        import importlib

        return importlib.import_module(f"{__name__}.mbarrier")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _operands(name, a, b, acc):
    for what, x in (("a", a), ("b", b), ("acc", acc)):
        if not isinstance(x, tensor) or not x.is_block():
            raise TypeError(f"{name}: {what} must be a tensor, got {x!r}")
    return a, b, acc


@builtin
def mma_v2(a, b, acc, input_precision=None, _semantic=None):
    """`acc + a @ b` on tensor cores with `mma.sync` (sm_80+). `acc` has an
    `NVMMADistributedLayout(version=[2, 0], ...)`; `a` and `b` have
    `DotOperandLayout(0 / 1, acc.type.layout, k_width=32 // element bits)`. fp16 / bf16
    inputs accumulate in fp32; fp32 inputs run as tf32 (`input_precision` None or "tf32");
    int8 / uint8 accumulate in int32."""
    a, b, acc = _operands("mma_v2", a, b, acc)
    precision = input_precision
    if a.dtype == float32:
        precision = "tf32" if precision is None else str(precision)
    check_mma_v2(a.type, b.type, acc.type, precision or "")
    return _semantic.make_tensor(MmaV2Op.build(_semantic.builder, a.handle, b.handle,
                                               acc.handle, input_precision=precision))


@builtin
def dot_fma(a, b, acc, _semantic=None):
    """`acc + a @ b` with fused multiply-adds in each thread's registers. `acc` has a
    `BlockedLayout`; `a` / `b` have `DotOperandLayout(0 / 1, acc.type.layout, k_width=0)`
    (every thread holds the whole K extent of its rows / columns). Operands are converted to
    the accumulator's type."""
    a, b, acc = _operands("dot_fma", a, b, acc)
    check_dot_fma(a.type, b.type, acc.type)
    return _semantic.make_tensor(DotFmaOp.build(_semantic.builder, a.handle, b.handle,
                                                acc.handle))
