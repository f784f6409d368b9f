"""Values from outside a kernel that tracing folds into it, and the checks that keep a cached
kernel from outliving them.

Tracing records a `Guard` for every value it reads from outside the kernel's arguments: a
global or closure variable (`SCALE = tl.constexpr(2)`, a tuple, a layout), an attribute or
item path rooted at a global object or at a module that is not part of the compiler
(`CFG.scale`, `mycfg.SCALE`, `sys.argv`). Modules of the compiler and of numpy/math,
functions, classes and jitted functions are not values and are not guarded; opaque objects
(instances of user classes) are not values either: what is guarded is each attribute a kernel
reads through them. Calling a method of such an object at compile time is refused (its result
depends on state no guard sees).

A compiled variant carries its guards: the cache key of the on-disk cache includes their
values (`metadata["globals"]`), and every launch that reuses a variant checks them (the fast
launcher only for kernels that have any), recompiling when one changed.
"""

from __future__ import annotations

import ast
import copy
import enum
import inspect
import sys
import types
from typing import List, Optional, Tuple

from shared_codegen.frontend.values import constexpr

MISSING = object()

# Modules whose attributes never change under a kernel: the compiler and its languages, and
# the numeric libraries kernels read constants from.
TRUSTED_MODULE_PREFIXES = ("shared_codegen", "tile", "gluon", "triton", "numpy", "math",
                           "builtins", "torch", "typing", "functools", "operator")


def is_trusted_module(mod) -> bool:
    name = getattr(mod, "__name__", "") or ""
    return any(name == p or name.startswith(p + ".") for p in TRUSTED_MODULE_PREFIXES)


_LEAF_TYPES = (type(None), bool, int, float, complex, str, bytes, range, slice)


def is_leaf(value) -> bool:
    """A value compared by value: numbers, strings, constexprs, containers of leaves, and
    objects of the compiler's own classes (dtypes, layouts)."""
    if isinstance(value, _LEAF_TYPES) or isinstance(value, (constexpr, enum.Enum)):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(is_leaf(v) for v in value)
    if isinstance(value, dict):
        return all(is_leaf(k) and is_leaf(v) for k, v in value.items())
    mod = type(value).__module__ or ""
    if mod == "numpy" or any(mod == p or mod.startswith(p + ".") for p in
                             ("shared_codegen", "tile", "gluon", "numpy")):
        return True
    return False


def is_transparent(value) -> bool:
    """Code, not data: functions, classes, jitted functions (never guarded)."""
    return (inspect.isroutine(value) or isinstance(value, type) or
            getattr(value, "is_jit_function", False) or
            getattr(value, "__sc_constexpr_function__", False) or
            callable(value) and not is_leaf(value) and
            (type(value).__module__ or "").split(".")[0] in TRUSTED_MODULE_PREFIXES)


def freeze(value):
    """A snapshot compared with `same`: constexprs by their value, containers deep-copied."""
    if isinstance(value, constexpr):
        return ("<constexpr>", freeze(value.value))
    if type(value).__name__ == "ndarray":
        return value.copy()
    if isinstance(value, (list, dict, set)):
        try:
            return copy.deepcopy(value)
        except Exception:
            return value
    return value


def same(current, snapshot) -> bool:
    if isinstance(current, constexpr):
        return type(snapshot) is tuple and len(snapshot) == 2 and \
            snapshot[0] == "<constexpr>" and same(current.value, snapshot[1])
    if type(snapshot).__name__ == "ndarray":
        import numpy as np

        return type(current) is type(snapshot) and current.dtype == snapshot.dtype and \
            current.shape == snapshot.shape and bool(np.array_equal(current, snapshot))
    if current is snapshot:
        return True
    try:
        return type(current) is type(snapshot) and bool(current == snapshot)
    except Exception:
        return False


def canonical(value) -> str:
    """The text the on-disk cache keys a value by (reprs of big arrays are abbreviated: their
    bytes are hashed instead)."""
    if isinstance(value, constexpr):
        return f"constexpr({canonical(value.value)})"
    if type(value).__name__ == "ndarray":
        import hashlib

        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return f"ndarray:{value.dtype}:{value.shape}:{digest}"
    return f"{type(value).__qualname__}:{value!r}"


