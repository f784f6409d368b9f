"""What kernel code holds while it is being traced: compile-time values and tensors.

- Compile-time values are plain Python objects (ints, floats, bools, dtypes, None, strings,
  tuples of them). `constexpr` exists for annotations and explicit wrapping, and is unwrapped
  the moment the code generator sees it: below the frontend boundary there are no constexpr
  objects.
- `tensor` wraps one IR value (a scalar is a tensor of shape []). Its methods and operators
  are builtins: the code generator passes them the language's semantic object, which builds
  the ops. The same class serves both languages; only the semantic object differs.
"""

from __future__ import annotations

import math

import functools
import operator
from typing import Any, List

from shared_codegen.ir.types import IRType, PointerType, TensorType, scalar_of


class constexpr:
    """A compile-time value. As an annotation (`BLOCK: tl.constexpr`), marks a parameter that
    is specialized on its value."""

    def __init__(self, value):
        while isinstance(value, constexpr):
            value = value.value
        self.value = value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __bool__(self):
        return bool(self.value)

    def __index__(self):
        return self.value.__index__()

    def __hash__(self):
        return hash(self.value)

    def __eq__(self, other):
        return self.value == unwrap(other)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)


def _constexpr_binary(op, reflected=False):
    def method(self, other):
        if isinstance(other, tensor):
            return NotImplemented  # runtime arithmetic is the code generator's
        a, b = (unwrap(other), self.value) if reflected else (self.value, unwrap(other))
        return constexpr(op(a, b))
    return method


def _constexpr_unary(op):
    return lambda self: constexpr(op(self.value))


# Host code computes with constexprs as Triton 3.6 allows (`BLOCK * 2`, `-x`, `x < 4`); the
# result is again a constexpr, so it can be passed on to a kernel or a layout constructor.
for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("and", operator.and_),
                   ("or", operator.or_), ("xor", operator.xor), ("lshift", operator.lshift),
                   ("rshift", operator.rshift)):
    setattr(constexpr, f"__{_name}__", _constexpr_binary(_op))
    setattr(constexpr, f"__r{_name}__", _constexpr_binary(_op, reflected=True))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                   ("ge", operator.ge), ("ne", operator.ne)):
    setattr(constexpr, f"__{_name}__", _constexpr_binary(_op))
