"""Runtime control flow for the AST walker: `if`, `for` and `while` on runtime values.

`CodeGenerator` mixes this in. A branch or loop on a compile-time value never gets here (the
generator folds it); on a runtime value it becomes `scf.if` / `scf.for` / `scf.while`, and the
loop-carried values are the variables the body assigns (`assigned_names`). Variables that hold
compile-time constants stay constants when every path agrees on them; otherwise they are
materialized as runtime values of a type both paths accept."""

from __future__ import annotations

import ast
from typing import List

from shared_codegen.frontend import aggregates, loop_widening
from shared_codegen.frontend.aggregates import is_aggregate
from shared_codegen.frontend.values import is_tensor, tensor, unwrap, wrap
from shared_codegen.ir.core import Operation, Region
from shared_codegen.ir.types import ScalarType, TensorType
from shared_codegen.ops.control.definition import CONDITION, ForOp, IfOp, WhileOp, YieldOp

_NO_VALUE = object()


class RangeSpec:
    """`range(...)` in a kernel: runtime unless static (tl.static_range, compile-time bounds)."""

    def __init__(self, start, end=None, step=1, static=False, **loop_attrs):
        if end is None:
            start, end = 0, start
        self.start, self.end, self.step = start, end, step
        self.static = static
        self.loop_attrs = loop_attrs


