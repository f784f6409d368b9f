"""The tile language's core builtins: program ids, creation, shapes, memory, atomics,
selection, reductions with a user combine function, hints, debugging and loop markers.

Names, parameters and defaults follow `triton.language` 3.6. Every builtin receives the
semantic object as `_semantic` from the code generator and delegates to it; the typing rules
live in `semantic.py`.
"""

from __future__ import annotations

import builtins as _py
import enum

from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import bfloat16, float32
from shared_codegen.ops.program.definition import NUM_PROGRAMS
from tile.language import _types as T


class PropagateNan(enum.IntEnum):
    """Whether `maximum`/`minimum`/`clamp` return NaN when an operand is NaN (ALL) or the
    other operand (NONE, the default), as Triton's `tl.PropagateNan`."""

    NONE = 0x0000
    ALL = 0xFFFF


# ---- programs ------------------------------------------------------------------------------

@builtin
def program_id(axis, _semantic=None):
    """The id of this program along `axis` (0, 1 or 2) of the launch grid, an int32."""
    return _semantic.program_id(axis)


@builtin
def num_programs(axis, _semantic=None):
    """The number of programs launched along `axis` (0, 1 or 2), an int32."""
    return _semantic.program_id(axis, name=NUM_PROGRAMS)


# ---- creation ------------------------------------------------------------------------------

@builtin
def arange(start, end, _semantic=None):
    """The int32 values [start, end); `end - start` must be a power of 2."""
    return _semantic.arange(start, end)


@builtin
def full(shape, value, dtype, _semantic=None):
    """A tensor of `shape` filled with `value`, of type `dtype`."""
    return _semantic.full(shape, value, dtype)


@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
    """`input` converted to `dtype` (reinterpreting its bits when `bitcast`)."""
    if bitcast:
        return _semantic.bitcast(input, dtype)
    return _semantic.cast(input, dtype, fp_downcast_rounding)


# ---- shapes --------------------------------------------------------------------------------

@builtin
def broadcast(input, other, _semantic=None):
    """Both tensors broadcast to their common shape."""
    return _semantic._broadcast_pair(_semantic._operand(input), _semantic._operand(other))


@builtin
def broadcast_to(input, *shape, _semantic=None):
    return _semantic.broadcast_to(input, T.flatten_args(shape))


@builtin
def reshape(input, *shape, can_reorder=False, _semantic=None):
    return _semantic.reshape(input, T.flatten_args(shape), can_reorder)


@builtin
def view(input, *shape, _semantic=None):
    """Deprecated in Triton: `reshape(..., can_reorder=True)`."""
    return _semantic.reshape(input, T.flatten_args(shape), True)


@builtin
def trans(input, *dims, _semantic=None):
    """Permute dimensions; without `dims`, swap the last two."""
    return _semantic.trans(input, T.flatten_args(dims) or None)


@builtin
def permute(input, *dims, _semantic=None):
    return _semantic.permute(input, T.flatten_args(dims))


@builtin
def expand_dims(input, axis, _semantic=None):
    """Insert size-1 axes at `axis` (an int or a sequence, positions in the result)."""
    return _semantic.expand_dims(input, axis)


# ---- memory --------------------------------------------------------------------------------

@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False, _semantic=None):
    """Load from a pointer or a tensor of pointers; masked-off lanes read `other` (or are
    undefined without it)."""
    return _semantic.load(pointer, mask, other, boundary_check, padding_option, cache_modifier,
                          eviction_policy, volatile)


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="",
          _semantic=None):
    """Store `value` (broadcast to the pointer's shape, cast to its element type)."""
    return _semantic.store(pointer, value, mask, boundary_check, cache_modifier,
                           eviction_policy)


def _atomic(op):
    def fn(pointer, val, mask=None, sem=None, scope=None, _semantic=None):
        return _semantic.atomic_rmw(op, pointer, val, mask, sem, scope)

    fn.__name__ = fn.__qualname__ = f"atomic_{op}"
    fn.__doc__ = (f"Atomic {op} at `pointer`; returns the old values. `sem`: acquire, release, "
                  "acq_rel (default) or relaxed; `scope`: gpu (default), cta or sys.")
    return builtin(fn)


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")
atomic_xchg = _atomic("xchg")


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None, _semantic=None):
    """Compare-and-swap: store `val` where memory equals `cmp`; returns the old values."""
    return _semantic.atomic_cas(pointer, cmp, val, sem, scope)


# ---- selection and elementwise min/max -------------------------------------------------------

@builtin
def where(condition, x, y, _semantic=None):
    """`x` where `condition` is true, else `y`; all three broadcast together."""
    return _semantic.where(condition, x, y)


