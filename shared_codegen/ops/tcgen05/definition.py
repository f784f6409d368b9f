"""Blackwell tensor-core MMA: `ttng.tc_gen5_mma` (tcgen05.mma) and `ttng.tc_gen5_commit`.

    ttng.tc_gen5_mma %a, %b, %d, %use_acc, %pred[, %bars..., %bar_preds...] {num_barriers}
    ttng.tc_gen5_commit %bar[, %pred]

- `tc_gen5_mma` computes `d = a @ b + (d if use_acc else 0)` asynchronously (PTX ISA
  "tcgen05.mma"): `d` is a [M, N] tensor-memory descriptor (M = 64 or 128 lanes, fp32, or
  fp16 for fp16 inputs), `a` a [M, K] shared-memory descriptor (the SS form) or tensor-memory
  descriptor (the TS form), `b` a [K, N] shared-memory descriptor. Kinds (PTX ISA 9.7.16.2.1,
  Table 39): f16 / bf16 (`.kind::f16`, K steps of 16), fp32 as tf32 (`.kind::tf32`, K 8),
  fp8 e4m3 / e5m2 (`.kind::f8f6f4`, K 32). `pred` false issues nothing. Each barrier gets a
  `tcgen05.commit` after the MMA (when its predicate and `pred` hold).
- `tc_gen5_commit` (PTX ISA "tcgen05.commit"): the barrier receives one arrival once
  every tcgen05 MMA issued before it has completed.

Interpreter: an MMA captures its operands at issue and lands (writes `d`) at a seeded random
point (`mbarrier.progress`, each barrier op and each tcgen05 op is one), in issue order, at
the latest when the commit tracking it arrives, which happens at a random point too or when a
wait needs the barrier's phase. From issue until a wait observes the phase its commit arrived
in, the MMA owns the tensor memory it writes (and reads, in the TS form): loads and stores of
it are reported as races naming the MMA's line (`tensor_memory/interpreter.py`), and so
are writes to its shared operands (through the buffers' `async_pending`). A of the TS
form is read when the MMA lands (an earlier MMA may produce it: the tensor core runs them in
order); stores to it before the wait are races.
"""

from __future__ import annotations

from typing import List

import numpy as np

from shared_codegen.interpreter.happens_before import current as current_hb
from shared_codegen.ir.core import MemoryEffect, OpDef, VerificationError, format_attrs
from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType, float16, float32, int1
from shared_codegen.layouts import TensorMemoryLayout
from shared_codegen.layouts.relations import OWN_LAYOUTS
from shared_codegen.ops.mbarrier.definition import (_active, barrier_state, check_barrier,
                                                    progress)

MMA, COMMIT = "ttng.tc_gen5_mma", "ttng.tc_gen5_commit"

# a element -> (PTX kind, instruction K, atype/btype code of the instruction descriptor,
# PTX ISA 9.7.16.4.2 Table 42)
KINDS = {"fp16": ("f16", 16, 0), "bf16": ("f16", 16, 1), "fp32": ("tf32", 8, 2),
         "fp8e4nv": ("f8f6f4", 32, 0), "fp8e5": ("f8f6f4", 32, 1)}
MAX_INSTR_N = 256


def _where(op) -> str:
    return f"{op.loc.file}:{op.loc.line}" if op.loc.line else "<kernel>"