def assigned_names(stmts) -> List[str]:
    """Names a block of statements assigns (targets of =, op=, :=, for), in order."""
    found: List[str] = []

    def add(target):
        if isinstance(target, ast.Name):
            if target.id not in found:
                found.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                add(t)
        elif isinstance(target, ast.Starred):
            add(target.value)

    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    add(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                add(node.target)
            elif isinstance(node, ast.For):
                add(node.target)
            elif isinstance(node, ast.NamedExpr):
                add(node.target)
    return found


def _is_number(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, tensor)


def _same_constant(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


class ControlFlow:
    """`if`/`for`/`while` on runtime values; mixed into `CodeGenerator`."""

    # ---- if ------------------------------------------------------------------------------
    def visit_If(self, node):
        cond = self.visit(node.test)
        if not is_tensor(cond):
            self.visit_statements(node.body if cond else node.orelse)
            return
        self.runtime_if(node, cond)

    def runtime_if(self, node, cond):
        cond_value = self.semantic.to_condition(cond)
        before = dict(self.scope)
        regions = (Region(), Region())
        scopes = []
        for region, stmts in zip(regions, (node.body, node.orelse)):
            self.scope = dict(before)
            with self.builder.at_end_of(region.block):
                self.runtime_nesting += 1
                try:
                    self.visit_statements(stmts)
                finally:
                    self.runtime_nesting -= 1
            scopes.append(self.scope)
        self.scope = before
        names = []
        for name in dict.fromkeys(list(scopes[0]) + list(scopes[1])):
            a = scopes[0].get(name, _NO_VALUE)
            b = scopes[1].get(name, _NO_VALUE)
            if a is _NO_VALUE or b is _NO_VALUE:
                continue  # defined in one branch only: not visible after the if
            if a is b or (not is_tensor(a) and not is_tensor(b) and _same_constant(a, b)):
                self.scope[name] = a
                continue
            if is_aggregate(a) or is_aggregate(b):  # yielded as its runtime fields
                names += aggregates.split_branches(self, node, name, a, b, scopes,
                                                   self.is_carried_leaf)
                continue
            names.append(name)
        yielded = [[], []]
        for name in names:
            a, b = scopes[0][name], scopes[1][name]
            a, b = self.unify_branch_values(node, name, a, b, regions)
            yielded[0].append(a)
            yielded[1].append(b)
        for region, values in zip(regions, yielded):
            with self.builder.at_end_of(region.block):
                YieldOp.build(self.builder, [v.handle for v in values])
        types = [v.type for v in yielded[0]]
        op = Operation(IfOp.name, [cond_value], [v.handle.type for v in yielded[0]],
                       regions=list(regions), loc=self.location(node))
        self.builder.insert(op)
        for name, res, ty in zip(names, op.results, types):
            res.name_hint = name
            self.scope[name] = wrap(res, ty)
        aggregates.rebuild(self, names)

    def unify_branch_values(self, node, name, a, b, regions):
        """Give a variable assigned in both branches one runtime type."""
        if not is_tensor(a) and not is_tensor(b):
            if not (_is_number(a) and _is_number(b)):
                raise self.error(node, f"variable `{name}` gets different compile-time values "
                                       f"in the two branches of a runtime `if` ({a!r} and {b!r})")
        # Two different numbers (1 and 2) each get their own type: equal for equal kinds.
        numbers = not is_tensor(a) and not is_tensor(b)
        if not is_tensor(a):
            with self.builder.at_end_of(regions[0].block):
                a = self.materialize(a, like=None if numbers else b)
        if not is_tensor(b):
            with self.builder.at_end_of(regions[1].block):
                b = self.materialize(b, like=None if numbers else a)
        if a.type != b.type:
            raise self.error(node, f"variable `{name}` has type {a.type} in the `if` branch but "
                                   f"{b.type} in the `else` branch; both branches must give it "
                                   "the same type")
        return a, b

    def materialize(self, value, like=None):
        """A runtime tensor for a compile-time number (typed like `like` when given)."""
        if is_tensor(value):
            return value
        if not _is_number(value):
            raise TypeError(f"cannot use {self.describe(value)} as a runtime value")
        t = self.semantic.to_tensor(value)
        if like is not None and like.dtype != t.dtype and not isinstance(like.type, TensorType):
            t = self.semantic.cast(t, like.dtype)
        return t

    # ---- loops ---------------------------------------------------------------------------
    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported")
        it = self.visit(node.iter)
        if isinstance(it, RangeSpec) or hasattr(it, "static_range_marker") or \
                hasattr(it, "runtime_range_marker"):
            spec = it if isinstance(it, RangeSpec) else RangeSpec(
                unwrap(it.start), unwrap(it.end), unwrap(it.step),
                static=hasattr(it, "static_range_marker"))
            bounds = [unwrap(spec.start), unwrap(spec.end), unwrap(spec.step)]
            if spec.static:
                if any(is_tensor(x) for x in bounds):
                    raise self.error(node, "tl.static_range bounds must be compile-time values")
                for i in range(*bounds):
                    self.assign(node.target, i)
                    self.visit_statements(node.body)
                return
            self.runtime_for(node, bounds, unwrap(getattr(it, "num_stages", None)),
                             unwrap(getattr(it, "loop_unroll_factor", None)),
                             flatten=bool(unwrap(getattr(it, "flatten", False))),
                             warp_specialize=bool(unwrap(getattr(it, "warp_specialize",
                                                                 False))))
            return
        if isinstance(it, (tuple, list)):
            for item in it:
                self.assign(node.target, item)
                self.visit_statements(node.body)
            return
        raise self.error(node.iter, f"a kernel can loop over range(), tl.range(), "
                                    f"tl.static_range() or a tuple, not {self.describe(it)}")

    def carried_names(self, stmts) -> List[str]:
        names = []
        for name in assigned_names(stmts):
            value = self.scope.get(name, _NO_VALUE)
            if is_aggregate(value):  # carried as its runtime fields
                names += aggregates.explode(self, name, value, self.is_carried_leaf)
                continue
            if is_tensor(value) or (_is_number(value) and value is not _NO_VALUE):
                names.append(name)
        return names

    def runtime_for(self, node, bounds, num_stages=None, loop_unroll_factor=None,
                    flatten=False, warp_specialize=False):
        start, end, step = bounds
        if not is_tensor(step) and step == 0:
            raise self.error(node.iter, "range() step must not be zero")
        descending = not is_tensor(step) and step < 0
        if descending:
            # scf.for counts upward; iterate k = 0..trip-1 and derive i = start + k*step.
            trip = self.binary(ast.FloorDiv, self.binary(ast.Sub, self.binary(
                ast.Sub, start, end, node), step + 1, node), -step, node) \
                if (is_tensor(start) or is_tensor(end)) else max(0, -(-(start - end) // -step))
            lb, ub, st = 0, trip, 1
        else:
            lb, ub, st = start, end, step
        lb, ub, st = self.loop_bounds(node, lb, ub, st)
        names = self.carried_names(node.body)
        iv_name = node.target.id if isinstance(node.target, ast.Name) else ""

        def build(inits):
            op = ForOp.build(self.builder, lb.handle, ub.handle, st.handle,
                             [v.handle for v in inits], iv_name=iv_name, num_stages=num_stages,
                             loop_unroll_factor=loop_unroll_factor, flatten=flatten,
                             warp_specialize=warp_specialize)
            block = op.regions[0].block
            before = dict(self.scope)
            with self.builder.at_end_of(block):
                self.bind_carried(names, block.args[1:], inits)
                iv = tensor(block.args[0], lb.type)
                if descending:
                    iv = self.binary(ast.Add, start, self.binary(ast.Mult, iv, step, node), node)
                self.assign(node.target, iv)
                self.loop_body(node, names, inits)
            self.scope = before
            self.bind_loop_results(names, op.results, inits)

        loop_widening.build_loop(self, names, build)

    def bind_carried(self, names, args, inits):
        for n, arg, init in zip(names, args, inits):
            arg.name_hint = n
            self.scope[n] = wrap(arg, init.type)
        aggregates.rebuild(self, names)

    def is_carried_leaf(self, value) -> bool:
        """What a loop carries of an aggregate: register values and numbers."""
        return _is_number(value) or (is_tensor(value) and isinstance(value.type,
                                                                     (TensorType, ScalarType)))

    def loop_body(self, node, names, inits):
        """Trace a loop body inside its region, then yield the carried variables."""
        self.runtime_nesting += 1
        try:
            self.visit_statements(node.body)
        finally:
            self.runtime_nesting -= 1
        outs = self.loop_outputs(node, names, inits)
        YieldOp.build(self.builder, [v.handle for v in outs])

    def bind_loop_results(self, names, results, inits):
        for n, res, init in zip(names, results, inits):
            res.name_hint = n
            self.scope[n] = wrap(res, init.type)
        aggregates.rebuild(self, names)

    def loop_bounds(self, node, lb, ub, st):
        vals = [lb, ub, st]
        tensors = [v for v in vals if is_tensor(v)]
        for v in tensors:
            if v.is_block() or not v.dtype.is_int():
                raise self.error(node.iter, f"range() bounds must be integer scalars, got "
                                            f"{v.type}")
        if not tensors:
            big = any(abs(int(v)) >= 2 ** 31 for v in vals)
            vals = [self.semantic.to_tensor(int(v)) for v in vals]
            if big:
                from shared_codegen.ir.types import int64
                vals = [self.semantic.cast(v, int64) for v in vals]
            return vals
        widest = max(tensors, key=lambda t: t.dtype.bits).dtype
        out = []
        for v in vals:
            t = self.materialize(v) if not is_tensor(v) else v
            if t.dtype != widest:
                t = self.semantic.cast(t, widest)
            out.append(t)
        return out

    def loop_outputs(self, node, names, inits):
        aggregates.explode_again(self, node, names, self.is_carried_leaf)
        outs = []
        for n, init in zip(names, inits):
            value = self.scope.get(n, _NO_VALUE)
            if value is _NO_VALUE:
                raise self.error(node, f"loop-carried variable `{n}` is not defined at the end "
                                       "of the loop body")
            if not is_tensor(value):
                value = self.materialize(value, like=init)
            if loop_widening.widening_type(init, value) is not None:
                raise loop_widening.Widen(n, value.type)
            if value.type != init.type:
                raise self.error(node, f"loop-carried variable `{n}` has type {init.type} "
                                       f"before the loop but {value.type} at the end of the "
                                       "loop body; make the types match (e.g. with .to())")
            outs.append(value)
        return outs

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported")
        names = self.carried_names(node.body)
        # Variables read by the condition but never assigned stay as they are.
        inits = [self.materialize(self.scope[n]) for n in names]
        op = WhileOp.build(self.builder, [v.handle for v in inits])
        before_block, after_block = op.regions[0].block, op.regions[1].block
        saved = dict(self.scope)
        with self.builder.at_end_of(before_block):
            self.bind_carried(names, before_block.args, inits)
            cond = self.visit(node.test)
            if not is_tensor(cond):
                raise self.error(node.test, "a `while` condition must be a runtime value; a "
                                            "compile-time condition would loop forever or never")
            cond_value = self.semantic.to_condition(cond)
            YieldOp.build(self.builder, [cond_value] + list(before_block.args),
                          name=CONDITION)
        self.scope = dict(saved)
        with self.builder.at_end_of(after_block):
            self.bind_carried(names, after_block.args, inits)
            self.loop_body(node, names, inits)
        self.scope = saved
        self.bind_loop_results(names, op.results, inits)
