"""Global memory: `tt.load`, `tt.store`, `tt.atomic_rmw`, `tt.atomic_cas`.

Optional operands (mask, other) are present when the attributes `has_mask` / `has_other`
say so, so an op's operand list is always [ptr, (value), (mask), (other)] in that order.
The interpreter bounds-checks every active lane (see `interpreter.memory`).
"""

from __future__ import annotations

from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError
from shared_codegen.ir.types import PointerType, TensorType, int1, same_shape_type, scalar_of
from shared_codegen.layouts.relations import PointerAccess
from shared_codegen.ops.memory.axis import rule_load

READ_GLOBAL = MemoryEffect.READ_GLOBAL
WRITE_GLOBAL = MemoryEffect.WRITE_GLOBAL

CACHE_MODIFIERS = ("", ".ca", ".cg", ".cv", ".cs", ".wb", ".wt")
EVICTION_POLICIES = ("", "evict_first", "evict_last", "evict_normal")


def _check_shapes(op, values):
    shapes = {v.type.shape if isinstance(v.type, TensorType) else () for v in values}
    if len(shapes) != 1:
        raise VerificationError("pointer, value and mask shapes differ: "
                                + ", ".join(str(v.type) for v in values), op)


def _check_mask(op, mask):
    if scalar_of(mask.type) != int1:
        raise VerificationError(f"mask must be i1, got {mask.type}", op)


class LoadOp(OpDef):
    name = "tt.load"
    layout_rule = PointerAccess("load")
    axis_rule = staticmethod(rule_load)
    user_name = "gl.load"
    memory_effects = frozenset({READ_GLOBAL})
    # An access without memory-model order: checked for races between simulated ranks.
    plain_global_access = True

    @staticmethod
    def build(b, ptr, mask=None, other=None, cache_modifier="", eviction_policy="",
              volatile=False):
        elem = scalar_of(ptr.type).element
        operands = [ptr] + ([mask] if mask is not None else []) + (
            [other] if other is not None else [])
        attrs = {"has_mask": mask is not None, "has_other": other is not None}
        if cache_modifier:
            attrs["cache"] = cache_modifier
        if eviction_policy:
            attrs["evict"] = eviction_policy
        if volatile:
            attrs["volatile"] = True
        return b.create("tt.load", operands, [same_shape_type(ptr.type, elem)], attrs).result

    def print_attrs(self, op):
        shown = {k: v for k, v in op.attrs.items() if k not in ("has_mask", "has_other")}
        from shared_codegen.ir.core import format_attrs
        return format_attrs(shown)

    def verify(self, op):
        ptr = op.operands[0]
        if not isinstance(scalar_of(ptr.type), PointerType):
            raise VerificationError(f"load needs a pointer, got {ptr.type}", op)
        _check_shapes(op, op.operands)
        if op.attrs.get("has_mask"):
            _check_mask(op, op.operands[1])
        if op.attrs.get("has_other") and scalar_of(op.operands[-1].type) != scalar_of(
                op.result.type):
            raise VerificationError("`other` must have the loaded element type", op)

    @staticmethod
    def parts(op):
        mask = op.operands[1] if op.attrs.get("has_mask") else None
        other = op.operands[-1] if op.attrs.get("has_other") else None
        return op.operands[0], mask, other

    def interpret(self, op, frame):
        ptr, mask, other = self.parts(op)
        elem = scalar_of(op.result.type)
        out = frame.memory.load(frame[ptr], None if mask is None else frame[mask],
                                None if other is None else frame[other], elem, frame, op)
        return [out]


