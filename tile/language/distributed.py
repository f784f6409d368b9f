"""`tl.distributed` (and `gl.distributed`): kernels that read and write other GPUs' memory.

Names and parameters follow Iris (`iris.load/store/get/put/atomic_*`, with the peers' heap
bases passed as `heap_bases`) for data movement and atomics, and Triton-distributed
(`symm_at`, `notify`, `wait`, `consume_token`) for signals. In every call data flows from
`from_rank` to `to_rank`, and the pointer given is an address in the calling rank's heap
(the calling rank is `to_rank` for `load` and `get`, `from_rank` for the others).

    data = distributed.load(x_ptr + offs, rank, peer, heap_bases)        # peer's x
    distributed.store(y_ptr + offs, data, rank, peer, heap_bases)        # into peer's y
    distributed.notify(sig_ptr + rank, peer, rank, signal_pad_bases)     # peer's flag = 1
    token = distributed.wait(sig_ptr + src)                              # own flag == 1
    x_ptr = distributed.consume_token(x_ptr, token)                      # loads after wait

Atomics take `sem` and `scope` explicitly (no defaults: a cross-GPU protocol must say which
order it needs). Lowering and interpreter rules: shared_codegen/ops/distributed/;
docs/distributed.md walks through a protocol.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ir.types import int32, int64
from shared_codegen.ops.distributed.definition import (FENCE_SEMANTICS, LOAD_SEMANTICS, SCOPES,
                                                       SIGNAL_OPS, SIGNAL_SEMANTICS,
                                                       SIGNAL_TYPE, STORE_SEMANTICS,
                                                       WAIT_COMPARISONS, ConsumeTokenOp,
                                                       FenceOp, OrderedLoadOp, OrderedStoreOp,
                                                       SignalOp, SymmAtOp, WaitOp)
from shared_codegen.ops.program.definition import BarrierOp
from tile.language import _types as T

_ATOMIC_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")


def _choice(value, allowed, what: str, fn: str, required: bool = False) -> str:
    if value is None and required:
        raise ValueError(f"distributed.{fn}: `{what}` must be given explicitly, one of "
                         + ", ".join(repr(a) for a in allowed))
    if value not in allowed:
        raise ValueError(f"distributed.{fn}: `{what}` must be one of "
                         f"{', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value


def _rank(sem, value, what: str, fn: str) -> tensor:
    value = sem.to_tensor(value) if not isinstance(value, tensor) else value
    if value.is_block() or value.dtype not in (int32, int64):
        raise TypeError(f"distributed.{fn}: `{what}` must be a scalar int32 or int64, got "
                        f"{T.describe(value)}")
    return value


def _bases(sem, heap_bases, what: str, fn: str) -> tensor:
    if not isinstance(heap_bases, tensor) or heap_bases.is_block() or \
            not heap_bases.is_ptr() or heap_bases.dtype.element != int64:
        raise TypeError(f"distributed.{fn}: `{what}` must be a pointer to the int64 table of "
                        f"the ranks' base addresses (RankContext.{what}), got "
                        f"{T.describe(heap_bases)}")
    return heap_bases


def _translate(sem, pointer, from_rank, to_rank, heap_bases, fn, bases_name="heap_bases"):
    pointer = sem._pointer(pointer, f"distributed.{fn}")
    from_rank = _rank(sem, from_rank, "from_rank", fn)
    to_rank = _rank(sem, to_rank, "to_rank", fn)
    heap_bases = _bases(sem, heap_bases, bases_name, fn)
    return sem.make_tensor(SymmAtOp.build(sem.builder, pointer.handle, heap_bases.handle,
                                          from_rank.handle, to_rank.handle))


@builtin
def symm_at(pointer, to_rank, from_rank, heap_bases, _semantic=None):
    """`pointer` (in from_rank's heap) as the address of the same element on `to_rank`."""
    return _translate(_semantic, pointer, from_rank, to_rank, heap_bases, "symm_at")


@builtin
def load(pointer, to_rank, from_rank, heap_bases, mask=None, other=None, sem=None, scope=None,
         _semantic=None):
    """Load `pointer`'s elements (an address of the caller, `to_rank`) from `from_rank`.
    Without `sem`, an ordinary load (order it after a `wait` with `consume_token`); with
    `sem` ('relaxed' or 'acquire') and `scope`, a memory-model load of 32/64-bit words."""
    peer = _translate(_semantic, pointer, to_rank, from_rank, heap_bases, "load")
    return _ordered_load(_semantic, peer, mask, other, sem, scope, "load")


def _ordered_load(sem_, ptr, mask, other, sem, scope, fn):
    if sem is None and scope is None:
        return sem_.load(ptr, mask, other)
    sem = _choice(sem, LOAD_SEMANTICS, "sem", fn, required=True)
    scope = _choice(scope, SCOPES, "scope", fn, required=True)
    mask = sem_._mask(mask, f"distributed.{fn}")
    elem = ptr.dtype.element
    if other is not None:
        if mask is None:
            raise ValueError(f"distributed.{fn}: `other` cannot be given without `mask`")
        other = sem_.cast(sem_._operand(other, "other"), elem)
    parts = list(sem_.broadcast_tensors(*[p for p in (ptr, mask, other) if p is not None]))
    ptr = parts.pop(0)
    mask = parts.pop(0) if mask is not None else None
    other = parts.pop(0) if other is not None else None
    return sem_.make_tensor(OrderedLoadOp.build(
        sem_.builder, ptr.handle, None if mask is None else mask.handle,
        None if other is None else other.handle, sem=sem, scope=scope))


@builtin
def store(pointer, value, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
          _semantic=None):
    """Store `value` at `pointer` (an address of the caller, `from_rank`) on `to_rank`.
    Without `sem`, an ordinary store (publish it with `notify`); with `sem` ('relaxed' or
    'release') and `scope`, a memory-model store of 32/64-bit words."""
    peer = _translate(_semantic, pointer, from_rank, to_rank, heap_bases, "store")
    return _ordered_store(_semantic, peer, value, mask, sem, scope, "store")


def _ordered_store(sem_, ptr, value, mask, sem, scope, fn):
    if sem is None and scope is None:
        return sem_.store(ptr, value, mask)
    sem = _choice(sem, STORE_SEMANTICS, "sem", fn, required=True)
    scope = _choice(scope, SCOPES, "scope", fn, required=True)
    mask = sem_._mask(mask, f"distributed.{fn}")
    value = sem_.cast(sem_._operand(value, "value"), ptr.dtype.element)
    value = sem_._broadcast_to(value, ptr.shape) if ptr.is_block() else value
    if mask is not None and ptr.is_block():
        mask = sem_._broadcast_to(mask, ptr.shape)
    OrderedStoreOp.build(sem_.builder, ptr.handle, value.handle,
                         None if mask is None else mask.handle, sem=sem, scope=scope)


@builtin
def get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, _semantic=None):
    """Copy `from_ptr`'s elements on `from_rank` into the caller's (`to_rank`) `to_ptr`."""
    peer = _translate(_semantic, from_ptr, to_rank, from_rank, heap_bases, "get")
    _semantic.store(to_ptr, _semantic.load(peer, mask), mask)