def check_tcgen05_mma(a, b, d) -> None:
    """ValueError, in the user's terms, unless `d += a @ b` (IR types) is a tcgen05 MMA this
    compiler handles (cta_group::1, dense)."""
    if not isinstance(d, TensorMemoryType) or not isinstance(d.layout, TensorMemoryLayout):
        raise ValueError(f"tcgen05_mma accumulates in tensor memory: acc must be a tensor "
                         f"memory descriptor (allocate_tensor_memory), got {d}")
    if not isinstance(a, (SharedMemoryType, TensorMemoryType)):
        raise ValueError(f"a must be a shared memory or tensor memory descriptor, got {a}")
    if not isinstance(b, SharedMemoryType):
        raise ValueError(f"tcgen05_mma reads b from shared memory; b must be a shared memory "
                         f"descriptor, got {b}")
    if len(a.shape) != 2 or len(b.shape) != 2 or len(d.shape) != 2:
        raise ValueError(f"tcgen05_mma takes [M, K] x [K, N] -> [M, N], got {list(a.shape)} x "
                         f"{list(b.shape)} -> {list(d.shape)}")
    if d.layout.two_ctas:  # cta_group::2: this CTA's halves (ops/tcgen05/pair.py)
        from shared_codegen.ops.tcgen05.pair import check_pair_shapes
        m, k, n = check_pair_shapes(a, b, d)
    else:
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2 or tuple(d.shape) != (m, n):
            raise ValueError(f"tcgen05_mma shapes do not match: {list(a.shape)} x "
                             f"{list(b.shape)} -> {list(d.shape)}")
    ea, eb, ed = a.element.name, b.element.name, d.element
    if ea not in KINDS or (eb != ea and not (ea.startswith("fp8") and eb.startswith("fp8"))):
        raise ValueError(f"tcgen05_mma supports fp16 or bf16, fp32 (as tf32) and fp8 (e4m3, "
                         f"e5m2) inputs of one kind; got {a.element} x {b.element}")
    if not (ed == float32 or (ed == float16 and ea in ("fp16", "fp8e4nv", "fp8e5"))):
        raise ValueError(f"tcgen05_mma accumulates {a.element} in fp32 (or fp16 for fp16 and "
                         f"fp8), got {d.element}")
    # M above 128 is several instructions, one per 128-row block of D (as Triton does).
    if not d.layout.two_ctas and not (m in (64, 128) and d.layout.block[0] == m) and \
            not (m % 128 == 0 and d.layout.block[0] == 128):
        raise ValueError(f"tcgen05_mma (cta_group::1) computes M = 64 or 128 rows, one per "
                         f"TMEM lane used; acc is {list(d.shape)} with block "
                         f"{list(d.layout.block)}: M and block[0] must be 64 or 128 and equal, "
                         f"or M a multiple of 128 with block[0] = 128")
    if d.layout.col_stride != 1:
        raise ValueError(f"the accumulator's TensorMemoryLayout must have col_stride=1, got "
                         f"{d.layout.col_stride}")
    if n % 8 or n < 8:
        raise ValueError(f"tcgen05_mma N must be a multiple of 8 (PTX ISA Table 39), got {n}")
    instr_k = KINDS[ea][1]
    if k % instr_k:
        raise ValueError(f"tcgen05_mma with {a.element} inputs takes K in steps of {instr_k}, "
                         f"got K={k}")
    if isinstance(a, TensorMemoryType):
        if a.layout.block[0] != min(m, 128) or a.layout.col_stride != 1:
            raise ValueError(f"a in tensor memory must be [M, K] on M lanes with packed "
                             f"columns (TensorMemoryLayout(block=({m}, K), col_stride=1)), "
                             f"got {a.layout!r}")


# ---- interpreter state -----------------------------------------------------------------------

class _Mma:
    """One issued MMA: operands as they were at issue, the accumulator view, its owner id."""

    what = "tcgen05_mma"  # the op's name in race reports

    def __init__(self, machine, ident, where, a, b, d_view, d_ty, use_acc):
        self.machine, self.id, self.where = machine, ident, where
        # `a` is an array, or (view, type) of tensor memory read when the MMA runs (an
        # earlier MMA may still be writing it: the tensor core orders them).
        self.a, self.b, self.d_view, self.d_ty, self.use_acc = a, b, d_view, d_ty, use_acc
        self.landed = self.retired = False
        self.smem: List[tuple] = []  # (pending bytes, byte indices, owner id) it reads
        self.tmem: List[tuple] = []  # (owner array, cells) it marked in tensor memory

    def land(self) -> None:
        """Complete this MMA and, first, every one issued before it (the tensor core runs
        them in order, so a chained accumulation sees its predecessor's result)."""
        self.machine.land_through(self)

    def _compute(self) -> None:
        a = self.a
        if isinstance(a, tuple):
            view, ty = a
            a = view.read_raw(ty)
        res = a.astype(np.float32) @ self.b.astype(np.float32)
        if self.use_acc:
            res = res + self.d_view.read_raw(self.d_ty).astype(np.float32)
        self.d_view.write_raw(res.astype(self.d_ty.element.np), self.d_ty)
        self.landed = True