class StoreOp(OpDef):
    name = "tt.store"
    layout_rule = PointerAccess("store", preferred=(1,))
    memory_effects = frozenset({WRITE_GLOBAL})
    plain_global_access = True

    @staticmethod
    def build(b, ptr, value, mask=None, cache_modifier="", eviction_policy=""):
        operands = [ptr, value] + ([mask] if mask is not None else [])
        attrs = {"has_mask": mask is not None}
        if cache_modifier:
            attrs["cache"] = cache_modifier
        if eviction_policy:
            attrs["evict"] = eviction_policy
        return b.create("tt.store", operands, [], attrs)

    def print_attrs(self, op):
        from shared_codegen.ir.core import format_attrs
        return format_attrs({k: v for k, v in op.attrs.items() if k != "has_mask"})

    def verify(self, op):
        ptr, value = op.operands[:2]
        elem = scalar_of(ptr.type)
        if not isinstance(elem, PointerType):
            raise VerificationError(f"store needs a pointer, got {ptr.type}", op)
        if scalar_of(value.type) != elem.element:
            raise VerificationError(f"stored value type {value.type} does not match pointer "
                                    f"element type {elem.element}", op)
        _check_shapes(op, op.operands)
        if op.attrs.get("has_mask"):
            _check_mask(op, op.operands[2])

    def interpret(self, op, frame):
        ptr, value = op.operands[:2]
        mask = op.operands[2] if op.attrs.get("has_mask") else None
        frame.memory.store(frame[ptr], frame[value], None if mask is None else frame[mask],
                           scalar_of(value.type), frame, op)
        return []


ATOMIC_KINDS = ("add", "fadd", "max", "umax", "min", "umin", "and", "or", "xor", "xchg")
ATOMIC_SEMANTICS = ("acq_rel", "acquire", "release", "relaxed")
ATOMIC_SCOPES = ("gpu", "cta", "sys")


class AtomicRMWOp(OpDef):
    """`tt.atomic_rmw {kind, sem, scope}`: returns the old values."""

    name = "tt.atomic_rmw"
    layout_rule = PointerAccess("atomic_rmw", preferred=(1,))
    memory_effects = frozenset({READ_GLOBAL, WRITE_GLOBAL})

    @staticmethod
    def build(b, kind, ptr, value, mask=None, sem="acq_rel", scope="gpu"):
        operands = [ptr, value] + ([mask] if mask is not None else [])
        attrs = {"kind": kind, "sem": sem, "scope": scope, "has_mask": mask is not None}
        return b.create("tt.atomic_rmw", operands, [value.type], attrs).result

    def print_attrs(self, op):
        from shared_codegen.ir.core import format_attrs
        return format_attrs({k: v for k, v in op.attrs.items() if k != "has_mask"})

    def verify(self, op):
        if op.attrs["kind"] not in ATOMIC_KINDS:
            raise VerificationError(f"unknown atomic kind {op.attrs['kind']!r}", op)
        if op.attrs["sem"] not in ATOMIC_SEMANTICS:
            raise VerificationError(f"unknown memory semantics {op.attrs['sem']!r}", op)
        if op.attrs["scope"] not in ATOMIC_SCOPES:
            raise VerificationError(f"unknown scope {op.attrs['scope']!r}", op)
        _check_shapes(op, op.operands)

    def interpret(self, op, frame):
        ptr, value = op.operands[:2]
        mask = op.operands[2] if op.attrs.get("has_mask") else None
        old = frame.memory.atomic_rmw(op.attrs["kind"], frame[ptr], frame[value],
                                      None if mask is None else frame[mask],
                                      scalar_of(value.type), frame, op)
        return [old]


class AtomicCASOp(OpDef):
    name = "tt.atomic_cas"
    layout_rule = PointerAccess("atomic_cas", preferred=(1, 2))
    memory_effects = frozenset({READ_GLOBAL, WRITE_GLOBAL})

    @staticmethod
    def build(b, ptr, cmp, value, sem="acq_rel", scope="gpu"):
        return b.create("tt.atomic_cas", [ptr, cmp, value], [value.type],
                        {"sem": sem, "scope": scope}).result

    def verify(self, op):
        _check_shapes(op, op.operands)

    def interpret(self, op, frame):
        ptr, cmp, value = op.operands
        old = frame.memory.atomic_cas(frame[ptr], frame[cmp], frame[value],
                                      scalar_of(value.type), frame, op)
        return [old]
