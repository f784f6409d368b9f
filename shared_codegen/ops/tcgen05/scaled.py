"""Block-scaled tensor-core MMA (MX formats): `ttng.tc_gen5_mma_scaled` (sm_100a).

    ttng.tc_gen5_mma_scaled %a, %b, %d, %a_scale, %b_scale, %use_acc, %pred[, %bars...,
                            %bar_preds...] {a_type, b_type, num_barriers}

computes `d = (a * a_scale) @ (b * b_scale) + (d if use_acc else 0)` asynchronously (PTX
ISA "tcgen05.mma ... .block_scale"): every VEC consecutive elements of a row of `a` (of a
column of `b`) along K share one scale factor. Gluon: `tcgen05_mma_scaled(a, b, acc,
a_scale, b_scale, a_type, b_type, ...)`.

- `a` is a [M, K] shared-memory descriptor (M = 128), `b` a [K, N] one (the tutorials pass
  `b_smem.permute((1, 0))` of a K-contiguous [N, K] buffer), `d` a [M, N] fp32 tensor
  memory descriptor. `a_type` / `b_type` name the formats: "e4m3" (float8e4nv bytes), "e5m2"
  (float8e5 bytes), "e2m1" (fp4, two per uint8 byte along K, the first in the low nibble; the
  operand's K is then half the MMA's).
- `a_scale` [M, K // VEC] and `b_scale` [N, K // VEC] are 8-bit tensor memory in a
  `TensorMemoryScalesLayout`: uint8 (UE8M0, 2**(s - 127), 255 is NaN) with VEC = 32, or
  float8e4nv (UE4M3, unsigned: a set sign bit decodes as NaN) with VEC = 16.
- Kinds (PTX ISA "tcgen05.mma" block scaling, Table "valid combinations"): e4m3 / e5m2
  operands with UE8M0 scales are `.kind::mxf8f6f4` (`scale_vec::1X`, K 32 per instruction);
  two e2m1 operands are `.kind::mxf4` with UE8M0 scales (`2X`, K 64) or `.kind::mxf4nvf4` with
  UE4M3 scales (`4X`, K 64). Mixing e2m1 with an 8-bit format is `.kind::mxf8f6f4` too,
  which reads the e2m1 operand padded: its shared layout must be an `NVMMASharedLayout` with
  `fp4_padded=True` (16 e2m1 values in 8 bytes, then 8 unused bytes), as Triton requires.

Interpreter: as `tc_gen5_mma` (`definition.py`): operands captured at issue, the MMA lands
at a seeded random point before the commit tracking it; the scale factors are read from
tensor memory when it lands (a `tcgen05_copy` queued before it fills them in order), and
are the MMA's until a wait observes its completion: stores to them before are races. The
formats are decoded exactly (ml_dtypes' float8 types, a table for e2m1) and the product is
summed in float64 and rounded to fp32 once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from shared_codegen.ir.core import MemoryEffect, OpDef, format_attrs
from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType, float32
from shared_codegen.layouts import TensorMemoryLayout, TensorMemoryScalesLayout
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.mbarrier.definition import progress
from shared_codegen.ops.tcgen05.definition import (Tcgen05Machine, _commit_to_barriers, _Mma,
                                                   _read_operand, _split_barrier_operands,
                                                   _verify_mma_operands)

MMA_SCALED = "ttng.tc_gen5_mma_scaled"
FORMATS = ("e2m1", "e4m3", "e5m2")
_FORMAT_DTYPES = {"e4m3": "fp8e4nv", "e5m2": "fp8e5"}
MAX_INSTR_N = 256
M_ROWS = 128

# e2m1 (PTX ISA "Alternate floating point data formats"): sign, 2 exponent bits (bias 1),
# 1 mantissa bit; no inf or NaN.
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


@dataclass(frozen=True)
class ScaledKind:
    """What one `tc_gen5_mma_scaled` is on the hardware."""

    kind: str        # the PTX .kind: mxf8f6f4, mxf4 or mxf4nvf4
    scale_vec: str   # 1X, 2X or 4X: scales per row per instruction
    vec: int         # elements per scale factor along K
    instr_k: int     # K elements per instruction
    k: int           # the MMA's K (elements)
    ue8m0: bool      # scale format: UE8M0 (uint8) or UE4M3 (float8e4nv)

    @property
    def scales_per_instr(self) -> int:
        return self.instr_k // self.vec


def is_fp4_padded(ty) -> bool:
    """Whether a shared operand holds e2m1 padded for `.kind::mxf8f6f4`: each 8 bytes of
    packed pairs followed by 8 unused bytes (`NVMMASharedLayout(fp4_padded=True)`)."""
    return bool(getattr(ty.layout, "fp4_padded", False))


def _per_byte(fmt: str) -> int:
    return 2 if fmt == "e2m1" else 1


def _check_operand(ty, fmt: str, what: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"{what}_type must be one of 'e2m1', 'e4m3', 'e5m2', got {fmt!r}")
    if not isinstance(ty, SharedMemoryType):
        raise ValueError(f"tcgen05_mma_scaled reads {what} from shared memory; {what} must be a "
                         f"shared memory descriptor, got {ty}")
    if len(ty.shape) != 2:
        raise ValueError(f"{what} must be a 2-D shared memory descriptor, got shape "
                         f"{list(ty.shape)}")
    elem = ty.element
    if fmt == "e2m1":
        ok = elem.kind in ("int", "uint") and elem.bits == 8
        want = "uint8 (two e2m1 values per byte)"
    else:
        ok = elem.name == _FORMAT_DTYPES[fmt] or (elem.kind in ("int", "uint")
                                                   and elem.bits == 8)
        want = f"{'float8e4nv' if fmt == 'e4m3' else 'float8e5'} (or uint8 bytes)"
    if not ok:
        raise ValueError(f"{what}_type {fmt!r} needs a {want} operand, got {elem}")


def _check_scale(ty, rows: int, k: int, what: str) -> int:
    """VEC of a scale operand (ValueError unless it fits)."""
    if not isinstance(ty, TensorMemoryType) or \
            not isinstance(ty.layout, TensorMemoryScalesLayout):
        raise ValueError(f"{what} must be tensor memory in a TensorMemoryScalesLayout "
                         f"(allocate_tensor_memory(..., TensorMemoryScalesLayout())), got {ty}")
    elem = ty.element
    if elem.name == "fp8e4nv":
        vec = 16
    elif elem.kind in ("int", "uint") and elem.bits == 8:
        vec = 32
    else:
        raise ValueError(f"{what} must hold uint8 (e8m0) or float8e4nv (ue4m3) scale factors, "
                         f"got {elem}")
    if len(ty.shape) != 2 or ty.shape[0] != rows or ty.shape[1] * vec != k:
        raise ValueError(f"{what} must be [{rows}, K // {vec}] = [{rows}, {k // vec}] for K = "
                         f"{k} ({elem} scales cover {vec} elements each), got "
                         f"{list(ty.shape)}")
    return vec


def check_tcgen05_mma_scaled(a, b, d, a_scale, b_scale, a_type: str, b_type: str) -> ScaledKind:
    """The kind of `d += (a * a_scale) @ (b * b_scale)` (IR types, format strings), or a
    ValueError in the user's terms."""
    _check_operand(a, a_type, "a")
    _check_operand(b, b_type, "b")
    if not isinstance(d, TensorMemoryType) or not isinstance(d.layout, TensorMemoryLayout):
        raise ValueError(f"tcgen05_mma_scaled accumulates in tensor memory: acc must be a "
                         f"tensor memory descriptor (allocate_tensor_memory), got {d}")
    if len(d.shape) != 2 or d.element != float32:
        raise ValueError(f"acc must be a [M, N] fp32 tensor memory descriptor, got {d}")
    if d.layout.two_ctas:
        raise ValueError("tcgen05_mma_scaled: an accumulator in TensorMemoryLayout("
                         "two_ctas=True) (a two-CTA MMA) is not supported for the block-scaled "
                         "MMA; use two_ctas=False")
    (m, ka), (kb, n) = a.shape, b.shape
    k = ka * _per_byte(a_type)
    if kb * _per_byte(b_type) != k or tuple(d.shape) != (m, n):
        raise ValueError(f"tcgen05_mma_scaled shapes do not match: a {list(a.shape)} "
                         f"({a_type}) x b {list(b.shape)} ({b_type}) -> acc {list(d.shape)}; "
                         f"e2m1 operands hold two elements per byte along K")
    if m != M_ROWS or d.layout.block[0] != M_ROWS:
        raise ValueError(f"tcgen05_mma_scaled computes M = 128 rows (blockM = 64 is not "
                         f"supported); acc is {list(d.shape)} with block {list(d.layout.block)}")
    if d.layout.col_stride != 1:
        raise ValueError(f"the accumulator's TensorMemoryLayout must have col_stride=1, got "
                         f"{d.layout.col_stride}")
    if n % 8 or n < 8:
        raise ValueError(f"tcgen05_mma_scaled N must be a multiple of 8, got {n}")
    vec_a = _check_scale(a_scale, m, k, "a_scale")
    vec_b = _check_scale(b_scale, n, k, "b_scale")
    if a_scale.element != b_scale.element:
        raise ValueError(f"a_scale and b_scale must have one format, got {a_scale.element} and "
                         f"{b_scale.element} (nvfp4 does not mix with MX scales)")
    fp4 = (a_type == "e2m1", b_type == "e2m1")
    for what, ty, fmt, other in (("a", a, a_type, b_type), ("b", b, b_type, a_type)):
        padded = is_fp4_padded(ty)
        if fmt == "e2m1" and other != "e2m1" and not padded:
            raise ValueError(f"{what}_type 'e2m1' with {other!r} is .kind::mxf8f6f4, which reads "
                             f"e2m1 padded to a byte per element pair: {what}'s shared layout "
                             f"must be an NVMMASharedLayout with fp4_padded=True, got "
                             f"{ty.layout!r}")
        if padded and not (fmt == "e2m1" and other != "e2m1"):
            raise ValueError(f"{what} has an fp4_padded shared layout, which only an e2m1 "
                             f"operand mixed with an e4m3 / e5m2 one reads (.kind::mxf8f6f4); "
                             f"a_type {a_type!r}, b_type {b_type!r}")
    if fp4[0] != fp4[1] or not fp4[0]:
        if vec_a != 32:
            raise ValueError(f"{a_type} x {b_type} (mxf8f6f4) takes uint8 (e8m0) scales, one "
                             f"per 32 elements; got {a_scale.element}")
        kind = ScaledKind("mxf8f6f4", "1X", 32, 32, k, True)
    elif vec_a == 32:
        kind = ScaledKind("mxf4", "2X", 32, 64, k, True)
    else:
        kind = ScaledKind("mxf4nvf4", "4X", 16, 64, k, False)
    if k % kind.instr_k:
        raise ValueError(f"tcgen05_mma_scaled .kind::{kind.kind} takes K in steps of "
                         f"{kind.instr_k} elements, got K={k}")
    return kind