class _PairMma(_Mma):
    """A two-CTA MMA: `d_view` is (leader's half, peer's half) of the accumulator."""

    def _compute(self) -> None:
        res = self.a.astype(np.float32) @ self.b.astype(np.float32)
        rows = res.shape[0] // 2
        for half, view in zip((res[:rows], res[rows:]), self.d_view):
            if self.use_acc:
                half = half + view.read_raw(self.d_ty).astype(np.float32)
            view.write_raw(half.astype(self.d_ty.element.np), self.d_ty)
        self.landed = True


class _Commit:
    """A commit: arrives once on its barrier after the MMAs issued before it complete."""

    def __init__(self, machine, barrier, mmas: List[_Mma], where: str):
        self.machine, self.barrier, self.mmas, self.where = machine, barrier, mmas, where
        self.phase_landed = None

    def land(self) -> None:
        if self.phase_landed is not None:  # already landed (a stale progress list)
            return
        for mma in self.mmas:
            if not mma.landed:
                mma.land()
        engine = self.machine.engine
        if self in engine.loads:
            engine.loads.remove(self)
        self.barrier.in_flight.remove(self)
        self.barrier.landed.append(self)
        self.phase_landed = self.barrier.phase
        self.barrier.pending -= 1  # the commit's one arrival (mbarrier::arrive::one)
        self.barrier._maybe_complete()

    def retire(self) -> None:
        """A wait observed the phase the commit arrived in: the MMAs' memory is the
        program's again."""
        machine = self.machine
        for mma in self.mmas:
            if mma.retired:  # an earlier commit that tracked it too was observed first
                continue
            mma.retired = True
            for owners, cells in mma.tmem:
                mine = owners[cells] == mma.id
                owners[tuple(c[mine] for c in cells)] = 0
            for pending, idx, ident in mma.smem:
                mine = pending.owner[idx] == ident
                pending.owner[idx[mine]] = 0
        # Later commits need not track retired MMAs: keeps long loops linear.
        machine.issued = [mma for mma in machine.issued if not mma.retired]


