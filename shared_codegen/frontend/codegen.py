"""Python AST -> IR, shared by both languages.

The generator walks a kernel's AST once per specialization. Compile-time values are plain
Python objects and are folded as Python folds them; runtime values are `tensor`s whose ops the
language's semantic object builds. Control flow on compile-time values is resolved here
(`if BLOCK > 64:` picks a branch, `tl.static_range` unrolls); on runtime values it becomes
`scf.if` / `scf.for` / `scf.while` whose loop-carried values are the variables the body
assigns. Calls to other jitted functions are inlined, so passes never see calls.

Every error raised while generating a statement is re-raised as a `CompilationError` naming
the kernel file, line and source line."""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
from typing import Any, Dict, List, Optional

from shared_codegen.frontend import (aggregates, conditional_expr, guards, loop_widening,
                                     missing_names, unused_results)
from shared_codegen.frontend.aggregates import BoundJitMethod, is_aggregate, is_aggregate_class
from shared_codegen.frontend.early_return import fold_early_returns
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.frontend.values import (TENSOR_SEMANTIC_ATTRS, constexpr, is_builtin, is_tensor,
                                            tensor, unwrap, wrap)
from shared_codegen.ir.core import Location, Operation, Region
from shared_codegen.ir.types import ScalarType, TensorType, int1
from shared_codegen.ops.control.definition import CONDITION, ForOp, IfOp, WhileOp, YieldOp

_NO_VALUE = object()

PY_BINOPS = {
    ast.Add: ("add", operator.add), ast.Sub: ("sub", operator.sub),
    ast.Mult: ("mul", operator.mul), ast.Div: ("truediv", operator.truediv),
    ast.FloorDiv: ("floordiv", operator.floordiv), ast.Mod: ("mod", operator.mod),
    ast.BitAnd: ("and", operator.and_), ast.BitOr: ("or", operator.or_),
    ast.BitXor: ("xor", operator.xor), ast.LShift: ("lshift", operator.lshift),
    ast.RShift: ("rshift", operator.rshift), ast.Pow: ("pow", operator.pow),
}
PY_COMPARES = {
    ast.Lt: ("lt", operator.lt), ast.LtE: ("le", operator.le), ast.Gt: ("gt", operator.gt),
    ast.GtE: ("ge", operator.ge), ast.Eq: ("eq", operator.eq), ast.NotEq: ("ne", operator.ne),
    ast.Is: (None, operator.is_), ast.IsNot: (None, operator.is_not),
    ast.In: (None, lambda a, b: a in b), ast.NotIn: (None, lambda a, b: a not in b),
}

# Python builtins a kernel may call on compile-time values.
PY_BUILTINS_ALLOWED = {
    "range", "len", "min", "max", "int", "float", "bool", "abs", "isinstance", "print",
    "getattr", "hasattr", "tuple", "list", "zip", "enumerate", "str", "type", "divmod", "round",
    "pow", "all", "any", "sum", "reversed", "sorted", "repr", "hash", "dict", "set", "slice",
    "ValueError", "TypeError", "AssertionError", "RuntimeError", "NotImplementedError",
}

CONSTEXPR_FUNCTION_FLAG = "__sc_constexpr_function__"


def constexpr_function(fn):
    """Mark a plain Python function as callable from kernels on compile-time arguments."""
    setattr(fn, CONSTEXPR_FUNCTION_FLAG, True)
    return fn


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


