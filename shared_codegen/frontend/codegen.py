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

from shared_codegen.frontend import (aggregates, conditional_expr, guards, missing_names, unused_results)
from shared_codegen.frontend.aggregates import BoundJitMethod, is_aggregate, is_aggregate_class
from shared_codegen.frontend.control_flow import ControlFlow, RangeSpec
from shared_codegen.frontend.early_return import fold_early_returns
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.frontend.values import (TENSOR_SEMANTIC_ATTRS, constexpr, is_builtin, is_tensor,
                                            unwrap)
from shared_codegen.ir.core import Location
from shared_codegen.ir.types import int1


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


class CodeGenerator(guards.ExternalReads, ControlFlow, ast.NodeVisitor):
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
            if node.attr == "value" and _is_compile_time_value(obj):
                # Triton wraps compile-time values in `constexpr`, whose `.value` is the
                # value itself (upstream's tutorial 06 reads `tmem_block.value`); ours are
                # kept unwrapped, so `.value` is the identity on them.
                return obj
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


def _is_python_builtin(fn) -> bool:
    return getattr(fn, "__module__", None) == "builtins" or fn in (
        tuple, list, int, float, bool, str, slice, zip, enumerate, reversed, range)


def _is_compile_time_value(obj) -> bool:
    """A value Triton would hold as a `constexpr` (not a tensor, aggregate or module)."""
    import types
    return not (is_tensor(obj) or is_aggregate(obj) or isinstance(obj, types.ModuleType))
