"""`inline_asm_elementwise` (Triton 3.6's `tl.inline_asm_elementwise`, also `gl.`): run a PTX
snippet on the elements of tensors. The op, its register conventions and the interpreter's
PTX subset are in `shared_codegen/ops/inline_asm/`."""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, constexpr, wrap
from shared_codegen.ir.types import IRType, TensorType
from shared_codegen.ops.inline_asm.definition import ElementwiseInlineAsmOp, check_inline_asm


def _plain(x):
    return x.value if isinstance(x, constexpr) else x


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, _semantic=None):
    """Apply `asm` (PTX, `$0..` the outputs then the inputs, as `constraints` lists them)
    to `pack` elements of each of `args` at a time (broadcast together). `dtype` is the
    result dtype, or a tuple of them for several results (then a tuple is returned).
    `is_pure=False` keeps the asm even if its results are unused."""
    asm, constraints, pack, is_pure = _plain(asm), _plain(constraints), _plain(pack), \
        _plain(is_pure)
    dtype = _plain(dtype)
    several = isinstance(dtype, (tuple, list))
    dtypes = [_plain(d) for d in (dtype if several else [dtype])]
    for d in dtypes:
        if not isinstance(d, IRType):
            raise TypeError(f"inline_asm_elementwise: dtype must be a dtype or a tuple of "
                            f"dtypes, got {d!r}")
    args = [_semantic._operand(_plain(a), "inline_asm_elementwise argument")
            for a in (args if isinstance(args, (tuple, list)) else [args])]
    blocks = [a for a in args if a.is_block()]
    if blocks:
        args = list(_semantic.broadcast_tensors(*args))
        first = next(a for a in args if a.is_block())
        layout = _semantic._map_layout(first)
        types = [TensorType(tuple(first.shape), d, layout) for d in dtypes]
    else:
        types = list(dtypes)
    check_inline_asm(asm, constraints, [a.type for a in args], types, pack)
    op = ElementwiseInlineAsmOp.build(_semantic.builder, [a.handle for a in args], types, asm,
                                      constraints, bool(is_pure), pack)
    outs = [wrap(r) for r in op.results]
    return tuple(outs) if several else outs[0]


__all__ = ["inline_asm_elementwise"]
