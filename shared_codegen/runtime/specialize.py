"""Per-argument specialization keys, computed on every launch to pick the compiled variant.

Each runtime argument becomes a small tuple `(type, hint)`, as Triton does it:

    tensor / array     ("*fp16", "D")   pointer to fp16, address 16-byte aligned ("" if not)
    int                ("i32", "1")     fits in int32 and equals 1 (compiled as the constant 1)
                       ("i64", "D")     fits in int64 (not int32) and is divisible by 16
                       ("u64", "")      beyond int64, below 2**64
    bool               ("i1", "")
    float              ("fp32", "")
    None               ("constexpr", None)
    constexpr param    ("constexpr", value)

Arguments in `do_not_specialize` keep their type but always get hint "". The hint letters
are what the compiler turns into divisibility / constancy facts for axis analysis.

Speed matters (this is on the launch path): one dict lookup `type(arg) -> handler` per argument,
handlers return preallocated tuples where they can. New argument types (tensor descriptors, ...)
register a handler with `register_handler`.
"""

from __future__ import annotations

import numbers
import sys
from functools import lru_cache

from shared_codegen.errors import ArgumentError

NO_HINT = ""
DIVISIBLE_BY_16 = "D"
EQUAL_TO_ONE = "1"
ALIGNMENT = 16

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1

# Preallocated keys: the common cases allocate nothing.
_INT_KEYS = {
    (name, hint): (name, hint)
    for name in ("i32", "i64", "u64") for hint in (NO_HINT, DIVISIBLE_BY_16, EQUAL_TO_ONE)
}
_BOOL_KEY = ("i1", NO_HINT)
_FLOAT_KEY = ("fp32", NO_HINT)
_NONE_KEY = ("constexpr", None)

_TORCH_DTYPE_NAMES = {
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}
# __cuda_array_interface__ typestr, without the byte-order character.
_TYPESTR_NAMES = {
    "f2": "fp16", "f4": "fp32", "f8": "fp64", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "b1": "i1",
}


class SpecializationError(ArgumentError):
    """An argument cannot be passed to a kernel (a TypeError, as before)."""


def int_type_name(value: int) -> str:
    """The narrowest kernel integer type holding `value`: i32, i64 or u64."""
    if _INT32_MIN <= value <= _INT32_MAX:
        return "i32"
    if _INT64_MIN <= value <= _INT64_MAX:
        return "i64"
    if 0 <= value <= _UINT64_MAX:
        return "u64"
    raise SpecializationError(f"integer argument {value} does not fit in 64 bits")


def _key_of_int(value) -> tuple:
    name = int_type_name(value)
    if value == 1:
        return _INT_KEYS[name, EQUAL_TO_ONE]
    return _INT_KEYS[name, DIVISIBLE_BY_16 if value % ALIGNMENT == 0 else NO_HINT]


def _key_of_integral(value) -> tuple:  # numpy integers and other numbers.Integral
    return _key_of_int(int(value))


def _key_of_bool(value) -> tuple:
    return _BOOL_KEY


def _key_of_float(value) -> tuple:
    return _FLOAT_KEY


def _key_of_none(value) -> tuple:
    return _NONE_KEY


@lru_cache(maxsize=None)
def _pointer_type_name(dtype_name: str) -> str:
    return "*" + dtype_name


@lru_cache(maxsize=None)
def torch_dtype_name(dtype) -> str:
    """Our name ('fp16', 'i32', ...) for a torch dtype."""
    short = str(dtype).rpartition(".")[2]
    try:
        return _TORCH_DTYPE_NAMES[short]
    except KeyError:
        raise SpecializationError(f"torch dtype {dtype} is not supported by kernels") from None


def _key_of_torch_tensor(tensor) -> tuple:
    aligned = tensor.data_ptr() % ALIGNMENT == 0
    return (_pointer_type_name(torch_dtype_name(tensor.dtype)),
            DIVISIBLE_BY_16 if aligned else NO_HINT)


def _key_of_cuda_array(array) -> tuple:
    interface = array.__cuda_array_interface__
    typestr = interface["typestr"][1:]
    try:
        name = _TYPESTR_NAMES[typestr]
    except KeyError:
        raise SpecializationError(f"__cuda_array_interface__ typestr {interface['typestr']!r} "
                                  f"is not supported by kernels") from None
    aligned = interface["data"][0] % ALIGNMENT == 0
    return (_pointer_type_name(name), DIVISIBLE_BY_16 if aligned else NO_HINT)


_HANDLERS: dict[type, object] = {
    int: _key_of_int,
    bool: _key_of_bool,
    float: _key_of_float,
    type(None): _key_of_none,
}


