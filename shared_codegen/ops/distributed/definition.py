"""Peer access through symmetric memory: the ops of kernels that talk to other GPUs.

Every rank allocates the same symmetric buffers at the same offsets of its heap, so a pointer
into the local heap becomes the peer's pointer by moving it from the local heap base to the
peer's (`dist.symm_at`; the table of heap bases is a kernel argument, as in Iris). Loads and
stores of data on a peer are then ordinary `tt.load` / `tt.store` through the translated
pointers; what this family adds is the memory-model side (PTX ISA 8.0 memory consistency
model, 9.7.9.8 ld, 9.7.9.10 st, 9.7.13.4 fence, 9.7.13.5 red):

- `dist.load {sem, scope}`: `ld.{relaxed,acquire}.{cta,gpu,sys}`, a load that observes a
  peer's release (flags, counters);
- `dist.store {sem, scope}`: `st.{relaxed,release}.{scope}`;
- `dist.signal {op, sem, scope}`: set or add a word of a (peer's) signal pad, after every
  thread of the program finished its earlier writes (bar.sync, then one thread releases);
- `dist.wait {cmp, sem, scope}`: spin until a signal word compares true against a value;
  returns the word it observed, a *token*;
- `dist.consume_token`: returns its first operand unchanged but depends on the token, so the
  loads that use its result cannot be moved above the wait by any pass (Triton-distributed's
  `consume_token`);
- `dist.fence {sem, scope}`: `fence.{acq_rel,sc}.{scope}`.

Atomics on a peer are `tt.atomic_rmw` / `tt.atomic_cas` through a translated pointer, whose
`sem` and `scope` the distributed language surface requires explicitly.

In the interpreter all ranks run in one process (`interpreter/world.py`): acquire/relaxed
loads, release stores, signals and each poll of a wait are points where the cooperative
scheduler switches programs, so a signal protocol that cannot complete is a DeadlockError
naming the rank, the program, the signal word and the line.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.analysis.axis_info import AxisInfo
from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import (PointerType, TensorType, int32, int64, same_shape_type,
                                     scalar_of)
from shared_codegen.layouts.relations import NO_RELATION, SAME_LAYOUT, PointerAccess

READ_GLOBAL = MemoryEffect.READ_GLOBAL
WRITE_GLOBAL = MemoryEffect.WRITE_GLOBAL

SYMM_AT = "dist.symm_at"
LOAD = "dist.load"
STORE = "dist.store"
SIGNAL = "dist.signal"
WAIT = "dist.wait"
CONSUME_TOKEN = "dist.consume_token"
FENCE = "dist.fence"

SCOPES = ("cta", "gpu", "sys")
LOAD_SEMANTICS = ("relaxed", "acquire")
STORE_SEMANTICS = ("relaxed", "release")
SIGNAL_SEMANTICS = ("relaxed", "release")
SIGNAL_OPS = ("set", "add")
FENCE_SEMANTICS = ("acq_rel", "sc")
WAIT_COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "ge": np.greater_equal,
                    "gt": np.greater, "le": np.less_equal, "lt": np.less}
WAIT_SYMBOLS = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
# The words of a signal pad: 32-bit, as torch's symmetric-memory signal pads.
SIGNAL_TYPE = int32
# Peer heap bases are at least this aligned (hosts check it), so translation keeps this much
# of a pointer's known divisibility and peer tiles still load in 16-byte vectors.
HEAP_ALIGNMENT = 16


def _check_choice(op, attr, allowed):
    if op.attrs.get(attr) not in allowed:
        raise VerificationError(f"{attr} must be one of {', '.join(allowed)}, got "
                                f"{op.attrs.get(attr)!r}", op)


def _check_scalar_int(op, value, what):
    if isinstance(value.type, TensorType) or scalar_of(value.type) not in (int32, int64):
        raise VerificationError(f"{what} must be a scalar int32 or int64, got {value.type}", op)


def _sync(frame, op, ptrs, result, waiting=None) -> None:
    """A communication point: hand over to the other programs (of every rank)."""
    program = getattr(frame, "program", None)
    if program is not None:
        program.sync(op, ptrs, result, waiting)


def _heap_base(frame, op, bases_ptr, rank) -> int:
    table = frame[bases_ptr]
    return int(frame.memory.load(np.int64(table) + 8 * np.int64(rank), None, None, int64,
                                 frame, op))


def rule_symm_at(op, ins):
    """The peer pointer moves with the local one; its base is HEAP_ALIGNMENT-aligned."""
    ptr = ins[0]
    div = tuple(min(d, HEAP_ALIGNMENT) for d in ptr.divisibility)
    return [AxisInfo(ptr.contiguity, div, ptr.constancy)]


class SymmAtOp(OpDef):
    """`dist.symm_at ptr, heap_bases, from_rank, to_rank`: `ptr` (an address in from_rank's
    heap) moved to the same offset of to_rank's heap."""

    name = SYMM_AT
    layout_rule = SAME_LAYOUT
    axis_rule = staticmethod(rule_symm_at)
    user_name = "distributed.symm_at"
    memory_effects = frozenset({READ_GLOBAL})
    # The result addresses what the pointer does (frontend/sanitize.py traces writes).
    address_operands = (0,)

    @staticmethod
    def build(b, ptr, heap_bases, from_rank, to_rank):
        return b.create(SYMM_AT, [ptr, heap_bases, from_rank, to_rank], [ptr.type]).result

    def verify(self, op):
        ptr, bases, from_rank, to_rank = op.operands
        if not isinstance(scalar_of(ptr.type), PointerType):
            raise VerificationError(f"symm_at needs a pointer, got {ptr.type}", op)
        if isinstance(bases.type, TensorType) or not isinstance(bases.type, PointerType) or \
                bases.type.element != int64:
            raise VerificationError(f"heap_bases must be a scalar pointer to int64, got "
                                    f"{bases.type}", op)
        _check_scalar_int(op, from_rank, "from_rank")
        _check_scalar_int(op, to_rank, "to_rank")

    def interpret(self, op, frame):
        ptr, bases, from_rank, to_rank = op.operands
        local = _heap_base(frame, op, bases, frame[from_rank])
        peer = _heap_base(frame, op, bases, frame[to_rank])
        moved = np.asarray(frame[ptr], dtype=np.int64) - np.int64(local) + np.int64(peer)
        return [moved[()] if moved.ndim == 0 else moved]


