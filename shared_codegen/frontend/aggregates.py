"""`aggregate` classes (Triton's `@aggregate`, `triton.language.core._aggregate` in 3.6 and
`gluon.aggregate` in 3.8): plain Python classes whose fields hold tensors, descriptors and
compile-time values, built and used inside kernels to group state:

    @gluon.aggregate
    class Counter:
        index: gl.tensor
        phase: gl.tensor

        @gluon.jit
        def next(self, NUM: gl.constexpr):
            ...
            return Counter(index, phase)

The code generator builds them from runtime values (an ordinary class may only be called on
compile-time ones), binds their `@jit` methods to the instance, and passes them to jitted
functions by reference. An aggregate reassigned inside a runtime loop is carried as its
runtime fields, and one reassigned in a branch of a runtime `if` is yielded the same way
(see below).
"""

from __future__ import annotations

import inspect

__all__ = ["aggregate", "is_aggregate", "BoundJitMethod"]

AGGREGATE_FLAG = "__sc_aggregate__"


def aggregate(cls):
    """Mark `cls` as an aggregate. Without an `__init__` of its own, it gets one that takes
    the annotated fields in order (positionally or by name)."""
    if "__init__" not in cls.__dict__:
        fields = list(inspect.get_annotations(cls))

        def __init__(self, *args, **kwargs):
            if len(args) > len(fields):
                raise TypeError(f"{cls.__name__}() takes {len(fields)} fields but "
                                f"{len(args)} were given")
            values = dict(zip(fields, args))
            for name, value in kwargs.items():
                if name not in fields or name in values:
                    raise TypeError(f"{cls.__name__}() got an unexpected or repeated field "
                                    f"{name!r}")
                values[name] = value
            missing = [f for f in fields if f not in values]
            if missing:
                raise TypeError(f"{cls.__name__}() is missing fields {missing}")
            for name, value in values.items():
                setattr(self, name, value)

        cls.__init__ = __init__
    setattr(cls, AGGREGATE_FLAG, True)
    return cls


def is_aggregate(value) -> bool:
    """An aggregate instance (not the class)."""
    return getattr(type(value), AGGREGATE_FLAG, False) and not isinstance(value, type)


def is_aggregate_class(value) -> bool:
    return isinstance(value, type) and getattr(value, AGGREGATE_FLAG, False)


class BoundJitMethod:
    """`obj.method` where `method` is a `@jit` function of an aggregate: calling it traces
    the function with `obj` as its first argument."""

    def __init__(self, fn, obj):
        self.fn, self.obj = fn, obj
        self.__name__ = getattr(fn, "__name__", "method")


def operator_method(lhs, py_operator):
    """The `@jit` dunder (`__add__` for `operator.add`, ...) an aggregate `lhs` defines for a
    binary operator, or None: `x + y` on aggregates calls it, as in Triton."""
    if not is_aggregate(lhs):
        return None
    method = getattr(type(lhs), f"__{py_operator.__name__}__", None)
    return method if getattr(method, "is_jit_function", False) else None


# ---- carrying aggregates through runtime loops ------------------------------------------------
# A loop-carried aggregate travels as its runtime fields (tensors and numbers not annotated
# constexpr), each a loop-carried value of its own; its other fields (constexprs, shared
# memory, descriptors) must stay the same objects through the loop.

def _is_constexpr_field(cls, name) -> bool:
    annotation = inspect.get_annotations(cls).get(name)
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return str(text).split(".")[-1] == "constexpr"


def leaves(obj, is_leaf, prefix=()) -> list:
    """[(path, value)] of the runtime fields of aggregate `obj`, nested aggregates included."""
    out = []
    for name, value in vars(obj).items():
        if is_aggregate(value):
            out += leaves(value, is_leaf, prefix + (name,))
        elif not _is_constexpr_field(type(obj), name) and is_leaf(value):
            out.append((prefix + (name,), value))
    return out


