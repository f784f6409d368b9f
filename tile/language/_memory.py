"""Loads, stores and atomics of the tile language (a mixin of `TileSemantic`).

Pointers here are scalars or tensors of pointers; `mask`, `other` and stored values broadcast
to the pointer's shape and are cast to its element type, as in Triton 3.6. A block pointer
(`tl.make_block_ptr`) goes to `_block_pointer.py`, which takes `boundary_check` and
`padding_option`; with other pointers they are rejected with Triton's explanation.
"""

from __future__ import annotations

from shared_codegen.frontend.values import tensor
from shared_codegen.ir.types import (PointerType, bfloat16, float16, float32, float64, int1, int8,
                                     int32, int64, uint32, uint64)
from shared_codegen.ops.memory.definition import AtomicCASOp, AtomicRMWOp, LoadOp, StoreOp
from tile.language import _types as T
from tile.language._block_pointer import is_block_pointer, load_block, store_block

_LOAD_CACHE = ("", ".ca", ".cg", ".cv")
_STORE_CACHE = ("", ".wb", ".cg", ".cs", ".wt")
_EVICTION = ("", "evict_last", "evict_first")
_SEMANTICS = ("acquire", "release", "acq_rel", "relaxed")
_SCOPES = ("gpu", "cta", "sys")


def _option(value, allowed, what: str, fn: str) -> str:
    value = "" if value is None else value
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed if a)
        raise ValueError(f"{fn}: `{what}` must be one of {choices}, got {value!r}")
    return value