class CodeGenerator(guards.ExternalReads, ast.NodeVisitor):
    MAX_INLINE_DEPTH = 64

    def __init__(self, jit_fn, scope: Dict[str, Any], semantic, depth: int = 0):
        self.jit_fn = jit_fn
        self.info = jit_fn.source_info
        self.scope: Dict[str, Any] = dict(scope)
        self.semantic = semantic
        self.builder = semantic.builder
        self.depth = depth
        self.runtime_nesting = 0  # > 0 inside runtime if/for/while regions
        self.return_value: Any = None
        self.returned = False
        self._node: Optional[ast.AST] = None

    # ---- errors and locations ------------------------------------------------------------
    def location(self, node) -> Location:
        line = self.info.first_line + getattr(node, "lineno", 1) - 1
        col = getattr(node, "col_offset", 0) + self.info.indent
        return Location(self.info.file, line, col, self.info.line_text(line), self.info.name)

    def error(self, node, message: str, cause: Optional[BaseException] = None):
        loc = self.location(node if node is not None else self._node)
        return CompilationError(message, loc.file, loc.line, loc.col, loc.source_line, cause)

    # ---- entry points --------------------------------------------------------------------
    def generate_body(self):
        fn_def = self.info.tree
        self.visit_statements(fold_early_returns(fn_def.body))
        return self.return_value

    def call_function(self, jit_fn, args: List[Any], kwargs: Dict[str, Any]):
        """Trace `jit_fn(*args, **kwargs)` inline and return what it returns."""
        if self.depth >= self.MAX_INLINE_DEPTH:
            raise self.error(None, f"calls nest deeper than {self.MAX_INLINE_DEPTH} levels "
                                   f"(recursive call of `{jit_fn.__name__}`?)")
        try:
            bound = jit_fn.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(None, f"bad call of `{jit_fn.__name__}`: {exc}") from None
        bound.apply_defaults()
        scope = {}
        for name, value in bound.arguments.items():
            # A tl.constexpr annotation on a called function's parameter does not make a
            # runtime tensor constant: Triton passes it through as a tensor (tutorial 06's
            # `offs_m: tl.constexpr`), and so do we.
            scope[name] = unwrap(value)
        sub = CodeGenerator(jit_fn, scope, self.semantic, self.depth + 1)
        saved_codegen = getattr(self.semantic, "codegen", None)
        self.semantic.codegen = sub
        try:
            with self.builder.location(self.builder.loc):
                result = sub.generate_body()
        finally:
            self.semantic.codegen = saved_codegen
        return result

    # ---- statements ----------------------------------------------------------------------
    def visit_statements(self, stmts):
        for stmt in stmts:
            if self.returned:
                break
            self._node = stmt
            self.builder.loc = self.location(stmt)
            try:
                self.visit(stmt)
            except CompilationError as exc:
                if exc.file is not None:  # else raised below the frontend: give it this line
                    raise
                raise self.error(stmt, exc.message, exc) from None
            except (TypeError, ValueError, AssertionError, NotImplementedError, KeyError,
                    IndexError, ZeroDivisionError, OverflowError, RuntimeError) as exc:
                message = str(exc) or type(exc).__name__
                raise self.error(stmt, message, exc) from None

    def generic_visit(self, node):
        what = type(node).__name__
        text = {"Break": "`break`", "Continue": "`continue`", "Try": "`try`",
                "With": "`with`", "Lambda": "lambda", "Global": "`global`",
                "Nonlocal": "`nonlocal`", "Delete": "`del`", "Raise": "`raise`",
                "Import": "`import`", "ImportFrom": "`import`", "ListComp": "list comprehensions",
                "DictComp": "dict comprehensions", "SetComp": "set comprehensions",
                "GeneratorExp": "generator expressions", "FunctionDef": "nested functions",
                "ClassDef": "class definitions", "Yield": "`yield`", "Await": "`await`",
                "AsyncFor": "`async for`", "Match": "`match`", "Starred": "`*` unpacking",
                "Dict": "dict literals", "Set": "set literals"}.get(what, what)
        raise self.error(node, f"unsupported Python construct in a kernel: {text}")

    def visit_Pass(self, node):
        pass

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        unused_results.visit_expression_statement(self, node.value)

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return
        self.assign(node.target, unwrap(self.visit(node.value)))

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "augmented assignment only works on plain variables")
        lhs = self.lookup(node.target.id, node.target)
        rhs = self.visit(node.value)
        self.assign(node.target, self.binary(type(node.op), lhs, rhs, node))

    def assign(self, target, value):
        value = unwrap(value)
        if isinstance(target, ast.Name):
            if is_tensor(value) and not value.handle.name_hint:
                value.handle.name_hint = target.id
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)):
                raise self.error(target, f"cannot unpack {self.describe(value)} into "
                                         f"{len(target.elts)} names")
            if len(value) != len(target.elts):
                raise self.error(target, f"cannot unpack {len(value)} values into "
                                         f"{len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            raise self.error(target, "item assignment is not supported: tensors are immutable "
                                     "values; build a new tensor (e.g. with tl.where) instead")
        else:
            raise self.error(target, "unsupported assignment target")

    def visit_Return(self, node):
        if self.runtime_nesting:
            raise self.error(node, "`return` inside a runtime `if`/loop is not supported; "
                                   "assign the result to a variable and return it at the end")
        self.return_value = unwrap(self.visit(node.value)) if node.value is not None else None
        self.returned = True

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        msg = unwrap(self.visit(node.msg)) if node.msg is not None else ""
        if is_tensor(cond):
            self.semantic.device_assert(cond, str(msg))
        elif not cond:
            raise self.error(node, f"assertion failed at compile time: {msg}" if msg else
                             "assertion failed at compile time")

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
        if not is_tensor(a):
            with self.builder.at_end_of(regions[0].block):
                a = self.materialize(a, like=b)
        if not is_tensor(b):
            with self.builder.at_end_of(regions[1].block):
                b = self.materialize(b, like=a)
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
            self.runtime_for(node, bounds, unwrap(getattr(it, "num_stages", None)))
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

    def runtime_for(self, node, bounds, num_stages=None):
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
                             [v.handle for v in inits], iv_name=iv_name, num_stages=num_stages)
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

    # ---- expressions ---------------------------------------------------------------------
    def describe(self, value) -> str:
        if is_tensor(value):
            return f"a runtime value of type {value.type}"
        return f"{type(value).__name__} {value!r}"

    def visit_Constant(self, node):
        return node.value

    def lookup(self, name: str, node):
        if name in self.scope:
            return self.scope[name]
        g = self.jit_fn.fn.__globals__
        if name in g:
            value = self.global_value(name, g[name], node)
            return self.external(guards.globals_scope(self.jit_fn), name, (), g[name], node,
                                 value)
        closure = self.jit_fn.closure_vars
        if name in closure:
            value = self.global_value(name, closure[name], node)
            return self.external(guards.closure_scope(self.jit_fn), name, (), closure[name],
                                 node, value)
        if name in PY_BUILTINS_ALLOWED:
            if name == "range":
                return RangeSpec
            return getattr(builtins, name)
        if hasattr(builtins, name):
            raise self.error(node, f"the Python builtin `{name}` cannot be used in a kernel")
        raise self.error(node, f"name `{name}` is not defined")

    def global_value(self, name, value, node):
        if isinstance(value, constexpr):
            return value.value
        if isinstance(value, (bool, int, float, str)) and not isinstance(value, type):
            raise self.error(node, f"cannot read the global variable `{name}` ({value!r}) in a "
                                   "kernel: only globals wrapped in constexpr are allowed, e.g. "
                                   f"`{name} = tl.constexpr({value!r})`")
        return value

    def visit_Name(self, node):
        return self.lookup(node.id, node)

    def visit_Tuple(self, node):
        return tuple(unwrap(self.visit(e)) for e in node.elts)

    def visit_List(self, node):
        return [unwrap(self.visit(e)) for e in node.elts]

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
                continue
            value = unwrap(self.visit(v.value))
            if is_tensor(value):
                raise self.error(v, "f-strings in kernels can only format compile-time values")
            spec = "" if v.format_spec is None else self.visit_JoinedStr(v.format_spec)
            conv = {115: str, 114: repr, 97: ascii}.get(v.conversion, lambda x: x)
            parts.append(format(conv(value), spec))
        return "".join(parts)

    def binary(self, op_type, lhs, rhs, node):
        lhs, rhs = unwrap(lhs), unwrap(rhs)
        name, py = PY_BINOPS[op_type]
        if (method := aggregates.operator_method(lhs, py)) is not None:  # a @jit `__add__`..
            return self.call_function(method, [lhs, rhs], {})
        if is_tensor(lhs) or is_tensor(rhs):
            if name == "pow":
                raise self.error(node, "`**` is not supported on runtime values; use "
                                       "tl.exp2/tl.log2 or multiply")
            return self.semantic.binary(name, lhs, rhs)
        return py(lhs, rhs)

    def visit_BinOp(self, node):
        return self.binary(type(node.op), self.visit(node.left), self.visit(node.right), node)

    def visit_UnaryOp(self, node):
        x = unwrap(self.visit(node.operand))
        name = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not"}[
            type(node.op)]
        if is_tensor(x):
            return self.semantic.unary(name, x)
        return {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert,
                "not": operator.not_}[name](x)

    def visit_Compare(self, node):
        result = None
        lhs = unwrap(self.visit(node.left))
        for op, right in zip(node.ops, node.comparators):
            rhs = unwrap(self.visit(right))
            name, py = PY_COMPARES[type(op)]
            if isinstance(op, (ast.Is, ast.IsNot)):  # identity: known now, as in Triton
                cur = py(lhs, rhs)
            elif is_tensor(lhs) or is_tensor(rhs):
                if name is None:
                    raise self.error(node, f"`{type(op).__name__}` cannot compare runtime values")
                cur = self.semantic.binary(name, lhs, rhs)
            else:
                cur = py(lhs, rhs)
            result = cur if result is None else self.logical("and", result, cur)
            lhs = rhs
        return result

    def logical(self, kind, a, b):
        if not is_tensor(a) and not is_tensor(b):
            return (a and b) if kind == "and" else (a or b)
        a = self.truth(a)
        b = self.truth(b)
        return self.semantic.binary(kind, a, b)

    def truth(self, x):
        if is_tensor(x):
            return x if x.dtype == int1 else self.semantic.binary("ne", x, 0)
        return self.semantic.to_tensor(bool(x))

    def visit_BoolOp(self, node):
        kind = "and" if isinstance(node.op, ast.And) else "or"
        value = unwrap(self.visit(node.values[0]))
        for expr in node.values[1:]:
            if not is_tensor(value):
                # Python short-circuit on compile-time values.
                if (kind == "and" and not value) or (kind == "or" and value):
                    return value
                value = unwrap(self.visit(expr))
                continue
            value = self.logical(kind, value, unwrap(self.visit(expr)))
        return value

    def visit_IfExp(self, node):
        cond = unwrap(self.visit(node.test))
        if not is_tensor(cond):
            return self.visit(node.body) if cond else self.visit(node.orelse)
        if not cond.is_block() and conditional_expr.has_call(node):
            return conditional_expr.runtime_if_expression(self, node, cond)
        a = unwrap(self.visit(node.body))
        b = unwrap(self.visit(node.orelse))
        return self.semantic.where(cond, a, b)

    def visit_Attribute(self, node):
        obj = unwrap(self.visit(node.value))
        if is_tensor(obj) and node.attr in TENSOR_SEMANTIC_ATTRS:
            return TENSOR_SEMANTIC_ATTRS[node.attr](self.semantic, obj)
        # Attributes that build ops (a descriptor's `.shape`) name their rule on the class.
        rule = getattr(type(obj), "semantic_attrs", {}).get(node.attr) if is_tensor(obj) else None
        if rule is not None:
            return rule(self.semantic, obj)
        try:
            raw = getattr(obj, node.attr)
            value = unwrap(raw)
            if is_aggregate(obj) and getattr(type(value), "is_jit_function", False):
                return BoundJitMethod(value, obj)
            origin = self.external_origin(obj)
            if origin is not None:
                _, scope, root, path = origin
                return self.external(scope, root, path + (("attr", node.attr),), raw, node,
                                     value)
            return value
        except AttributeError as exc:
            text = str(exc) if missing_names.is_language_module(obj) else \
                f"{self.describe(obj)} has no attribute `{node.attr}`"
            raise self.error(node, text) from None

    def visit_Subscript(self, node):
        value = unwrap(self.visit(node.value))
        index = unwrap(self.visit(node.slice))
        if is_tensor(value):
            if not isinstance(index, tuple):
                index = (index,)
            return self.semantic.subscript(value, index)
        if is_tensor(index):
            raise self.error(node, "cannot index a compile-time sequence with a runtime value")
        origin = self.external_origin(value)
        if origin is not None:
            _, scope, root, path = origin
            if not guards.is_leaf(index):
                raise self.error(node, f"cannot index the global object "
                                       f"`{guards.path_text(root, path)}` with {index!r} in a "
                                       "kernel")
            raw = value[index]
            return self.external(scope, root, path + (("item", index),), raw, node, unwrap(raw))
        return unwrap(value[index])

    def visit_Slice(self, node):
        parts = [unwrap(self.visit(p)) if p is not None else None
                 for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_NamedExpr(self, node):
        value = self.visit(node.value)
        self.assign(node.target, value)
        return value

    def visit_Call(self, node):
        fn = unwrap(self.visit(node.func))
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                seq = unwrap(self.visit(a.value))
                if not isinstance(seq, (tuple, list)):
                    raise self.error(a, "`*` unpacking needs a compile-time tuple")
                args.extend(seq)
            else:
                args.append(unwrap(self.visit(a)))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw, "`**` unpacking is not supported in kernel calls")
            kwargs[kw.arg] = unwrap(self.visit(kw.value))
        saved = self.builder.loc
        self.builder.loc = self.location(node)
        try:
            return self.call(node, fn, args, kwargs)
        finally:
            self.builder.loc = saved

    def call(self, node, fn, args, kwargs):
        if getattr(fn, "is_jit_function", False):
            return self.call_function(fn, args, kwargs)
        if isinstance(fn, BoundJitMethod):
            return self.call_function(fn.fn, [fn.obj] + list(args), kwargs)
        if is_aggregate_class(fn):
            return fn(*args, **kwargs)  # fields may be runtime values
        if is_builtin(fn):
            return unwrap(fn(*args, _semantic=self.semantic, **kwargs))
        if fn is RangeSpec:
            return RangeSpec(*args, **kwargs)
        if fn is constexpr:
            return unwrap(constexpr(*args))
        runtime = [i for i, a in enumerate(list(args) + list(kwargs.values())) if
                   is_tensor(a) or (isinstance(a, (tuple, list)) and any(map(is_tensor, a)))]
        name = getattr(fn, "__name__", repr(fn))
        if fn is print:
            self.semantic.device_print("", list(args))
            return None
        if isinstance(fn, type) and (hasattr(fn, "static_range_marker") or
                                     hasattr(fn, "runtime_range_marker")):
            return fn(*args, **kwargs)
        # Methods of compile-time objects (`x.dtype.is_floating()`, `layout.to_linear_layout(
        # shape)`, `BLOCK.bit_length()`) run now, like any compile-time Python.
        bound_to_constant = (inspect.ismethod(fn) and not is_tensor(fn.__self__)) or (
            inspect.isbuiltin(fn) and isinstance(fn.__self__, (int, float, str, tuple)))
        if runtime and fn in (min, max) and args and not kwargs:
            return self.runtime_min_max(fn, args)
        if fn not in (isinstance, type, id):
            for i, a in enumerate(list(args) + list(kwargs.values())):
                origin = self.external_origin(a)
                if origin is not None:
                    text = guards.path_text(origin[2], origin[3])
                    raise self.error(node, f"cannot pass the global object `{text}` to `{name}` "
                                           "at compile time: the result could change without "
                                           "the compiled kernel knowing; read its attributes in "
                                           "the kernel, or pass the value as a tl.constexpr "
                                           "argument")
        if getattr(fn, CONSTEXPR_FUNCTION_FLAG, False) or _is_python_builtin(fn) or \
                isinstance(fn, type) or bound_to_constant:
            if runtime and fn not in (tuple, list, len, isinstance, getattr, hasattr, type,
                                      zip, enumerate, reversed):
                raise self.error(node, f"`{name}` runs at compile time and cannot take a "
                                       f"runtime value (argument #{runtime[0] + 1})")
            if fn is len and args and is_tensor(args[0]):
                return args[0].shape[0]
            return unwrap(fn(*args, **kwargs))
        raise self.error(node, f"cannot call `{name}` in a kernel: only jitted functions, "
                               "language builtins and functions marked constexpr_function can "
                               "be called")

    def runtime_min_max(self, fn, args):
        """Python's `min` / `max` over runtime values (Triton 3.6 allows them): folded left to
        right with the language's `minimum` / `maximum`, as Triton's code generator does."""
        values = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) \
            else list(args)
        name = "minimum" if fn is min else "maximum"
        result = values[0]
        for value in values[1:]:
            result = unwrap(self.semantic.call_language(name, result, value))
        return result


def _same_constant(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _is_python_builtin(fn) -> bool:
    return getattr(fn, "__module__", None) == "builtins" or fn in (
        tuple, list, int, float, bool, str, slice, zip, enumerate, reversed, range)