def with_leaves(obj, values: dict):
    """A copy of `obj` whose fields at the paths of `values` hold the new values."""
    new = object.__new__(type(obj))
    for name, value in vars(obj).items():
        if is_aggregate(value):
            inner = {p[1:]: v for p, v in values.items() if p[0] == name}
            value = with_leaves(value, inner) if inner else value
        elif (name,) in values:
            value = values[(name,)]
        object.__setattr__(new, name, value)
    return new


def same_structure(a, b, is_leaf) -> str:
    """"" when `b` can continue `a` around a loop (same class, same fields, same non-runtime
    field objects); else what differs."""
    if type(a) is not type(b):
        return f"it becomes a {type(b).__name__}"
    if list(vars(a)) != list(vars(b)):
        return "its fields change"
    for name, x in vars(a).items():
        y = getattr(b, name)
        if is_aggregate(x):
            why = same_structure(x, y, is_leaf)
            if why:
                return why
        elif (_is_constexpr_field(type(a), name) or not is_leaf(x)) and not _same(x, y):
            return f"its field `{name}` changes from {x!r} to {y!r}"
    if len(leaves(a, is_leaf)) != len(leaves(b, is_leaf)):
        return "a runtime field stops being a runtime value"
    return ""


def _same(x, y) -> bool:
    if x is y:
        return True
    if hasattr(x, "handle") or hasattr(y, "handle"):
        return getattr(x, "handle", None) is getattr(y, "handle", None)
    try:
        return bool(x == y)
    except Exception:
        return False


# The code generator's side: a table {name: (template, paths, leaf names)} on the generator.

def _table(codegen) -> dict:
    return codegen.__dict__.setdefault("_carried_aggregates", {})


def explode(codegen, name, value, is_leaf) -> list:
    """Put the runtime fields of aggregate variable `name` in scope as variables of their own
    (`name.field`), to be carried by the loop; returns their names."""
    found = leaves(value, is_leaf)
    leaf_names = [name + "." + ".".join(path) for path, _ in found]
    for leaf, (_, v) in zip(leaf_names, found):
        codegen.scope[leaf] = v
    _table(codegen)[name] = (value, [path for path, _ in found], leaf_names)
    return leaf_names


def rebuild(codegen, names) -> None:
    """Re-create the aggregates whose fields `names` carries from those fields' values."""
    for name, (template, paths, leaf_names) in _table(codegen).items():
        if leaf_names and leaf_names[0] in names:
            codegen.scope[name] = with_leaves(template, {
                path: codegen.scope[leaf] for path, leaf in zip(paths, leaf_names)})


def explode_again(codegen, node, names, is_leaf) -> None:
    """At the end of a loop body: the aggregates' new field values become the yielded ones."""
    for name, (template, paths, leaf_names) in _table(codegen).items():
        if not (leaf_names and leaf_names[0] in names):
            continue
        value = codegen.scope.get(name)
        why = same_structure(template, value, is_leaf) if is_aggregate(value) else \
            "it is no longer an aggregate"
        if why:
            raise codegen.error(node, f"aggregate `{name}` cannot be carried through the loop: "
                                      f"{why}")
        for leaf, (_, v) in zip(leaf_names, leaves(value, is_leaf)):
            codegen.scope[leaf] = v


def split_branches(codegen, node, name, a, b, scopes, is_leaf) -> list:
    """An aggregate assigned in a branch of a runtime `if`: its runtime fields become values
    the `if` yields (`name.field`), the other fields must be the same in both branches."""
    why = same_structure(a, b, is_leaf) if is_aggregate(a) and is_aggregate(b) else \
        "only one branch gives it an aggregate"
    if why:
        raise codegen.error(node, f"aggregate `{name}` differs between the branches of a "
                                  f"runtime `if`: {why}")
    found = leaves(a, is_leaf)
    leaf_names = [name + "." + ".".join(path) for path, _ in found]
    for leaf, (_, va), (_, vb) in zip(leaf_names, found, leaves(b, is_leaf)):
        scopes[0][leaf], scopes[1][leaf] = va, vb
    _table(codegen)[name] = (a, [path for path, _ in found], leaf_names)
    return leaf_names