@builtin
def put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, _semantic=None):
    """Copy the caller's (`from_rank`) `from_ptr` elements into `to_ptr` on `to_rank`."""
    peer = _translate(_semantic, to_ptr, from_rank, to_rank, heap_bases, "put")
    _semantic.store(peer, _semantic.load(from_ptr, mask), mask)


def _program_wide_release(sem_, pointer, sem) -> None:
    """A scalar atomic is issued by one thread for the whole program: when it releases, the
    other threads' earlier writes must precede it, so they join first (bar.sync)."""
    if sem in ("release", "acq_rel") and isinstance(pointer, tensor) and not pointer.is_block():
        BarrierOp.build(sem_.builder)


def _atomic(sem_, op, pointer, val, from_rank, to_rank, heap_bases, mask, sem, scope):
    fn = f"atomic_{op}"
    sem = _choice(sem, _ATOMIC_SEMANTICS, "sem", fn, required=True)
    scope = _choice(scope, SCOPES, "scope", fn, required=True)
    peer = _translate(sem_, pointer, from_rank, to_rank, heap_bases, fn)
    _program_wide_release(sem_, peer, sem)
    return sem_.atomic_rmw(op, peer, val, mask, sem, scope)


def _atomic_builtin(op):
    def atomic(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               _semantic=None):
        return _atomic(_semantic, op, pointer, val, from_rank, to_rank, heap_bases, mask, sem,
                       scope)

    atomic.__name__ = atomic.__qualname__ = f"atomic_{op}"
    atomic.__doc__ = (f"`tl.atomic_{op}` on `to_rank`'s copy of `pointer` (an address of the "
                      f"caller, `from_rank`); returns the old values. `sem` and `scope` are "
                      f"required.")
    return builtin(atomic)


atomic_add = _atomic_builtin("add")
atomic_max = _atomic_builtin("max")
atomic_min = _atomic_builtin("min")
atomic_and = _atomic_builtin("and")
atomic_or = _atomic_builtin("or")
atomic_xor = _atomic_builtin("xor")
atomic_xchg = _atomic_builtin("xchg")


