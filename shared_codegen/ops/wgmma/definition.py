"""Hopper warpgroup MMA: `ttng.warp_group_dot` (wgmma.mma_async) and `ttng.warp_group_dot_wait`.

    %d = ttng.warp_group_dot %a, %b, %acc, %use_acc {is_async = true} : tensor<128x128xf32, #mma>
    %r = ttng.warp_group_dot_wait %d, %a_smem {pendings = 0}

- `ttng.warp_group_dot [a, b, acc, use_acc]` computes `a @ b + (acc if use_acc else 0)`.
  `acc` has `NVMMADistributedLayout(version=[3, 0], warps_per_cta, instr_shape=[16, N, K])`
  with warps_per_cta[0] a multiple of 4 (a warpgroup is 4 warps stacked along M, 16 rows
  each); `a` is a shared-memory descriptor or a register tensor with
  `DotOperandLayout(0, acc layout, k_width=32 // element bits)`; `b` is a shared-memory
  descriptor. Shared operands use an NVMMA-swizzled layout (PTX ISA 9.7.15.5.1.2 "Shared
  Memory Matrix Layout"); `use_acc` is an i1 scalar (runtime or constant).
  Types (PTX ISA 9.7.15.5 "wgmma.mma_async", shapes table): fp16 -> fp32 or fp16, bf16 ->
  fp32 (K=16); fp8 e4m3 / e5m2 -> fp32 or fp16 (K=32, a and b may mix the two fp8 kinds);
  fp32 as tf32 -> fp32 (K=8). Only fp16/bf16 may be MN-major in shared memory (`imm-trans`);
  tf32 and fp8 operands must be K-major. The instruction N (instr_shape[1]) is a multiple of
  8 in [8, 256] for all of these types (the 16-step rows of the table are for .s32 results).
- `is_async=True`: the result is a token for registers the tensor cores are still writing;
  `ttng.warp_group_dot_wait [deps...] {pendings}` (`wgmma.wait_group pendings`) waits until at
  most `pendings` warpgroup MMAs are in flight and returns its operands, now safe to read.
  `is_async=False` is issue + wait 0 in one op (which also retires every earlier one).

Interpreter: each program keeps its in-flight MMAs, oldest first. The product is computed
at issue (the operands cannot change before the retiring wait without a race being reported,
so the order is unobservable), and the result is an `InFlight` value until the wait that
retires it. Reading it through any other op, or writing shared memory an in-flight MMA reads,
is reported as a race naming both lines. Results land exactly at the retiring wait: that is
the latest point the hardware may finish, so every race the hardware could show is reported.

Lowering is in `shared_codegen/ops/wgmma/lowering.py`.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.interpreter.run import Unready
from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import SharedMemoryType, TensorType, float32, int1
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.async_copy.definition import _PendingBytes
from shared_codegen.ops.dot.definition import check_matrix_types, round_to_tf32

READ_SHARED = MemoryEffect.READ_SHARED

WGMMA, WAIT = "ttng.warp_group_dot", "ttng.warp_group_dot_wait"

# (a element, accumulator element) -> instruction K.
WGMMA_TYPES: Dict[tuple, int] = {
    ("fp16", "fp32"): 16, ("fp16", "fp16"): 16, ("bf16", "fp32"): 16,
    ("fp32", "fp32"): 8,
    ("fp8e4nv", "fp32"): 32, ("fp8e4nv", "fp16"): 32,
    ("fp8e5", "fp32"): 32, ("fp8e5", "fp16"): 32,
}
# Our element names -> PTX type names of wgmma.mma_async.
PTX_TYPES = {"fp16": "f16", "bf16": "bf16", "fp32": "tf32", "fp8e4nv": "e4m3", "fp8e5": "e5m2"}
_FP8 = ("fp8e4nv", "fp8e5")
WARPGROUP_ROWS = 64  # 4 warps x 16 rows: the M of every wgmma instruction


def _layouts():
    from shared_codegen.layouts import DotOperandLayout, NVMMADistributedLayout
    return DotOperandLayout, NVMMADistributedLayout


def wgmma_k_width(elem) -> int:
    """k_width of a register A operand: one 32-bit register of consecutive K."""
    return max(1, 32 // elem.bits)


def wgmma_instr_k(a_elem) -> int:
    return {16: 16, 8: 32, 32: 8}[a_elem.bits]


def check_instr_n(n: int) -> None:
    """PTX ISA 9.7.15.5 matrix shapes: m64nNk* with N = 8 * i, i in 1..32 (.f16/.f32 results)."""
    if isinstance(n, bool) or not isinstance(n, int) or n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N must be a multiple of 8 in [8, 256], got {n}")


def smem_k_major(ty: SharedMemoryType, k_dim: int) -> Optional[bool]:
    """True when K is the contiguous dim of the view (its bit 0 is one element away), False
    when the other dim is, None when neither is."""
    from shared_codegen.ops.shared_memory.definition import offset_map
    bits = offset_map(ty).linear_bits()
    if bits is None:
        return None
    if bits[k_dim][:1] == (1,):
        return True
    if bits[1 - k_dim][:1] == (1,):
        return False
    return None


WARPGROUP_M = 64  # rows of one warpgroup's wgmma tile


def check_warpgroup_mma(a, b, acc, precision: str = "", max_num_imprecise_acc=None) -> None:
    """ValueError, in the user's terms, unless `a @ b + acc` (IR types) is a wgmma this
    compiler lowers. `a` is a TensorType or SharedMemoryType, `b` a SharedMemoryType."""
    DotOperandLayout, NVMMADistributedLayout = _layouts()
    if not isinstance(acc, TensorType):
        raise ValueError(f"acc must be a register tensor, got {acc}")
    lay = acc.layout
    if not (isinstance(lay, NVMMADistributedLayout) and lay.version[0] == 3):
        raise ValueError(f"acc must have layout NVMMADistributedLayout(version=[3, 0], "
                         f"warps_per_cta=..., instr_shape=[16, N, K]), got {lay!r}")
    if not isinstance(b, SharedMemoryType):
        raise ValueError(f"wgmma reads b from shared memory; b must be a shared memory "
                         f"descriptor, got {b}")
    if not isinstance(a, (TensorType, SharedMemoryType)):
        raise ValueError(f"a must be a shared memory descriptor or a register tensor, got {a}")
    views = [TensorType(tuple(t.shape), t.element, None) if isinstance(t, SharedMemoryType)
             else t for t in (a, b)]
    check_matrix_types(views[0], views[1], acc, "warpgroup_mma")
    ea, eb, ec = a.element.name, b.element.name, acc.element.name
    if ea != eb and not (ea in _FP8 and eb in _FP8):
        raise ValueError(f"a and b must have the same element type (or both fp8), got "
                         f"{a.element} and {b.element}")
    if (ea, ec) not in WGMMA_TYPES:
        raise ValueError(f"warpgroup_mma supports fp16 -> fp32/fp16, bf16 -> fp32, fp8 (e4m3, "
                         f"e5m2) -> fp32/fp16 and fp32 (as tf32) -> fp32; got {a.element} x "
                         f"{b.element} -> {acc.element}")
    if a.element == float32 and precision != "tf32":
        raise ValueError(f"warpgroup_mma on fp32 inputs computes in tf32 (precision='tf32'), "
                         f"got {precision!r}")
    if isinstance(a, TensorType):
        want = DotOperandLayout(0, lay, wgmma_k_width(a.element))
        if a.layout != want:
            raise ValueError(f"a must have layout {want!r}, got {a.layout!r}")
    (m, k), n = a.shape, b.shape[1]
    instr_n, instr_k = lay.instr_shape[1], wgmma_instr_k(a.element)
    check_instr_n(instr_n)
    wm, wn = lay.warps_per_cta
    if wm % 4:
        raise ValueError(f"wgmma stacks the 4 warps of a warpgroup along M: warps_per_cta[0] "
                         f"must be a multiple of 4, got {list(lay.warps_per_cta)}")
    # Warpgroups beyond what M needs hold copies of the accumulator (Triton allows M = 64 on
    # warps_per_cta=[8, 1]): each computes the same 64-row tile.
    if m % (16 * wm) and (m % WARPGROUP_M or (16 * wm) % m):
        raise ValueError(f"wgmma M must be a multiple of 16 x warps_per_cta[0] = {16 * wm} "
                         f"(each warpgroup computes 64-row tiles), got M={m}")
    if n % (instr_n * wn):
        raise ValueError(f"wgmma N={n} must be a multiple of instr_shape[1] x warps_per_cta[1]"
                         f" = {instr_n} x {wn}")
    if k % instr_k:
        raise ValueError(f"wgmma with {a.element} inputs takes K in steps of {instr_k}, got "
                         f"K={k}")
    if ea in ("fp32",) + _FP8:
        for name, ty, k_dim in (("a", a, 1), ("b", b, 0)):
            if isinstance(ty, SharedMemoryType) and smem_k_major(ty, k_dim) is False:
                hint = ("allocate B as [N, K] and pass b.permute((1, 0))" if name == "b"
                        else "store A as [M, K] with K contiguous")
                raise ValueError(f"wgmma with {ty.element} inputs reads {name} K-major (K "
                                 f"contiguous in shared memory), but {name}'s layout "
                                 f"{ty.layout!r} has {'N' if name == 'b' else 'M'} "
                                 f"contiguous: {hint}")
    if max_num_imprecise_acc is not None and ea in _FP8 and max_num_imprecise_acc > k:
        raise ValueError(f"max_num_imprecise_acc ({max_num_imprecise_acc}) must be <= K ({k})")


# ---- interpreter state ------------------------------------------------------------------------

class InFlight(Unready):
    """The accumulator of an async wgmma before the wait that retires it."""

    __slots__ = ("value", "where", "retired", "id")

    def __init__(self, value, where: str, ident: int):
        self.value, self.where, self.retired, self.id = value, where, False, ident

    def read(self, frame):
        if self.retired:
            return self.value
        op = frame.op
        frame.error(op, f"race: {op.name} reads the accumulator of the async warpgroup_mma at "
                        f"{self.where} before warpgroup_mma_wait retires it; wait for it first "
                        f"(warpgroup_mma_wait(num_outstanding=n, deps=[acc]) with n small "
                        f"enough) and use the wait's result")


class _SmemGuard(_PendingBytes):
    """The buffer's pending async writes (the base class: cp.async, TMA) plus the bytes
    in-flight wgmmas read: installed as `SharedBuffer.async_pending`, which `SharedView` and
    the async copies consult on every access. Reading those bytes is fine; writing is a race."""

    READERS = {"ttg.local_load", WGMMA}

    def __init__(self, nbytes: int, old: Optional[_PendingBytes] = None):
        super().__init__(nbytes)
        if old is not None:  # keep the other families' bookkeeping (their ops hold the buffer)
            self.__dict__.update(old.__dict__)
        self.readers: Dict[int, tuple] = {}  # wgmma id -> (byte indices, "file:line")

    @classmethod
    def of(cls, buf) -> "_SmemGuard":
        cur = getattr(buf, "async_pending", None)
        if not isinstance(cur, cls):
            cur = buf.async_pending = cls(buf.data.size, cur)
        return cur

    def check(self, idx, frame, op, what=None, reading=None) -> None:
        super().check(idx, frame, op, what, **({} if reading is None else {"reading": reading}))
        if reading is None:
            reading = op.name in self.READERS
        if reading or not self.readers:
            return
        flat = np.asarray(idx).reshape(-1)
        for mine, where in self.readers.values():
            if np.isin(flat, mine).any():
                what = what or {"ttg.local_store": "local_store writes",
                                "ttg.local_alloc": "local_alloc writes"}.get(op.name,
                                                                             f"{op.name} writes")
                frame.error(op, f"race: {what} shared memory that the async warpgroup_mma at "
                                f"{where} may still be reading; retire it with "
                                f"warpgroup_mma_wait first")


class WgmmaState:
    """One program's in-flight wgmmas, oldest first."""

    _KEY = object()

    def __init__(self):
        self.pending: List[tuple] = []  # (InFlight, [guards it registered with])
        self.next_id = 1

    @classmethod
    def of(cls, frame) -> "WgmmaState":
        state = frame.values.get(cls._KEY)
        if state is None:
            state = frame.values[cls._KEY] = cls()
        return state

    def retire(self, keep: int) -> None:
        while len(self.pending) > keep:
            token, guards = self.pending.pop(0)
            token.retired = True
            for guard in guards:
                guard.readers.pop(token.id, None)


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


