"""`must_use_result` (Triton 3.6's `triton.language.core.must_use_result`, also
`gluon.must_use_result`): a call statement that drops the result of a function marked with it
is a compile error, with the mark's message when it has one.

    @gluon.must_use_result("the new token must be waited on")
    @gluon.jit
    def issue(...): ...

    issue(...)          # error: the result of issue is not used
    tok = issue(...)    # fine
"""

from __future__ import annotations

import ast

from shared_codegen.frontend.aggregates import BoundJitMethod
from shared_codegen.frontend.values import unwrap


def _is_plain_reference(expr) -> bool:
    """A name or an attribute chain on a name: looking it up twice has no effect."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def must_use_mark(fn):
    """The function's `must_use_result` mark (True or the message), or False. The mark may
    sit on the jitted function or on the Python function it wraps (decorator order)."""
    if isinstance(fn, BoundJitMethod):
        fn = fn.fn
    for target in (fn, getattr(fn, "fn", None)):
        mark = getattr(target, "_must_use_result", False)
        if mark:
            return mark
    return False


def visit_expression_statement(gen, expr):
    """Generate `expr` whose value the statement discards; a call to a `must_use_result`
    function is an error naming the call."""
    if isinstance(expr, ast.Call) and _is_plain_reference(expr.func):
        mark = must_use_mark(unwrap(gen.visit(expr.func)))
        if mark:
            name = ast.unparse(expr.func)
            why = f": {mark}" if isinstance(mark, str) else ""
            raise gen.error(expr, f"the result of {name}(...) is not used, but {name} is "
                                  f"marked must_use_result{why}")
    return gen.visit(expr)