for _name, _op in (("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert),
                   ("abs", abs)):
    setattr(constexpr, f"__{_name}__", _constexpr_unary(_op))
constexpr.__int__ = lambda self: int(self.value)
constexpr.__float__ = lambda self: float(self.value)
constexpr.__iter__ = lambda self: iter(self.value)
constexpr.__getitem__ = lambda self, index: self.value[unwrap(index)]


def unwrap(x):
    """Plain Python value of a constexpr (recursively inside tuples and lists); others
    unchanged. The code generator applies it to every value it reads and to every call
    argument, so builtins receive plain values and never call it themselves. A sequence keeps
    its identity unless it held a constexpr (kernels may append to a compile-time list)."""
    if isinstance(x, constexpr):
        return x.value
    kind = type(x)
    if kind is tuple or kind is list:
        plain = [unwrap(v) for v in x]
        if all(a is b for a, b in zip(plain, x)):
            return x
        return plain if kind is list else tuple(plain)
    return x


BUILTIN_FLAG = "__sc_builtin__"


def builtin(fn):
    """Mark a language function as a builtin: callable only inside a kernel, where the code
    generator passes `_semantic` (the language's semantic object)."""

    @functools.wraps(fn)
    def wrapper(*args, _semantic=None, **kwargs):
        if _semantic is None:
            raise RuntimeError(
                f"{fn.__name__}() is a kernel builtin: call it inside a @jit function (or run "
                "the kernel, which traces it)")
        return fn(*args, _semantic=_semantic, **kwargs)

    setattr(wrapper, BUILTIN_FLAG, True)
    return wrapper


def is_builtin(fn) -> bool:
    return getattr(fn, BUILTIN_FLAG, False)


class tensor:
    """A traced tensor or scalar: an IR value plus its type."""

    def __init__(self, handle, type: IRType):
        self.handle = handle
        self.type = type

    # ---- queries that need no builder ---------------------------------------------------
    @property
    def dtype(self):
        return scalar_of(self.type)

    @property
    def shape(self) -> List[int]:
        return list(self.type.shape) if isinstance(self.type, TensorType) else []

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def layout(self):
        return self.type.layout if isinstance(self.type, TensorType) else None

    def is_block(self) -> bool:
        return isinstance(self.type, TensorType)

    def is_ptr(self) -> bool:
        return isinstance(self.dtype, PointerType)

    def __repr__(self):
        return f"tensor({self.type})"

    def __bool__(self):
        raise TypeError(
            "a runtime tensor has no compile-time truth value; use it in an `if` at the top "
            "level of a statement (which becomes a runtime branch) or mark the value "
            "tl.constexpr")

    def __iter__(self):
        raise TypeError("cannot iterate over a runtime tensor")

    # ---- methods (builtins) -------------------------------------------------------------
    @builtin
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
        if bitcast:
            return _semantic.bitcast(self, dtype)
        return _semantic.cast(self, dtype, fp_downcast_rounding)

    @builtin
    def reshape(self, *shape, can_reorder=False, _semantic=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _semantic.reshape(self, list(shape), can_reorder)

    @builtin
    def view(self, *shape, _semantic=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _semantic.reshape(self, list(shape), True)

    @builtin
    def trans(self, *dims, _semantic=None):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return _semantic.trans(self, list(dims) or None)

    @builtin
    def permute(self, *dims, _semantic=None):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return _semantic.trans(self, list(dims))

    @builtin
    def expand_dims(self, axis, _semantic=None):
        return _semantic.expand_dims(self, axis)

    @builtin
    def broadcast_to(self, *shape, _semantic=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _semantic.broadcast_to(self, list(shape))

    def _reduction(name):
        def method(self, axis=None, keep_dims=False, _semantic=None, **kwargs):
            return _semantic.call_language(name, self, axis=axis, keep_dims=keep_dims, **kwargs)

        method.__name__ = name
        return builtin(method)

    sum = _reduction("sum")
    max = _reduction("max")
    min = _reduction("min")
    argmax = _reduction("argmax")
    argmin = _reduction("argmin")
    del _reduction

    @builtin
    def item(self, _semantic=None):
        """A one-element tensor as a scalar (Triton 3.6's `tensor.item()`)."""
        return _semantic._unsplat(self)

    @builtin
    def cumsum(self, axis=0, reverse=False, _semantic=None):
        return _semantic.call_language("cumsum", self, axis=axis, reverse=reverse)

    @builtin
    def cumprod(self, axis=0, reverse=False, _semantic=None):
        return _semantic.call_language("cumprod", self, axis=axis, reverse=reverse)

    def __getattr__(self, name):
        # Triton exposes most language functions as tensor methods too (`x.exp()`,
        # `x.store(...)`); forward any public name to the language with `self` first.
        if name.startswith("_"):
            raise AttributeError(name)

        def method(*args, _semantic=None, **kwargs):
            return _semantic.call_language(name, self, *args, **kwargs)

        method.__name__ = name
        return builtin(method)

    @builtin
    def reduce(self, axis, combine_fn, keep_dims=False, _semantic=None):
        return _semantic.call_language("reduce", self, axis, combine_fn, keep_dims=keep_dims)

    @builtin
    def associative_scan(self, axis, combine_fn, reverse=False, _semantic=None):
        return _semantic.call_language("associative_scan", self, axis, combine_fn,
                                       reverse=reverse)

    @property
    def T(self):
        # `x.T` needs the builder; the code generator special-cases it via `_transpose_attr`.
        raise AttributeError("T")


# Attribute accesses on tensors that need the semantic object (handled by the generator).
TENSOR_SEMANTIC_ATTRS = {"T": lambda sem, t: sem.trans(t, None)}


def is_tensor(x: Any) -> bool:
    return isinstance(x, tensor)


# IR type class -> the frontend class that wraps values of it (default `tensor`). Languages
# register richer handles, e.g. Gluon's shared-memory descriptors, so that values rebuilt by
# the code generator (loop-carried values, branch results) keep their methods.
VALUE_CLASSES: dict = {}


def wrap(handle, ty=None):
    ty = handle.type if ty is None else ty
    return VALUE_CLASSES.get(type(ty), tensor)(handle, ty)