def _promote_bf16(sem, x: tensor) -> tensor:
    # The hardware has no bf16 max/min/compare: Triton computes them in fp32.
    return sem.cast(x, float32) if x.dtype == bfloat16 else x


def _minmax(sem, op: str, x, y, propagate_nan):
    x = _promote_bf16(sem, sem._operand(x))
    y = _promote_bf16(sem, sem._operand(y))
    nan = PropagateNan(propagate_nan)
    x, y = sem.binary_operands(x, y, sym=f"tl.{op}imum")
    if T.is_ptr(x.dtype):
        raise TypeError(f"tl.{op}imum needs numbers, got {T.type_name(x.dtype)}")
    if x.dtype.is_floating() and nan == PropagateNan.ALL:
        return sem._arith(op + "imum", x, y)
    return sem._arith(op, x, y)


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE, _semantic=None):
    """Elementwise maximum. With NONE a NaN operand loses to a number; with ALL it wins."""
    return _minmax(_semantic, "max", x, y, propagate_nan)


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE, _semantic=None):
    return _minmax(_semantic, "min", x, y, propagate_nan)


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE, _semantic=None):
    """`x` limited to [min, max] (floats only, as in Triton)."""
    sem = _semantic
    x, lo, hi = (_promote_bf16(sem, sem._operand(v)) for v in (x, min, max))
    lo, hi = sem.binary_operands(lo, hi)
    x, lo = sem.binary_operands(x, lo)
    x, hi = sem.binary_operands(x, hi)
    if not x.dtype.is_floating():
        raise TypeError(f"tl.clamp supports only floating-point tensors, got {x.dtype}")
    lower = _minmax(sem, "max", x, lo, propagate_nan)
    return _minmax(sem, "min", lower, hi, propagate_nan)


# ---- reductions and scans with a user combine_fn -------------------------------------------

@builtin
def reduce(input, axis, combine_fn, keep_dims=False, _semantic=None):
    """Reduce `input` (a tensor or a tuple of tensors of one shape) along `axis` (None: all
    axes) with `combine_fn`, a @jit function of 2N scalars returning N."""
    single = isinstance(input, tensor)
    body = _semantic.combine_from_fn(combine_fn, "tl.reduce")
    out = _semantic.reduction(input, axis, body, keep_dims, what="tl.reduce")
    return out[0] if single else tuple(out)


@builtin
def associative_scan(input, axis, combine_fn, reverse=False, _semantic=None):
    """Inclusive scan of `input` (a tensor or tuple) along `axis` with `combine_fn`."""
    single = isinstance(input, tensor)
    body = _semantic.combine_from_fn(combine_fn, "tl.associative_scan")
    out = _semantic.scan(input, axis, body, reverse, what="tl.associative_scan")
    return out[0] if single else tuple(out)


# ---- compiler hints ------------------------------------------------------------------------

def _hint_values(values, fn: str):
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    out = []
    for i, v in enumerate(values):
        v = T.plain_number(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{fn}: values element {i} must be a compile-time int, got "
                            f"{T.describe(v)}")
        out.append(v)
    return out


def _hint(sem, x, values, attr: str, fn: str, rank_floor: int):
    from shared_codegen.ops.tensor.definition import HintOp

    x = sem._operand(x)
    values = _hint_values(values, fn)
    if _py.max(rank_floor, len(x.shape)) != len(values):
        raise ValueError(f"{fn}: {len(values)} value(s) given for a tensor of shape {x.shape}; "
                         "give one per dimension")
    return sem.make_tensor(HintOp.build(sem.builder, x.handle, **{attr: tuple(values)}))


@builtin
def multiple_of(input, values, _semantic=None):
    """Promise that the values of `input` are multiples of `values` (per dimension)."""
    return _hint(_semantic, input, values, "divisibility", "tl.multiple_of", 1)


@builtin
def max_contiguous(input, values, _semantic=None):
    """Promise that runs of `values` consecutive elements of `input` are contiguous."""
    return _hint(_semantic, input, values, "contiguity", "tl.max_contiguous", 0)


@builtin
def max_constancy(input, values, _semantic=None):
    """Promise that runs of `values` consecutive elements of `input` are equal."""
    return _hint(_semantic, input, values, "constancy", "tl.max_constancy", 0)


@builtin
def debug_barrier(_semantic=None):
    """Synchronize all threads of the program (`bar.sync`)."""
    from shared_codegen.ops.program.definition import BarrierOp

    BarrierOp.build(_semantic.builder)


# ---- debugging -----------------------------------------------------------------------------

class CompileTimeAssertionFailure(AssertionError):
    """`tl.static_assert` failed while the kernel was compiled."""