def path_text(root: str, path: Tuple[tuple, ...]) -> str:
    text = root
    for kind, name in path:
        text += f".{name}" if kind == "attr" else f"[{name!r}]"
    return text


class Scope:
    """Where a root name lives: a module's globals or a function's closure cell."""

    def __init__(self, kind: str, module: str, qualname: str, namespace):
        self.kind, self.module, self.qualname = kind, module, qualname
        self.namespace = namespace  # dict (globals) or {name: cell}

    def describe(self) -> list:
        return [self.kind, self.module, self.qualname]

    def get(self, name):
        if self.kind == "globals":
            return self.namespace.get(name, MISSING)
        cell = self.namespace.get(name)
        if cell is None:
            return MISSING
        try:
            return cell.cell_contents
        except ValueError:
            return MISSING


def globals_scope(jit_fn) -> Scope:
    g = jit_fn.fn.__globals__
    return Scope("globals", g.get("__name__", "?"), "", g)


def closure_scope(jit_fn) -> Scope:
    fn = jit_fn.fn
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    return Scope("closure", fn.__module__, fn.__qualname__, cells)


class Guard:
    __slots__ = ("scope", "root", "path", "snapshot", "text", "where")

    def __init__(self, scope: Scope, root: str, path: Tuple[tuple, ...], value, where=""):
        self.scope, self.root, self.path = scope, root, tuple(path)
        self.snapshot = freeze(value)
        self.text = path_text(root, self.path)
        self.where = where

    def current(self):
        value = self.scope.get(self.root)
        try:
            for kind, name in self.path:
                if value is MISSING:
                    break
                value = getattr(value, name) if kind == "attr" else value[name]
        except Exception:
            return MISSING
        return value

    def ok(self) -> bool:
        return same(self.current(), self.snapshot)

    def serialize(self) -> list:
        return [self.scope.describe(), self.root,
                [[k, n if k == "attr" else repr(n)] for k, n in self.path],
                canonical(self.snapshot if not isinstance(self.snapshot, tuple) or
                          self.snapshot[:1] != ("<constexpr>",) else constexpr(
                              self.snapshot[1])), self.text]


def guards_ok(guards) -> bool:
    for g in guards:
        if not g.ok():
            return False
    return True


def make_check(guards):
    """A no-argument function that says whether every guard still holds (None if none).

    Generated once per variant, with each guard's lookup and comparison inline, because the
    launch fast path calls it on every launch of a kernel that has guards."""
    if not guards:
        return None
    env = {"_M": MISSING, "_CE": constexpr, "_same": same}
    lines = ["def check():", "    try:"]
    for i, g in enumerate(guards):
        if g.scope.kind == "globals":
            env[f"_n{i}"] = g.scope.namespace
            lines.append(f"        v = _n{i}.get({g.root!r}, _M)")
        else:
            cell = g.scope.namespace.get(g.root)
            if cell is None:
                return lambda: guards_ok(guards)
            env[f"_c{i}"] = cell
            lines.append(f"        v = _c{i}.cell_contents")
        for j, (kind, name) in enumerate(g.path):
            if kind == "attr" and name.isidentifier():
                lines.append(f"        v = v.{name}")
            else:
                env[f"_k{i}_{j}"] = name
                lines.append(f"        v = getattr(v, _k{i}_{j})" if kind == "attr" else
                             f"        v = v[_k{i}_{j}]")
        snap = g.snapshot
        if isinstance(snap, tuple) and len(snap) == 2 and snap[0] == "<constexpr>":
            lines.append(f"        if type(v) is not _CE: return False")
            lines.append(f"        v = v.value")
            snap = snap[1]
        env[f"_s{i}"] = snap
        env[f"_t{i}"] = type(snap)
        if isinstance(snap, _PLAIN):
            lines.append(f"        if not (v is _s{i} or (type(v) is _t{i} and v == _s{i})): "
                         "return False")
        else:
            lines.append(f"        if not (v is _s{i} or _same(v, _s{i})): return False")
    lines += ["        return True", "    except Exception:", "        return False"]
    exec(compile("\n".join(lines), "<guards>", "exec"), env)
    return env["check"]


# Snapshots whose `==` is a plain bool and that cannot change in place.
_PLAIN = (type(None), bool, int, float, complex, str, bytes, enum.Enum)