class _OrderedAccess(OpDef):
    """Shared by dist.load and dist.store: operands [ptr, (value), (mask), (other)]."""

    semantics = ()

    def print_attrs(self, op):
        return format_attrs({k: v for k, v in op.attrs.items()
                             if k not in ("has_mask", "has_other")})

    def verify(self, op):
        _check_choice(op, "sem", self.semantics)
        _check_choice(op, "scope", SCOPES)
        ptr = op.operands[0]
        if not isinstance(scalar_of(ptr.type), PointerType):
            raise VerificationError(f"{self.user_name} needs a pointer, got {ptr.type}", op)
        shapes = {v.type.shape if isinstance(v.type, TensorType) else () for v in op.operands}
        if len(shapes) != 1:
            raise VerificationError("pointer, value and mask shapes differ: "
                                    + ", ".join(str(v.type) for v in op.operands), op)


class OrderedLoadOp(_OrderedAccess):
    """`dist.load {sem, scope} ptr, (mask), (other)`."""

    name = LOAD
    layout_rule = PointerAccess("load")
    user_name = "distributed.load"
    memory_effects = frozenset({READ_GLOBAL})
    semantics = LOAD_SEMANTICS
    # A flag polled in a loop: concurrent programs switch here (interpreter/grid.py).
    sync_point = True

    @staticmethod
    def build(b, ptr, mask=None, other=None, sem="acquire", scope="sys"):
        elem = scalar_of(ptr.type).element
        operands = [ptr] + [v for v in (mask, other) if v is not None]
        attrs = {"sem": sem, "scope": scope, "has_mask": mask is not None,
                 "has_other": other is not None}
        return b.create(LOAD, operands, [same_shape_type(ptr.type, elem)], attrs).result

    @staticmethod
    def parts(op):
        mask = op.operands[1] if op.attrs.get("has_mask") else None
        other = op.operands[-1] if op.attrs.get("has_other") else None
        return op.operands[0], mask, other

    def interpret(self, op, frame):
        ptr, mask, other = self.parts(op)
        out = frame.memory.load(frame[ptr], None if mask is None else frame[mask],
                                None if other is None else frame[other],
                                scalar_of(op.result.type), frame, op)
        if op.attrs["sem"] == "acquire":
            frame.memory.acquire(frame, frame[ptr])
        _sync(frame, op, frame[ptr], out)
        return [out]