def _read_smem(view, ty: SharedMemoryType, frame, op) -> np.ndarray:
    dtype = np.dtype(ty.element.np)
    idx = view._bytes(op, frame, dtype.itemsize)
    ok = view.buffer.written[idx].all(axis=-1)
    if not ok.all():
        first = [int(c) for c in np.argwhere(~ok)[0]]
        frame.error(op, f"warpgroup_mma reads uninitialized shared memory: element {first} of "
                        f"the {list(ty.shape)} operand was never written (allocation at "
                        f"{view.buffer.where})")
    return np.ascontiguousarray(view.buffer.data[idx]).view(dtype).reshape(tuple(ty.shape))


def _truncate_to_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 read from shared memory as tf32: the tensor cores ignore the 13 low mantissa bits."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def _raw(frame, v):
    """The value without the in-flight check: wgmma may chain on an in-flight accumulator (the
    hardware orders MMAs on the same registers), and waits take tokens."""
    return frame.raw(v)


# ---- ops --------------------------------------------------------------------------------------

class WarpGroupDotOp(OpDef):
    """`ttng.warp_group_dot [a, b, acc, use_acc] {is_async, input_precision,
    max_num_imprecise_acc}`."""

    name = WGMMA
    layout_rule = OWN_LAYOUTS
    user_name = "warpgroup_mma"
    memory_effects = frozenset({READ_SHARED})

    @staticmethod
    def build(b, a, bm, acc, use_acc, precision=None, max_num_imprecise_acc=None,
              is_async=False):
        attrs = {"is_async": bool(is_async)}
        if a.type.element == float32:
            attrs["input_precision"] = precision or "tf32"
        if max_num_imprecise_acc is not None:
            attrs["max_num_imprecise_acc"] = int(max_num_imprecise_acc)
        return b.create(WGMMA, [a, bm, acc, use_acc], [acc.type], attrs).result

    def print_attrs(self, op):
        return format_attrs(op.attrs)

    def verify(self, op):
        if len(op.operands) != 4:
            raise VerificationError("expected operands [a, b, acc, use_acc]", op)
        a, bm, acc, use_acc = (v.type for v in op.operands)
        if use_acc != int1:
            raise VerificationError(f"use_acc must be an i1 scalar, got {use_acc}", op)
        try:
            check_warpgroup_mma(a, bm, acc, op.attrs.get("input_precision", ""),
                                op.attrs.get("max_num_imprecise_acc"))
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if op.result.type != acc:
            raise VerificationError(f"result type {op.result.type} must be acc's type {acc}", op)

    def interpret(self, op, frame):
        a_v, b_v, acc_v, use_v = op.operands
        state = WgmmaState.of(frame)
        guards = []
        mats = []
        for v in (a_v, b_v):
            if isinstance(v.type, SharedMemoryType):
                view = frame[v]
                mats.append(_read_smem(view, v.type, frame, op))
                guards.append((_SmemGuard.of(view.buffer), view, v.type))
                hb = current_hb(frame)
                if hb is not None:  # the issuing partition reads its operands
                    hb.access(frame, op, view.buffer, _operand_bytes(view, v.type),
                              write=False, what="warpgroup_mma reads", noun="wgmma read",
                              engine="wgmma")
            else:
                mats.append(np.asarray(frame[v]))
        a, b = mats
        acc = _raw(frame, acc_v)
        if isinstance(acc, InFlight):
            acc = acc.value
        if op.attrs.get("input_precision") == "tf32":
            a = round_to_tf32(a) if isinstance(a_v.type, TensorType) else _truncate_to_tf32(a)
            b = _truncate_to_tf32(b)
        out_np = op.result.type.element.np
        res = a.astype(np.float32) @ b.astype(np.float32)
        if bool(frame[use_v]):
            res = res + np.asarray(acc).astype(np.float32)
        res = res.astype(out_np)
        if not op.attrs.get("is_async"):
            state.retire(0)  # wgmma.wait_group 0 retires every earlier group too
            return [res]
        token = InFlight(res, _where(op), state.next_id)
        state.next_id += 1
        registered = []
        for guard, view, ty in guards:
            idx = (view.offsets[..., None]
                   + np.arange(ty.element.itemsize, dtype=np.int64)).reshape(-1)
            guard.readers[token.id] = (idx, token.where)
            registered.append(guard)
        state.pending.append((token, registered))
        return [token]


