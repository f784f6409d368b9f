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
functions by reference. What is not there yet: an aggregate whose variable is reassigned
inside a runtime loop or in a branch of a runtime `if` (its tensors would have to be carried
through the region); the code generator refuses that by name.
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