class OrderedStoreOp(_OrderedAccess):
    """`dist.store {sem, scope} ptr, value, (mask)`. A scalar release store acts for the whole
    program (a CTA barrier precedes it, as for a signal)."""

    name = STORE
    layout_rule = PointerAccess("store", preferred=(1,))
    user_name = "distributed.store"
    memory_effects = frozenset({WRITE_GLOBAL})
    semantics = STORE_SEMANTICS

    @staticmethod
    def build(b, ptr, value, mask=None, sem="release", scope="sys"):
        operands = [ptr, value] + ([mask] if mask is not None else [])
        return b.create(STORE, operands, [], {"sem": sem, "scope": scope,
                                              "has_mask": mask is not None})

    def verify(self, op):
        super().verify(op)
        if scalar_of(op.operands[1].type) != scalar_of(op.operands[0].type).element:
            raise VerificationError(f"stored value type {op.operands[1].type} does not match "
                                    f"the pointer {op.operands[0].type}", op)

    def interpret(self, op, frame):
        ptr, value = op.operands[:2]
        mask = op.operands[2] if op.attrs.get("has_mask") else None
        frame.memory.store(frame[ptr], frame[value], None if mask is None else frame[mask],
                           scalar_of(value.type), frame, op)
        if op.attrs["sem"] == "release":
            frame.memory.release(frame, frame[ptr])
        _sync(frame, op, frame[ptr], frame[value])
        return []


def _check_signal_pointer(op, ptr):
    if isinstance(ptr.type, TensorType) or not isinstance(ptr.type, PointerType) or \
            ptr.type.element != SIGNAL_TYPE:
        raise VerificationError(f"a signal is a scalar pointer to int32, got {ptr.type}", op)


class SignalOp(OpDef):
    """`dist.signal {op, sem, scope} ptr, value`: one program-wide signal, issued after all of
    the program's threads reached it (their earlier writes are ordered before it)."""

    name = SIGNAL
    layout_rule = NO_RELATION
    user_name = "distributed.notify"
    memory_effects = frozenset({READ_GLOBAL, WRITE_GLOBAL})

    @staticmethod
    def build(b, ptr, value, op="set", sem="release", scope="sys"):
        return b.create(SIGNAL, [ptr, value], [], {"op": op, "sem": sem, "scope": scope})

    def verify(self, op):
        _check_choice(op, "op", SIGNAL_OPS)
        _check_choice(op, "sem", SIGNAL_SEMANTICS)
        _check_choice(op, "scope", SCOPES)
        _check_signal_pointer(op, op.operands[0])
        if op.operands[1].type != SIGNAL_TYPE:
            raise VerificationError(f"a signal value is a scalar int32, got "
                                    f"{op.operands[1].type}", op)

    def interpret(self, op, frame):
        ptr, value = op.operands
        if op.attrs["op"] == "set":
            frame.memory.store(frame[ptr], frame[value], None, SIGNAL_TYPE, frame, op)
            if op.attrs["sem"] == "release":
                frame.memory.release(frame, frame[ptr])
            _sync(frame, op, frame[ptr], frame[value])
        else:
            frame.memory.atomic_rmw("add", frame[ptr], frame[value], None, SIGNAL_TYPE,
                                    frame, op)
        return []


