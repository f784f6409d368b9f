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


def _returns_somewhere(stmts) -> bool:
    """Whether a bare `return` is reached through `if` branches alone (not inside loops)."""
    return any(_bare_return(s) or (isinstance(s, ast.If) and (
        _returns_somewhere(s.body) or _returns_somewhere(s.orelse))) for s in stmts)


def fold_early_returns(stmts: List[ast.stmt]) -> List[ast.stmt]:
    """`stmts` with each `if` that returns in a branch folded: the statements after the `if`
    move into its branches, except after a branch's final `return`. The branches are then
    folded the same way, so a `return` nested in an inner `if` also skips what follows the
    outer one (that part is copied into both paths; one of them is traced per constexpr
    condition)."""
    out: List[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if not (isinstance(stmt, ast.If) and
                (_returns_somewhere(stmt.body) or _returns_somewhere(stmt.orelse))):
            out.append(stmt)
            continue
        rest = list(stmts[i + 1:])
        body_returns = _ends_in_bare_return(stmt.body)
        else_returns = _ends_in_bare_return(stmt.orelse)
        body = _without_return(stmt.body, stmt) if body_returns else stmt.body + rest
        orelse = _without_return(stmt.orelse, stmt) if else_returns else stmt.orelse + rest
        out.append(ast.copy_location(ast.If(stmt.test, fold_early_returns(body),
                                            fold_early_returns(orelse)), stmt))
        if body_returns and else_returns:
            out.append(ast.copy_location(ast.Return(None), stmt.body[-1]))
        return out
    return out