class Tcgen05Machine:
    """One program's tensor-core queue: MMAs not landed yet, in issue order."""

    _KEY = object()

    def __init__(self, frame):
        from shared_codegen.ops.tensor_memory.interpreter import TmemState
        from shared_codegen.ops.tma.definition import _Engine
        self.engine = _Engine.of(frame)
        self.tmem = TmemState.of(frame)
        self.queue: List[_Mma] = []
        self.issued: List[_Mma] = []  # every MMA a later commit tracks
        self.next_id = 1

    @classmethod
    def of(cls, frame) -> "Tcgen05Machine":
        machine = frame.values.get(cls._KEY)
        if machine is None:
            machine = frame.values[cls._KEY] = cls(frame)
        return machine

    def land_through(self, mma: _Mma) -> None:
        while self.queue and not mma.landed:
            first = self.queue.pop(0)
            if first in self.engine.loads:
                self.engine.loads.remove(first)
            first._compute()

    def issue(self, op, frame, a, b, d_view, d_ty, use_acc, smem_reads, kind=None,
              tmem_reads=()) -> None:
        """Queue an MMA (or, with `kind`, another tensor-core operation built like one: a
        tcgen05_copy, a scaled MMA) behind the earlier ones. `tmem_reads`: (view, type) of
        tensor memory it reads besides a TS-form `a` (scale factors)."""
        from shared_codegen.ops.tma.definition import _pending
        mma = (kind or _Mma)(self, self.next_id, _where(op), a, b, d_view, d_ty, use_acc)
        self.next_id += 1
        # Its shared operands are the MMA's until a wait observes its completion: writing
        # them is a race, reading them is not (the ids are the async engine's, negative).
        for buf, idx in smem_reads:
            pending, ident = _pending(buf), self.engine.new_id()
            pending.describe(ident, mma.where, mma.what, "reading", ADVICE,
                             reads_only=True)
            pending.owner[idx] = ident
            mma.smem.append((pending, idx, ident))
        # Between partitions the MMA accesses tensor memory as its issuer's tensor core: only
        # a commit tracking it releases that access, not a plain arrive (happens_before.py).
        name = op.opdef.user_name
        d_view.order(d_ty.element.itemsize, frame, op, write=True, what=f"{name} writes",
                     noun="tcgen05 write", engine=name, tensor_core=True)
        reads = ([a] if isinstance(a, tuple) else []) + list(tmem_reads)
        for view, ty in reads:
            view.order(ty.element.itemsize, frame, op, write=False, what=f"{name} reads",
                       noun="tcgen05 read", engine=name, tensor_core=True)
        self.tmem.owners[mma.id] = f"{mma.what} at {mma.where}"
        marks = [(self.tmem.owner, d_view.cells(d_ty.element.itemsize))]
        marks += [(self.tmem.readers, view.cells(ty.element.itemsize)) for view, ty in reads]
        for owners, cells in marks:
            owners[cells] = mma.id
            mma.tmem.append((owners, cells))
        self.queue.append(mma)
        self.issued.append(mma)
        self.engine.loads.append(mma)  # lands at a random progress point

    def commit(self, state, op) -> None:
        commit = _Commit(self, state, list(self.issued), _where(op))
        state.in_flight.append(commit)
        self.engine.loads.append(commit)

    def issue_pair(self, op, frame, a, b, d_views, d_ty, use_acc, smem_reads) -> None:
        """Queue a two-CTA MMA (the leader's): as `issue`, with the accumulator halves of
        both CTAs owned until the commits tracking it are observed."""
        from shared_codegen.ops.tma.definition import _pending
        mma = _PairMma(self, self.next_id, _where(op), a, b, d_views, d_ty, use_acc)
        self.next_id += 1
        for buf, idx in smem_reads:
            pending, ident = _pending(buf), frame.cluster.new_id()
            pending.describe(ident, mma.where, "two-CTA tcgen05_mma", "reading", ADVICE,
                             reads_only=True)
            pending.owner[idx] = ident
            mma.smem.append((pending, idx, ident))
        d_views[0].order(d_ty.element.itemsize, frame, op, write=True,
                         what="tcgen05_mma writes", noun="tcgen05 write", engine="tcgen05_mma",
                         tensor_core=True)
        for view in d_views:
            view.check(d_ty.element.itemsize, frame, op, "writes")
            view.state.owners[mma.id] = f"{mma.what} at {mma.where}"
            cells = view.cells(d_ty.element.itemsize)
            view.state.owner[cells] = mma.id
            mma.tmem.append((view.state.owner, cells))
        self.queue.append(mma)
        self.issued.append(mma)
        self.engine.loads.append(mma)


ADVICE = ("wait on the mbarrier its completion is committed to (tcgen05_commit or "
          "mbarriers=[...]) first")


def _release(frame, op, state) -> None:
    """A commit's arrival orders the issuer's earlier work before the waiters
    (interpreter/happens_before.py); it lands later, so it is carried to later phases."""
    hb = current_hb(frame)
    if hb is not None:
        hb.release(frame, op, state, carry=True, tensor_core=True)


def _read_smem(view, ty, frame, op):
    """The operand's elements and their byte indices; pending async writes to them (cp.async,
    TMA) are races, as are elements never written."""
    buf, name = view.buffer, op.opdef.user_name
    if buf.freed_at is not None:
        frame.error(op, f"{name} reads shared memory allocated at {buf.where} after "
                        f"ttg.local_dealloc at {buf.freed_at}")
    dtype = np.dtype(ty.element.np)
    idx = view.offsets[..., None] + np.arange(dtype.itemsize, dtype=np.int64)
    pending = getattr(buf, "async_pending", None)
    if pending is not None:
        pending.check(idx, frame, op, f"{name} reads", reading=True)
    ok = buf.written[idx].all(axis=-1)
    if not ok.all():
        first = [int(c) for c in np.argwhere(~ok)[0]]
        frame.error(op, f"{name} reads uninitialized shared memory: element {first} of "
                        f"the {list(ty.shape)} operand was never written (allocation at "
                        f"{buf.where})")
    data = np.ascontiguousarray(buf.data[idx]).view(dtype).reshape(tuple(ty.shape))
    return data, idx.reshape(-1)