class WaitOp(OpDef):
    """`dist.wait {cmp, sem, scope} ptr, value -> token`: every thread polls the word until
    `word cmp value` holds; the token is the word it observed."""

    name = WAIT
    layout_rule = NO_RELATION
    user_name = "distributed.wait"
    memory_effects = frozenset({READ_GLOBAL})
    # Each poll is a point where concurrent programs switch (interpreter/grid.py); a kernel
    # with a wait runs its programs concurrently even outside a world.
    sync_point = True

    @staticmethod
    def build(b, ptr, value, cmp="eq", sem="acquire", scope="sys"):
        return b.create(WAIT, [ptr, value], [SIGNAL_TYPE],
                        {"cmp": cmp, "sem": sem, "scope": scope}).result

    def verify(self, op):
        _check_choice(op, "cmp", tuple(WAIT_COMPARISONS))
        _check_choice(op, "sem", LOAD_SEMANTICS)
        _check_choice(op, "scope", SCOPES)
        _check_signal_pointer(op, op.operands[0])
        if op.operands[1].type != SIGNAL_TYPE:
            raise VerificationError(f"a wait value is a scalar int32, got "
                                    f"{op.operands[1].type}", op)

    def interpret(self, op, frame):
        ptr, value = frame[op.operands[0]], frame[op.operands[1]]
        holds = WAIT_COMPARISONS[op.attrs["cmp"]]
        while True:
            seen = frame.memory.load(ptr, None, None, SIGNAL_TYPE, frame, op)
            if op.attrs["sem"] == "acquire":
                frame.memory.acquire(frame, ptr)
            if holds(seen, value):
                return [np.int32(seen)]
            waiting = (f"waits until {frame.memory.describe_address(ptr)} "
                       f"{WAIT_SYMBOLS[op.attrs['cmp']]} {int(value)}; it reads {int(seen)}")
            if getattr(frame, "program", None) is None:
                # Nothing else runs: the word can never change.
                frame.error(op, f"deadlock: the program {waiting}, and no other program runs")
            _sync(frame, op, ptr, seen, waiting)


class ConsumeTokenOp(OpDef):
    """`dist.consume_token value, token -> value`: a data dependence on a wait's token."""

    name = CONSUME_TOKEN
    layout_rule = SAME_LAYOUT
    user_name = "distributed.consume_token"
    # Not pure: CSE must not merge two consumptions of different waits' tokens, and the
    # value must not be rematerialized above the wait.
    memory_effects = frozenset({READ_GLOBAL})

    @staticmethod
    def build(b, value, token):
        return b.create(CONSUME_TOKEN, [value, token], [value.type]).result

    def verify(self, op):
        if op.operands[1].type != SIGNAL_TYPE:
            raise VerificationError(f"a token is the int32 result of distributed.wait, got "
                                    f"{op.operands[1].type}", op)

    def interpret(self, op, frame):
        return [frame.raw(op.operands[0])]


class FenceOp(OpDef):
    """`dist.fence {sem, scope}`: `fence.acq_rel.<scope>` / `fence.sc.<scope>`."""

    name = FENCE
    layout_rule = NO_RELATION
    user_name = "distributed.fence"
    memory_effects = frozenset({READ_GLOBAL, WRITE_GLOBAL})

    @staticmethod
    def build(b, sem="acq_rel", scope="sys"):
        return b.create(FENCE, [], [], {"sem": sem, "scope": scope})

    def verify(self, op):
        _check_choice(op, "sem", FENCE_SEMANTICS)
        _check_choice(op, "scope", SCOPES)

    def interpret(self, op, frame):
        # Every access is immediately visible to every rank here.
        return []


__all__ = ["SymmAtOp", "OrderedLoadOp", "OrderedStoreOp", "SignalOp", "WaitOp",
           "ConsumeTokenOp", "FenceOp", "SCOPES", "LOAD_SEMANTICS", "STORE_SEMANTICS",
           "SIGNAL_SEMANTICS", "SIGNAL_OPS", "FENCE_SEMANTICS", "WAIT_COMPARISONS",
           "SIGNAL_TYPE", "HEAP_ALIGNMENT"]