# Types whose launch fast-path key (`frontend/fastpath.py`) is their full specialization key,
# because two arguments of the type can compile differently (tensor descriptors: block shape,
# dtype, layout).
FAST_KEYED: dict[type, object] = {}


def register_handler(kind: type, handler, fast_key: bool = False) -> None:
    """Teach the specializer a new argument type: `handler(arg) -> hashable tuple`. With
    `fast_key`, the launch fast path keys such arguments by `handler(arg)` too (otherwise by
    their type alone)."""
    _HANDLERS[kind] = handler
    if fast_key:
        FAST_KEYED[kind] = handler


def _resolve_handler(arg):
    # First sight of a type: classify it once, then it is a dict hit forever.
    kind = type(arg)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arg, torch.Tensor):
        handler = _key_of_torch_tensor
    elif hasattr(arg, "__cuda_array_interface__"):
        handler = _key_of_cuda_array
    elif isinstance(arg, bool):
        handler = _key_of_bool
    elif isinstance(arg, numbers.Integral):
        handler = _key_of_integral
    elif isinstance(arg, numbers.Real):
        handler = _key_of_float
    else:
        raise SpecializationError(f"cannot pass {describe_arg(arg)} to a kernel: expected a "
                                  f"tensor, an int, a float, a bool or None")
    _HANDLERS[kind] = handler
    return handler


def key_of(arg) -> tuple:
    """The specialization of one runtime argument."""
    handler = _HANDLERS.get(type(arg))
    if handler is None:
        handler = _resolve_handler(arg)
    return handler(arg)


def _hashable_constexpr(value):
    try:
        hash(value)
        return value
    except TypeError:
        if isinstance(value, list):
            return tuple(_hashable_constexpr(item) for item in value)
        raise SpecializationError(f"a constexpr value must be hashable (an int, float, bool, "
                                  f"str, None, dtype or layout), got "
                                  f"{type(value).__module__}.{type(value).__qualname__}"
                                  ) from None


class Specializer:
    """Builds keys for one kernel signature; the per-position roles are computed once."""

    _SPECIALIZE, _CONSTEXPR, _TYPE_ONLY = 0, 1, 2

    def __init__(self, constexpr_positions=(), do_not_specialize=()):
        self.constexpr_positions = frozenset(constexpr_positions)
        self.do_not_specialize = frozenset(do_not_specialize)
        self._plain = not self.constexpr_positions and not self.do_not_specialize

    def key(self, args) -> tuple:
        handlers = _HANDLERS
        if self._plain:
            return tuple([(handlers.get(type(arg)) or _resolve_handler(arg))(arg)
                          for arg in args])
        key = []
        for position, arg in enumerate(args):
            if position in self.constexpr_positions:
                key.append(("constexpr", _hashable_constexpr(arg)))
                continue
            entry = (handlers.get(type(arg)) or _resolve_handler(arg))(arg)
            if position in self.do_not_specialize and entry[0] != "constexpr":
                entry = (entry[0], NO_HINT)
            key.append(entry)
        return tuple(key)


def parameter_kinds(key: tuple) -> tuple:
    """The launcher parameter kinds of the runtime (non-constexpr) arguments of a key:
    pointers become 'ptr', scalars keep their type name. Arguments equal to 1 stay parameters
    (the compiled code may ignore them), so the launch path never filters arguments by value."""
    return tuple(getattr(name, "param_kind", None) or ("ptr" if name.startswith("*") else name)
                 for name, _hint in key if name != "constexpr")


def describe_arg(arg) -> str:
    """A short human description of an argument for error messages."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arg, torch.Tensor):
        return (f"torch.Tensor(dtype={arg.dtype}, shape={tuple(arg.shape)}, "
                f"device={arg.device}, address=0x{arg.data_ptr():x})")
    if hasattr(arg, "__cuda_array_interface__"):
        interface = arg.__cuda_array_interface__
        return (f"{type(arg).__name__}(typestr={interface.get('typestr')!r}, "
                f"shape={tuple(interface.get('shape', ()))}, address=0x{interface['data'][0]:x})")
    if isinstance(arg, bool) or arg is None:
        return repr(arg)
    if isinstance(arg, int):
        try:
            return f"int {arg} ({int_type_name(arg)})"
        except SpecializationError:
            return f"int {arg} (too large)"
    if isinstance(arg, float):
        return f"float {arg!r}"
    text = repr(arg)
    return f"{type(arg).__name__} {text[:60] + '...' if len(text) > 60 else text}"