def _read_operand(frame, op, v, smem_reads: list):
    ty = v.type
    if isinstance(ty, TensorMemoryType):
        return frame[v], ty
    view = frame[v]
    data, idx = _read_smem(view, ty, frame, op)
    smem_reads.append((view.buffer, idx))
    hb = current_hb(frame)
    if hb is not None:  # the issuing partition reads the operand (until its commit lands)
        hb.access(frame, op, view.buffer, idx, write=False, what=f"{op.opdef.user_name} reads",
                  noun="tcgen05 read", engine=op.opdef.user_name)
    return data


def _tf32(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def _split_barrier_operands(op, fixed: int):
    """An MMA's operands: its `fixed` leading ones, then its mbarriers and their predicates."""
    n = op.attrs.get("num_barriers", 0)
    return tuple(op.operands[:fixed]) + (op.operands[fixed:fixed + n],
                                         op.operands[fixed + n:fixed + 2 * n])


def _verify_mma_operands(op, fixed: int, names: str, check_types) -> None:
    """What every tcgen05 MMA verifies: its operand count (`fixed` ones called `names`, the
    last two use_acc and pred, then mbarriers and their predicates), i1 predicates,
    `check_types()` (raises ValueError on operand types that do not fit) and mbarriers."""
    n = op.attrs.get("num_barriers", 0)
    if len(op.operands) != fixed + 2 * n:
        raise VerificationError(f"expected operands [{names}, barriers..., barrier_preds...]",
                                op)
    *_, use_acc, pred, bars, preds = _split_barrier_operands(op, fixed)
    for what, v in [("use_acc", use_acc), ("pred", pred)] + \
            [("mbarrier_preds", p) for p in preds]:
        if v.type != int1:
            raise VerificationError(f"{what} must be an i1 scalar, got {v.type}", op)
    try:
        check_types()
        for bar in bars:
            check_barrier(bar.type, "each of mbarriers")
    except ValueError as exc:
        raise VerificationError(str(exc), op) from None


def _commit_to_barriers(frame, op, machine, pred_v, bars, preds) -> None:
    """An issued MMA's completion arrives on each mbarrier whose predicate holds."""
    for bar, p in zip(bars, preds):
        if bool(frame[pred_v]) and bool(frame[p]):
            state = barrier_state(frame, op, frame[bar])
            state._require_valid(frame, op)
            _release(frame, op, state)
            machine.commit(state, op)


# ---- ops -------------------------------------------------------------------------------------

class TCGen5MMAOp(OpDef):
    """`ttng.tc_gen5_mma [a, b, d, use_acc, pred, bars..., bar_preds...] {num_barriers}`."""

    name = MMA
    layout_rule = OWN_LAYOUTS
    user_name = "tcgen05_mma"
    memory_effects = frozenset({MemoryEffect.READ_SHARED, MemoryEffect.WRITE_SHARED})

    @staticmethod
    def build(b, a, bm, d, use_acc, pred, barriers=(), barrier_preds=()):
        operands = [a, bm, d, use_acc, pred] + list(barriers) + list(barrier_preds)
        return b.create(MMA, operands, [], {"num_barriers": len(barriers)})

    @staticmethod
    def parts(op):
        return _split_barrier_operands(op, 5)

    def print_attrs(self, op):
        return format_attrs(op.attrs)

    def verify(self, op):
        _verify_mma_operands(op, 5, "a, b, acc, use_acc, pred",
                             lambda: check_tcgen05_mma(*(v.type for v in op.operands[:3])))
        d = op.operands[2]
        if d.type.layout.two_ctas:
            from shared_codegen.ops.tcgen05.pair import check_one_cta_group
            check_one_cta_group(op)

    def interpret(self, op, frame):
        a_v, b_v, d_v, use_v, pred_v, bars, preds = self.parts(op)
        progress(frame)
        if d_v.type.layout.two_ctas:
            return _interpret_pair(op, frame)
        machine = Tcgen05Machine.of(frame)
        if bool(frame[pred_v]):
            smem_reads = []
            a = _read_operand(frame, op, a_v, smem_reads)
            b = _read_operand(frame, op, b_v, smem_reads)
            if b_v.type.element == float32:  # the tensor cores read tf32
                a = a if isinstance(a, tuple) else _tf32(a)
                b = _tf32(b)
            machine.issue(op, frame, a, b, frame[d_v], d_v.type, bool(frame[use_v]),
                          smem_reads)
        _commit_to_barriers(frame, op, machine, pred_v, bars, preds)
        return []


def _interpret_pair(op, frame):
    """The leader issues for both CTAs of its pair; the other CTA's call is the same MMA, so
    it does nothing itself (ops/tcgen05/pair.py)."""
    from shared_codegen.ops.tcgen05.pair import leader_and_peer, pair_operands, peer_tmem
    a_v, b_v, d_v, use_v, pred_v, bars, preds = TCGen5MMAOp.parts(op)
    peer = leader_and_peer(frame, op)
    if peer is None or not bool(frame[pred_v]):
        return []
    machine = Tcgen05Machine.of(frame)

    def read(view, ty):
        data, idx = _read_smem(view, ty, frame, op)
        return data, idx.reshape(-1)

    a, b, reads = pair_operands(frame, op, a_v, b_v, peer, read)
    hb = current_hb(frame)
    if hb is not None:  # this CTA's partitions: its own operand halves are read
        for buf, idx in reads[::2]:
            hb.access(frame, op, buf, idx, write=False, what="tcgen05_mma reads",
                      noun="tcgen05 read", engine="tcgen05_mma")
    if b_v.type.element == float32:  # the tensor cores read tf32
        a, b = _tf32(a), _tf32(b)
    mine = frame[d_v]
    machine.issue_pair(op, frame, a, b, (mine, peer_tmem(frame, mine, peer)), d_v.type,
                       bool(frame[use_v]), reads)
    for bar, p in zip(bars, preds):
        if bool(frame[p]):
            _commit_pair(op, frame, machine, frame[bar], peer)
    return []


def _commit_pair(op, frame, machine, bar_view, peer) -> None:
    """The leader's multicast commit: one arrival on the barrier at `bar_view`'s offset in
    both CTAs of the pair once the MMAs issued so far complete."""
    from shared_codegen.ops.tma.multicast import peer_view
    for rank in (frame.cta_rank, peer):
        owner = frame if rank == frame.cta_rank else frame.cluster.frame_of(rank)
        view = bar_view if rank == frame.cta_rank else \
            peer_view(frame, op, bar_view, rank, "tcgen05_commit signalling")
        state = barrier_state(owner, op, view)
        state._require_valid(frame, op)
        if rank == frame.cta_rank:
            _release(frame, op, state)
        machine.commit(state, op)


class TCGen5CommitOp(OpDef):
    """`ttng.tc_gen5_commit [bar, pred?] {has_pred}`."""

    name = COMMIT
    layout_rule = OWN_LAYOUTS
    user_name = "tcgen05_commit"
    memory_effects = frozenset({MemoryEffect.WRITE_SHARED})

    @staticmethod
    def build(b, bar, pred=None):
        return b.create(COMMIT, [bar] + ([] if pred is None else [pred]), [],
                        {"has_pred": pred is not None})

    def print_attrs(self, op):
        return ""

    def verify(self, op):
        if len(op.operands) != 1 + bool(op.attrs.get("has_pred")):
            raise VerificationError("expected operands [bar, pred?]", op)
        try:
            check_barrier(op.operands[0].type, "barrier")
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        if op.attrs.get("has_pred") and op.operands[1].type != int1:
            raise VerificationError(f"pred must be an i1 scalar, got {op.operands[1].type}", op)

    def interpret(self, op, frame):
        progress(frame)
        pred = op.operands[1] if op.attrs.get("has_pred") else None
        if not _active(frame, pred):
            return []
        from shared_codegen.ops.tcgen05.pair import leader_and_peer, pair_program
        if pair_program(frame, op):  # cta_group::2: the leader commits for the pair
            peer = leader_and_peer(frame, op)
            if peer is not None:
                _commit_pair(op, frame, Tcgen05Machine.of(frame), frame[op.operands[0]], peer)
            return []
        state = barrier_state(frame, op, frame[op.operands[0]])
        state._require_valid(frame, op)
        _release(frame, op, state)
        Tcgen05Machine.of(frame).commit(state, op)
        return []


__all__ = ["TCGen5MMAOp", "TCGen5CommitOp", "check_tcgen05_mma", "KINDS", "Tcgen05Machine"]