@builtin
def static_assert(cond, msg="", _semantic=None):
    """Fail compilation unless `cond` (a compile-time value) is true."""
    if isinstance(cond, tensor):
        raise TypeError("static_assert needs a compile-time condition (built from constexprs), "
                        f"got a runtime {T.describe(cond)}; use tl.device_assert")
    if not cond:
        raise CompileTimeAssertionFailure(f"static_assert failed: {msg}" if msg
                                          else "static_assert failed")


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False, _semantic=None):
    """Print compile-time values while the kernel is compiled."""
    print(*values, sep=sep, end=end, file=file, flush=flush)


@builtin
def assume(cond, _semantic=None):
    """Let the compiler assume `cond` holds (Triton emits `llvm.assume`); the interpreter
    checks it."""
    return _semantic.assume(cond)


@builtin
def device_print(prefix, *args, hex=False, _semantic=None):
    """Print `prefix` and runtime values from every program."""
    if not isinstance(prefix, str):
        raise TypeError(f"device_print's first argument must be a string, got "
                        f"{T.describe(prefix)}")
    if not prefix.isascii():
        raise ValueError(f"device_print's prefix must be ASCII, got {prefix!r}")
    return _semantic.device_print(prefix, list(args), hex)


@builtin
def device_assert(cond, msg="", mask=None, _semantic=None):
    """Fail the kernel where `cond` is false (and `mask`, if given, is true)."""
    return _semantic.device_assert(cond, msg, mask)


# ---- loop markers --------------------------------------------------------------------------

def _compile_time_int(value, what: str, cls: str):
    value = T.plain_number(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"tl.{cls}'s `{what}` must be a compile-time int (tl.constexpr), got "
                        f"{T.describe(value)}")
    return value


class static_range:
    """`for i in tl.static_range(start, end, step)`: unrolled at compile time. The code
    generator reads `.start`, `.end` and `.step` (plain ints)."""

    static_range_marker = True  # what the code generator recognises

    def __init__(self, arg1, arg2=None, step=None, _semantic=None):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start = _compile_time_int(arg1, "start", "static_range")
        self.end = _compile_time_int(arg2, "end", "static_range")
        self.step = _compile_time_int(1 if step is None else step, "step", "static_range")
        if self.step == 0:
            raise ValueError("tl.static_range's `step` must not be zero")

    def __iter__(self):
        raise RuntimeError("tl.static_range can only be used in a @jit function")

    def __repr__(self):
        return f"static_range({self.start}, {self.end}, {self.step})"


def _unroll_factor(factor):
    """tl.range's `loop_unroll_factor`: None or an int >= 1 (a constexpr of one); 1 and None
    leave the loop as it is."""
    value = factor.value if hasattr(factor, "value") else factor
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"tl.range loop_unroll_factor must be a compile-time int >= 1, got "
                         f"{value!r}")
    return value


class range:
    """`for i in tl.range(start, end, step, num_stages=...)`: a runtime loop. `start`, `end`
    and `step` may be ints or scalar tensors; the options are hints for the pipeliner."""

    runtime_range_marker = True  # what the code generator recognises

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False,
                 disable_licm=False, _semantic=None):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start = arg1
        self.end = arg2
        self.step = 1 if step is None else step
        if isinstance(self.step, int) and self.step == 0:
            raise ValueError("tl.range's `step` must not be zero")
        stages = num_stages.value if hasattr(num_stages, "value") else num_stages
        if stages is not None and (type(stages) is not int or stages < 0):
            raise ValueError(f"tl.range num_stages must be an int >= 0, got {stages!r}")
        self.num_stages = stages
        self.loop_unroll_factor = _unroll_factor(loop_unroll_factor)
        self.disallow_acc_multi_buffer = disallow_acc_multi_buffer
        self.flatten = flatten
        self.warp_specialize = warp_specialize
        self.disable_licm = disable_licm
        # num_stages: the loop's software-pipelining depth (tile/passes/pipelining.py);
        # loop_unroll_factor: copies of the body per iteration (tile/passes/loop_unroll.py);
        # flatten: the nest becomes one loop (tile/passes/loop_flatten.py, which warns about
        # the nests it leaves as they are); warp_specialize: a TMA producer partition and a
        # wgmma consumer on sm_90a (tile/passes/warp_specialize.py, which warns about the
        # loops it leaves as they are).

    def __iter__(self):
        raise RuntimeError("tl.range can only be used in a @jit function")

    def __repr__(self):
        return f"range({self.start!r}, {self.end!r}, {self.step!r})"



# Triton 3.6 kernels import aggregates as `from triton.language.core import _aggregate`.
from shared_codegen.frontend.aggregates import aggregate as _aggregate  # noqa: E402,F401
