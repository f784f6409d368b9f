"""`return` inside an `if` whose condition is known only at run time, for functions that
return nothing (kernels, helpers that only store): Triton 3.6 accepts

    if pid >= num_tiles:
        return
    ...rest...

Structured IR has no early exit, so the function body is rewritten before tracing into the
equivalent `if pid >= num_tiles: pass  else: ...rest...`. The rewrite follows `if` branches
but never enters loops: a `return` inside a loop ends more than the iteration, and folding it
would turn it into `continue`, so that case keeps the code generator's error. A `return` of a
value is left alone too (the branches would have to merge their results).
"""

from __future__ import annotations

import ast
from typing import List

__all__ = ["fold_early_returns"]


def _bare_return(stmt) -> bool:
    return isinstance(stmt, ast.Return) and (
        stmt.value is None or (isinstance(stmt.value, ast.Constant) and stmt.value.value is None))


def _ends_in_bare_return(stmts) -> bool:
    return bool(stmts) and _bare_return(stmts[-1])


def _without_return(stmts, like) -> List[ast.stmt]:
    body = list(stmts[:-1])
    return body or [ast.copy_location(ast.Pass(), like)]


def fold_early_returns(stmts: List[ast.stmt]) -> List[ast.stmt]:
    """`stmts` with each `if` branch that ends in a bare `return` folded: the statements after
    the `if` move into the other branch. Nested `if`s are folded the same way."""
    out: List[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, ast.If):
            out.append(stmt)
            continue
        rest = list(stmts[i + 1:])
        body_returns = _ends_in_bare_return(stmt.body)
        else_returns = _ends_in_bare_return(stmt.orelse)
        if not (body_returns or else_returns):
            out.append(ast.copy_location(ast.If(stmt.test, fold_early_returns(stmt.body),
                                                fold_early_returns(stmt.orelse)), stmt))
            continue
        body = _without_return(stmt.body, stmt) if body_returns else stmt.body + rest
        orelse = _without_return(stmt.orelse, stmt) if else_returns else stmt.orelse + rest
        out.append(ast.copy_location(ast.If(stmt.test, fold_early_returns(body),
                                            fold_early_returns(orelse)), stmt))
        if body_returns and else_returns:
            out.append(ast.copy_location(ast.Return(None), stmt.body[-1]))
        return out
    return out