# ---- interpreter ---------------------------------------------------------------------------

def _bytes(x) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8)


def decode_operand(raw: np.ndarray, fmt: str, k_axis: int) -> np.ndarray:
    """float64 values of an operand's bytes; e2m1 unpacks along `k_axis`, low nibble first."""
    import ml_dtypes
    raw = _bytes(raw)
    if fmt == "e4m3":
        return raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    if fmt == "e5m2":
        return raw.view(ml_dtypes.float8_e5m2).astype(np.float64)
    lo, hi = E2M1_VALUES[raw & 0xF], E2M1_VALUES[raw >> 4]
    out = np.stack([lo, hi], axis=k_axis + 1)  # element 2i, then 2i + 1
    shape = list(raw.shape)
    shape[k_axis] *= 2
    return out.reshape(shape)


def decode_scales(raw: np.ndarray, ue8m0: bool) -> np.ndarray:
    """float64 scale factors: UE8M0 is 2**(s - 127) (255: NaN); UE4M3 an e4m3 without sign,
    so a set sign bit (no value the hardware defines; 0xFF is also unwritten tensor memory)
    decodes as NaN, which the result then shows."""
    import ml_dtypes
    raw = _bytes(raw)
    if ue8m0:
        return np.where(raw == 255, np.nan, np.ldexp(1.0, raw.astype(np.int64) - 127))
    values = raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return np.where(raw & 0x80, np.nan, values)