def key_text(guards) -> str:
    return repr(sorted((g.text, g.scope.describe(), canonical_of_guard(g)) for g in guards))


def canonical_of_guard(g) -> str:
    return g.serialize()[3]


def restore(entries, jit_fn) -> Optional[List[Guard]]:
    """Guards from a cache entry's metadata, resolved in this process against `jit_fn` and the
    jitted functions it calls; None when one cannot be resolved or its value changed (the
    caller then traces again)."""
    out = []
    namespaces = None
    for scope_desc, root, path, text_repr, _text in entries:
        kind, module, qualname = scope_desc
        if kind == "globals":
            if namespaces is None:
                # The globals of the kernel and of the jitted functions it calls, by module.
                namespaces = {}
                for fn in _functions(jit_fn):
                    g = fn.fn.__globals__
                    namespaces.setdefault(g.get("__name__"), g)
            g = namespaces.get(module)
            if g is None:
                mod = sys.modules.get(module)
                if mod is None:
                    return None
                g = mod.__dict__
            scope = Scope("globals", module, "", g)
        else:
            fn = _find_function(jit_fn, module, qualname)
            if fn is None:
                return None
            scope = closure_scope(fn)
        try:
            steps = tuple((k, n if k == "attr" else ast.literal_eval(n)) for k, n in path)
        except Exception:
            return None
        guard = Guard(scope, root, steps, None)
        value = guard.current()
        if value is MISSING or canonical(value) != text_repr:
            return None
        guard.snapshot = freeze(value)
        out.append(guard)
    return out


def _functions(jit_fn):
    seen = {id(jit_fn)}
    return [fn for fn in [jit_fn] + list(jit_fn._dependencies(seen))
            if getattr(fn, "is_jit_function", False)]


def _find_function(jit_fn, module, qualname):
    for fn in _functions(jit_fn):
        if fn.fn.__module__ == module and fn.fn.__qualname__ == qualname:
            return fn
    return None



class ExternalReads:
    """The code generator's side of the guards (a mixin of `CodeGenerator`, which provides
    `semantic`, `location` and `error`): every value read from outside the kernel's arguments
    is recorded as a `Guard` (a leaf) or as the origin of an opaque object whose attributes
    are read later."""

    def _reads(self):
        sem = self.semantic
        if getattr(sem, "external_reads", None) is None:
            sem.external_reads = {}     # (scope, root, path) -> Guard
            sem.external_origins = {}   # id(opaque object) -> (object, scope, root, path)
        return sem.external_reads, sem.external_origins

    def external(self, scope, root, path, raw, node, value):
        """Record `raw`, read from `root` + `path` in `scope`, as folded into the kernel;
        returns `value` (what the code generator uses)."""
        reads, origins = self._reads()
        if isinstance(raw, types.ModuleType):
            if not is_trusted_module(raw):
                origins[id(raw)] = (raw, scope, root, path)
            return value
        if isinstance(raw, type) and not is_trusted_module(
                sys.modules.get(raw.__module__)):
            # A user class: its class attributes (`Cfg.scale`) are guarded like an object's.
            origins[id(raw)] = (raw, scope, root, path)
            return value
        if is_transparent(raw) and not isinstance(raw, constexpr):
            if inspect.ismethod(raw) and id(raw.__self__) in origins and \
                    origins[id(raw.__self__)][0] is raw.__self__:
                text = path_text(root, path)
                raise self.error(node, f"cannot call `{text}` in a kernel: it is a method of a "
                                       "global object, so its result could change without the "
                                       "compiled kernel knowing; read the attributes it uses "
                                       "instead, or pass the value as a tl.constexpr argument")
            return value
        if is_leaf(raw):
            key = (id(scope.namespace), root, path)
            if key not in reads:
                loc = self.location(node)
                reads[key] = Guard(scope, root, path, raw, f"{loc.file}:{loc.line}")
            return value
        origins[id(raw)] = (raw, scope, root, path)
        return value

    def external_origin(self, obj):
        origins = getattr(self.semantic, "external_origins", None)
        if not origins:
            return None
        entry = origins.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        return entry

def guarded_module_attr(value) -> bool:
    return isinstance(value, types.ModuleType) and not is_trusted_module(value)