class MemorySemantic:
    """Needs `to_tensor`, `cast`, `bitcast`, `broadcast_tensors`, `_broadcast_to`, `where`,
    `bitwise`, `unary` and `make_tensor` from `TileSemantic`."""

    def _pointer(self, ptr, fn: str) -> tensor:
        if not isinstance(ptr, tensor) or not ptr.is_ptr():
            raise TypeError(f"{fn}: `pointer` must be a pointer or a tensor of pointers, got "
                            f"{T.describe(ptr)}")
        return ptr

    def _mask(self, mask, fn: str):
        if mask is None:
            return None
        mask = self._operand(mask, "mask")
        if mask.dtype != int1:
            raise TypeError(f"{fn}: `mask` must be a boolean (int1) tensor, got "
                            f"{T.type_name(mask.type)}")
        return mask

    @staticmethod
    def _no_block_pointer_options(boundary_check, padding_option, fn):
        for name, value in (("boundary_check", boundary_check),
                            ("padding_option", padding_option)):
            if value:
                raise ValueError(f"{fn}: `{name}` applies only to block pointers "
                                 f"(tl.make_block_ptr): the compiler does not know the bounds "
                                 f"of a tensor of pointers; use `mask` and `other` instead")

    def _bool_storage(self, ptr: tensor) -> tensor:
        # Booleans live in memory as bytes, so int1 pointers load and store through int8.
        return self.bitcast(ptr, PointerType(int8, ptr.dtype.address_space))

    def load(self, ptr, mask=None, other=None, boundary_check=(), padding_option="",
             cache_modifier="", eviction_policy="", volatile=False) -> tensor:
        fn = "tl.load"
        cache = _option(cache_modifier, _LOAD_CACHE, "cache_modifier", fn)
        evict = _option(eviction_policy, _EVICTION, "eviction_policy", fn)
        if is_block_pointer(ptr):
            return load_block(self, ptr, mask, other, boundary_check, padding_option, cache,
                              evict, volatile)
        ptr = self._pointer(ptr, fn)
        self._no_block_pointer_options(boundary_check, padding_option, fn)
        mask = self._mask(mask, fn)
        if mask is None and other is not None:
            raise ValueError(f"{fn}: `other` cannot be given without `mask`")
        other = None if other is None else self._operand(other, "other")
        if not ptr.is_block():
            for name, v in (("mask", mask), ("other", other)):
                if v is not None and v.is_block():
                    raise ValueError(f"{fn}: `{name}` must be a scalar when `pointer` is a "
                                     f"scalar, got {v.type}")
        elem = ptr.dtype.element
        is_bool = elem == int1
        if is_bool:
            ptr, elem = self._bool_storage(ptr), int8
        if other is not None:
            other = self.cast(other, elem)
        parts = [p for p in (ptr, mask, other) if p is not None]
        parts = list(self.broadcast_tensors(*parts))
        ptr = parts.pop(0)
        mask = parts.pop(0) if mask is not None else None
        other = parts.pop(0) if other is not None else None
        out = self.make_tensor(LoadOp.build(
            self.builder, ptr.handle, None if mask is None else mask.handle,
            None if other is None else other.handle, cache_modifier=cache,
            eviction_policy=evict, volatile=bool(volatile)))
        return self.cast(out, int1) if is_bool else out

    def store(self, ptr, value, mask=None, boundary_check=(), cache_modifier="",
              eviction_policy=""):
        fn = "tl.store"
        cache = _option(cache_modifier, _STORE_CACHE, "cache_modifier", fn)
        evict = _option(eviction_policy, _EVICTION, "eviction_policy", fn)
        if is_block_pointer(ptr):
            return store_block(self, ptr, value, mask, boundary_check, cache, evict)
        ptr = self._pointer(ptr, fn)
        if ptr.dtype.const:
            raise ValueError(f"{fn}: cannot store through a constant pointer")
        self._no_block_pointer_options(boundary_check, "", fn)
        value = self._operand(value, "value")
        mask = self._mask(mask, fn)
        for name, v in (("value", value), ("mask", mask)):
            if v is not None and v.is_block():
                shape = self.broadcast_shape(ptr.shape, v.shape)
                if shape != ptr.shape:
                    raise ValueError(f"{fn}: `{name}` of shape {v.shape} does not fit `pointer` "
                                     f"of shape {ptr.shape}")
        elem = ptr.dtype.element
        if elem == int1:
            ptr, elem = self._bool_storage(ptr), int8
        value = self._broadcast_to(self.cast(value, elem), ptr.shape)
        if mask is not None:
            mask = self._broadcast_to(mask, ptr.shape)
        StoreOp.build(self.builder, ptr.handle, value.handle,
                      None if mask is None else mask.handle, cache_modifier=cache,
                      eviction_policy=evict)

    # ---- atomics ------------------------------------------------------------------------
    def _atomic_operands(self, ptr, val, mask, op: str, sem, scope):
        fn = f"tl.atomic_{op}"
        ptr = self._pointer(ptr, fn)
        if ptr.dtype.const:
            raise ValueError(f"{fn}: cannot store through a constant pointer")
        elem = ptr.dtype.element
        if elem in (float16, bfloat16) and op != "add":
            raise TypeError(f"{fn} does not support {elem}")
        if elem.bits < 16 or (elem.bits == 16 and elem.is_int()):
            raise TypeError(f"{fn} does not support {elem}")
        sem = _option(sem, ("",) + _SEMANTICS, "sem", fn) or "acq_rel"
        scope = _option(scope, ("",) + _SCOPES, "scope", fn) or "gpu"
        val = self.cast(self._operand(val, "val"), elem)
        mask = self._mask(mask, fn)
        for name, v in (("val", val), ("mask", mask)):
            if v is not None and v.is_block() and \
                    self.broadcast_shape(ptr.shape, v.shape) != ptr.shape:
                raise ValueError(f"{fn}: `{name}` of shape {v.shape} does not fit `pointer` of "
                                 f"shape {ptr.shape}")
        val = self._broadcast_to(val, ptr.shape)
        if mask is not None:
            mask = self._broadcast_to(mask, ptr.shape)
        return ptr, val, mask, sem, scope

    def _rmw(self, kind, ptr, val, mask, sem, scope) -> tensor:
        return self.make_tensor(AtomicRMWOp.build(
            self.builder, kind, ptr.handle, val.handle, None if mask is None else mask.handle,
            sem=sem, scope=scope))

    def atomic_rmw(self, op: str, ptr, val, mask=None, sem=None, scope=None) -> tensor:
        """`op` in add, max, min, and, or, xor, xchg; returns the old values."""
        ptr, val, mask, sem, scope = self._atomic_operands(ptr, val, mask, op, sem, scope)
        ty = val.dtype
        if op == "add":
            return self._rmw("fadd" if ty.is_floating() else "add", ptr, val, mask, sem, scope)
        if op in ("and", "or", "xor") and not ty.is_int():
            raise TypeError(f"tl.atomic_{op} needs an integer pointer, got {T.type_name(ty)}")
        if op in ("max", "min"):
            if ty.is_int():
                kind = op if T.is_signed(ty) else "u" + op
                return self._rmw(kind, ptr, val, mask, sem, scope)
            if ty not in (float32, float64):
                raise TypeError(f"tl.atomic_{op} does not support {ty}")
            return self._float_atomic_minmax(op, ptr, val, mask, sem, scope)
        return self._rmw(op, ptr, val, mask, sem, scope)

    def _float_atomic_minmax(self, op, ptr, val, mask, sem, scope) -> tensor:
        """Triton's integer trick for float atomic max/min: IEEE floats of one sign order like
        their bit patterns, so a non-negative value uses a signed-int max (min) and a
        negative one an unsigned-int min (max) on the same bits. Each lane is active in
        exactly one of the two atomics."""
        ty = val.dtype
        ity, uty = (int32, uint32) if ty == float32 else (int64, uint64)
        space = ptr.dtype.address_space
        neg = self.cast(self.binary("rshift", self.bitcast(val, uty), ty.bits - 1), int1)
        pos = self.unary("not", neg)
        if mask is not None:
            pos_mask, neg_mask = self.bitwise("and", mask, pos), self.bitwise("and", mask, neg)
        else:
            pos_mask, neg_mask = pos, neg
        pos_kind, neg_kind = ("max", "umin") if op == "max" else ("min", "umax")
        pos_old = self._rmw(pos_kind, self.bitcast(ptr, PointerType(ity, space)),
                            self.bitcast(val, ity), pos_mask, sem, scope)
        neg_old = self._rmw(neg_kind, self.bitcast(ptr, PointerType(uty, space)),
                            self.bitcast(val, uty), neg_mask, sem, scope)
        old = self.where(pos, self.bitcast(pos_old, uty), neg_old)
        return self.bitcast(old, ty)

    def atomic_cas(self, ptr, cmp, val, sem=None, scope=None) -> tensor:
        fn = "tl.atomic_cas"
        ptr = self._pointer(ptr, fn)
        elem = ptr.dtype.element
        if elem.bits not in (16, 32, 64):
            raise TypeError(f"{fn} supports elements of 16, 32 or 64 bits, got {elem}")
        sem = _option(sem, ("",) + _SEMANTICS, "sem", fn) or "acq_rel"
        scope = _option(scope, ("",) + _SCOPES, "scope", fn) or "gpu"
        cmp = self.cast(self._operand(cmp, "cmp"), elem)
        val = self.cast(self._operand(val, "val"), elem)
        ptr, cmp, val = self.broadcast_tensors(ptr, cmp, val)
        return self.make_tensor(AtomicCASOp.build(self.builder, ptr.handle, cmp.handle,
                                                  val.handle, sem=sem, scope=scope))