class _ScaledMma(_Mma):
    """A queued scaled MMA: `a`, `b` the operand bytes at issue; the scale views are read
    when it lands."""

    what = "tcgen05_mma_scaled"

    def __init__(self, *args, spec=None):
        super().__init__(*args)
        self.formats, self.kind, self.scales = spec

    def _compute(self) -> None:
        a = decode_operand(self.a, self.formats[0], 1)
        b = decode_operand(self.b, self.formats[1], 0)
        vec = self.kind.vec
        sa, sb = (decode_scales(view.read_raw(ty), self.kind.ue8m0).repeat(vec, axis=1)
                  for view, ty in self.scales)
        with np.errstate(invalid="ignore", over="ignore"):
            res = (a * sa) @ (b * sb.T)
            if self.use_acc:
                res = res + self.d_view.read_raw(self.d_ty).astype(np.float64)
            self.d_view.write_raw(res.astype(np.float32), self.d_ty)
        self.landed = True


class TCGen5MMAScaledOp(OpDef):
    """`ttng.tc_gen5_mma_scaled [a, b, d, a_scale, b_scale, use_acc, pred, bars...,
    bar_preds...] {a_type, b_type, num_barriers}`."""

    name = MMA_SCALED
    layout_rule = OWN_LAYOUTS
    user_name = "tcgen05_mma_scaled"
    memory_effects = frozenset({MemoryEffect.READ_SHARED, MemoryEffect.WRITE_SHARED})

    @staticmethod
    def build(b, a, bm, d, a_scale, b_scale, a_type, b_type, use_acc, pred, barriers=(),
              barrier_preds=()):
        operands = [a, bm, d, a_scale, b_scale, use_acc, pred] + list(barriers) + \
            list(barrier_preds)
        return b.create(MMA_SCALED, operands, [], {"a_type": a_type, "b_type": b_type,
                                                   "num_barriers": len(barriers)})

    @staticmethod
    def parts(op):
        return _split_barrier_operands(op, 7)

    @staticmethod
    def kind(op) -> ScaledKind:
        a, bm, d, a_scale, b_scale = op.operands[:5]
        return check_tcgen05_mma_scaled(a.type, bm.type, d.type, a_scale.type, b_scale.type,
                                        op.attrs["a_type"], op.attrs["b_type"])

    def print_attrs(self, op):
        return format_attrs(op.attrs)

    def verify(self, op):
        _verify_mma_operands(op, 7, "a, b, acc, a_scale, b_scale, use_acc, pred",
                             lambda: self.kind(op))

    def interpret(self, op, frame):
        a_v, b_v, d_v, sa_v, sb_v, use_v, pred_v, bars, preds = self.parts(op)
        progress(frame)
        machine = Tcgen05Machine.of(frame)
        if bool(frame[pred_v]):
            smem_reads = []
            a = np.array(_read_operand(frame, op, a_v, smem_reads))
            b = np.array(_read_operand(frame, op, b_v, smem_reads))
            kind = self.kind(op)
            scales = [(frame[sa_v], sa_v.type), (frame[sb_v], sb_v.type)]
            spec = ((op.attrs["a_type"], op.attrs["b_type"]), kind, scales)
            machine.issue(op, frame, a, b, frame[d_v], d_v.type, bool(frame[use_v]),
                          smem_reads, kind=functools.partial(_ScaledMma, spec=spec),
                          tmem_reads=scales)
        _commit_to_barriers(frame, op, machine, pred_v, bars, preds)
        return []


__all__ = ["TCGen5MMAScaledOp", "check_tcgen05_mma_scaled", "ScaledKind", "decode_operand",
           "is_fp4_padded",
           "decode_scales", "E2M1_VALUES", "FORMATS"]