@builtin
def atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases, sem=None, scope=None,
               _semantic=None):
    """`tl.atomic_cas` on `to_rank`'s copy of `pointer`; `sem` and `scope` are required."""
    sem = _choice(sem, _ATOMIC_SEMANTICS, "sem", "atomic_cas", required=True)
    scope = _choice(scope, SCOPES, "scope", "atomic_cas", required=True)
    peer = _translate(_semantic, pointer, from_rank, to_rank, heap_bases, "atomic_cas")
    _program_wide_release(_semantic, peer, sem)
    return _semantic.atomic_cas(peer, cmp, val, sem, scope)


def _signal_pointer(sem_, ptr, fn):
    if not isinstance(ptr, tensor) or ptr.is_block() or not ptr.is_ptr() or \
            ptr.dtype.element != SIGNAL_TYPE:
        raise TypeError(f"distributed.{fn}: a signal is a scalar pointer to an int32 word of a "
                        f"signal pad, got {T.describe(ptr)}")
    return ptr


def _signal_value(sem_, value, what, fn):
    value = sem_._operand(value, what)
    if value.is_block() or not value.dtype.is_int():
        raise TypeError(f"distributed.{fn}: `{what}` must be a scalar integer, got "
                        f"{T.describe(value)}")
    return sem_.cast(value, SIGNAL_TYPE)


@builtin
def notify(pointer, to_rank, from_rank, signal_pad_bases, signal=1, sig_op="set",
           sem="release", scope="sys", _semantic=None):
    """Set (`sig_op='set'`) or add to (`'add'`) the word `pointer` (an address of the caller's
    signal pad, `from_rank`) on `to_rank`, once per program, after all of the program's
    threads' earlier writes (release)."""
    _signal_pointer(_semantic, pointer, "notify")
    sig_op = _choice(sig_op, SIGNAL_OPS, "sig_op", "notify")
    sem = _choice(sem, SIGNAL_SEMANTICS, "sem", "notify")
    scope = _choice(scope, SCOPES, "scope", "notify")
    peer = _translate(_semantic, pointer, from_rank, to_rank, signal_pad_bases, "notify",
                      "signal_pad_bases")
    SignalOp.build(_semantic.builder, peer.handle,
                   _signal_value(_semantic, signal, "signal", "notify").handle, op=sig_op,
                   sem=sem, scope=scope)


@builtin
def wait(pointer, wait_value=1, cmp="eq", sem="acquire", scope="sys", _semantic=None):
    """Spin until the caller's signal word `pointer` compares `cmp` ('eq', 'ne', 'ge', 'gt',
    'le', 'lt') to `wait_value`; returns a token for `consume_token`."""
    _signal_pointer(_semantic, pointer, "wait")
    cmp = _choice(cmp, tuple(WAIT_COMPARISONS), "cmp", "wait")
    sem = _choice(sem, LOAD_SEMANTICS, "sem", "wait")
    scope = _choice(scope, SCOPES, "scope", "wait")
    value = _signal_value(_semantic, wait_value, "wait_value", "wait")
    return _semantic.make_tensor(WaitOp.build(_semantic.builder, pointer.handle, value.handle,
                                              cmp=cmp, sem=sem, scope=scope))


@builtin
def consume_token(value, token, _semantic=None):
    """`value` unchanged, but computed after the wait that returned `token`: loads through
    the result cannot be moved above the wait."""
    if not isinstance(value, tensor):
        raise TypeError(f"distributed.consume_token: `value` must be a tensor, got "
                        f"{T.describe(value)}")
    if not isinstance(token, tensor) or token.is_block() or token.dtype != SIGNAL_TYPE:
        raise TypeError(f"distributed.consume_token: `token` must be the result of "
                        f"distributed.wait, got {T.describe(token)}")
    return _semantic.make_tensor(ConsumeTokenOp.build(_semantic.builder, value.handle,
                                                      token.handle))


@builtin
def fence(sem="acq_rel", scope="sys", _semantic=None):
    """A memory fence: `fence.acq_rel.<scope>` (or `fence.sc.<scope>` with sem='sc')."""
    sem = _choice(sem, FENCE_SEMANTICS, "sem", "fence")
    scope = _choice(scope, SCOPES, "scope", "fence")
    FenceOp.build(_semantic.builder, sem=sem, scope=scope)


__all__ = ["symm_at", "load", "store", "get", "put", "atomic_add", "atomic_max", "atomic_min",
           "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas", "notify",
           "wait", "consume_token", "fence"]