def _operand_bytes(view, ty) -> np.ndarray:
    return (view.offsets[..., None]
            + np.arange(ty.element.itemsize, dtype=np.int64)).reshape(-1)


class WarpGroupDotWaitOp(OpDef):
    """`ttng.warp_group_dot_wait [deps...] {pendings}`: wait until at most `pendings` wgmmas
    are in flight; the results are the deps, safe to read if their MMA retired."""

    name = WAIT
    layout_rule = OWN_LAYOUTS
    needs_all_warps = True  # wgmma.wait_group is .sync.aligned over the warpgroup

    @staticmethod
    def build(b, deps, pendings: int):
        return b.create(WAIT, list(deps), [d.type for d in deps], {"pendings": int(pendings)})

    def verify(self, op):
        n = op.attrs.get("pendings")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            # wgmma.wait_group takes an immediate: a compile-time count.
            raise VerificationError(f"num_outstanding must be a non-negative int, got {n!r}", op)
        if [r.type for r in op.results] != [d.type for d in op.operands]:
            raise VerificationError("results must have the deps' types", op)

    def interpret(self, op, frame):
        WgmmaState.of(frame).retire(op.attrs["pendings"])
        out = []
        for v in op.operands:
            x = _raw(frame, v)
            out.append(x.value if isinstance(x, InFlight) and x.retired else x)
        return out


def in_flight(frame) -> int:
    """How many wgmmas the current program has in flight (for tests and tools)."""
    state = frame.values.get(WgmmaState._KEY)
    return 0 if state is None else len(state.pending)


__all__ = ["WarpGroupDotOp", "WarpGroupDotWaitOp", "check_warpgroup_mma", "check_instr_n",
           "wgmma_k_width", "wgmma_instr_k", "WGMMA_TYPES", "PTX_TYPES", "InFlight",
           "smem_k_major"]
