"""Lowering of `ops/shared_memory.py`: descriptors are pointers, loads and stores are
vectorized `ld.shared` / `st.shared` at offsets read off the shared layout.

A descriptor lowers to `[base, xor]`: `base` a `ptr addrspace(3)` to the view's element 0
(the allocation's planned offset, plus index / subslice arithmetic) and `xor` an i32 element
offset XORed into every address, non-zero only for subslices whose start bits interleave
with the view's own (see `OffsetMap.foldable`). Views are address arithmetic; no data moves.

Addresses. The shared layout gives each coordinate bit an offset; composed with the register
layout, every register / lane / warp bit gets one (`_offsets`), so element `r` of this thread
sits at `thread_part ^ register_part ^ xor`, the thread part computed once in the prologue.
Registers whose offsets are 1, 2, 4, ... elements from a base register, with no other bit
touching those low offset bits and a base aligned for it, form one vector access of up to 16
bytes (PTX ISA 9.7.9.8 ld, 9.7.9.9 st: `.v2` / `.v4`).

Matrices. For 16-bit elements whose plain vectors are narrower than 16 bytes, a register
layout that fits the 8x8 matrix fragment (mma operands and accumulators over row-major or
swizzled tiles, see `smem_matrix.py`) moves with `ldmatrix` (sm_75+) / `stmatrix` (sm_90+),
`.trans` where the 16 contiguous bytes run along the other dim (in the mma_v2 example, a
K step's B operand, row-major [K, N], is 8 `ldmatrix.x4.trans` instead of 64 `ld.shared.b16`).

Barriers. Like Triton's membar analysis (which runs on Gluon kernels too), lowering inserts
`bar.sync 0` (PTX ISA 9.7.13.1) where an access to shared memory may conflict with one
another thread made since the last barrier: a read after a write, or a write after a read
or write, of allocations whose bytes overlap (so reusing the bytes of a dead allocation is
ordered too), by different threads (the one thread that issues mbarrier and TMA operations
needs no barrier between its own accesses). Within one basic block the accesses are tracked
exactly. `scf.if` branches start with what was pending before them and the merge with what
either leaves (`BranchHazards`); a `for` body is checked, once lowered, against what was
pending before the loop and at the end of its previous iteration, and the barrier placed
afterwards (`LoopHazards`). Other blocks (`scf.while` bodies, blocks op rules create) start
with an unknown history, and their first access gets a barrier. `gl.thread_barrier()` and
every other `ctx.barrier()` reset the history. Ops of other families that touch shared
memory through descriptors call `sync_shared(ctx, op, descriptor, "read"|"write")`.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import SharedMemoryType, TensorType
from shared_codegen.lowering import smem_matrix
from shared_codegen.lowering.context import I8, LoweringError, llvm_type
from shared_codegen.lowering.cross_thread import (LANE, REGISTER, WARP, bases, from_storage,
                                                  storage_type, thread_coord_values, to_storage)
from shared_codegen.ops.shared_memory.definition import (ALLOC, INDEX, REINTERPRET, RESHAPE,
                                                         SUBSLICE, TRANS, LocalAllocOp, LocalLoadOp,
                                                         LocalStoreOp, MemDescIndexOp,
                                                         MemDescReinterpretOp, MemDescSubsliceOp,
                                                         alloc_alignment, alloc_bytes, index_stride,
                                                         offset_map, subslice_offset)

MAX_VECTOR_BYTES = 16


def _lowbit(n: int) -> int:
    return n & -n if n else 1 << 30


# ---- descriptors -----------------------------------------------------------------------------

def _gep_bytes(ctx, ptr, nbytes):
    if isinstance(nbytes, int):
        if not nbytes:
            return ptr
        nbytes = ctx.i32(nbytes)
    return ctx.builder.gep(ptr, [nbytes], source_etype=I8)


@lowering_rule(LocalAllocOp)
def lower_local_alloc(op, ctx):
    offset = ctx.shared_offsets.get(op)
    if offset is None:
        raise LoweringError("no shared-memory offset was planned for this allocation", op)
    base = ctx.shared_base()
    if offset:
        base = ctx.entry_builder.gep(base, [ctx.i32(offset)], source_etype=I8)
    desc = [base, ctx.i32(0)]
    if op.operands:
        ctx.set(op.result, desc)
        _store(ctx, op, op.operands[0], op.result)
    return [desc]


@lowering_rule(MemDescIndexOp)
def lower_memdesc_index(op, ctx):
    base, xor = ctx.get(op.operands[0])
    ty = op.operands[0].type
    stride = index_stride(offset_map(ty)) * ty.element.itemsize
    idx = ctx.get(op.operands[1])
    off = ctx.builder.mul(idx, ctx.i32(stride)) if stride != 1 else idx
    return [[_gep_bytes(ctx, base, off), xor]]


@lowering_rule(MemDescSubsliceOp)
def lower_memdesc_subslice(op, ctx):
    src, res = op.operands[0].type, op.result.type
    base, xor = ctx.get(op.operands[0])
    add, start_xor = subslice_offset(src, op.attrs["offsets"])
    itemsize = src.element.itemsize
    b = ctx.builder
    m = offset_map(res)
    if m.padding:
        # Padding is a sum of per-bit terms, so a start on bits the view does not use adds
        # its own padded offset.
        if not m.foldable or not _is_zero(xor):
            raise LoweringError("a subslice of a PaddedSharedLayout view must start on bits "
                                "its elements do not use (a whole-tile start)", op)
        return [[_gep_bytes(ctx, base, (add + m.pad(start_xor)) * itemsize), ctx.i32(0)]]
    if m.foldable:
        # The XOR cannot meet a bit the view sets: it is an add, folded into the base.
        base = _gep_bytes(ctx, base, (add + start_xor) * itemsize)
        if not _is_zero(xor):
            base = _gep_bytes(ctx, base, b.mul(xor, ctx.i32(itemsize)))
        return [[base, ctx.i32(0)]]
    base = _gep_bytes(ctx, base, add * itemsize)
    xor = ctx.i32(start_xor) if _is_zero(xor) else b.xor(xor, ctx.i32(start_xor))
    return [[base, xor]]


@lowering_rule(MemDescReinterpretOp)
def lower_memdesc_reinterpret(op, ctx):
    base, _ = ctx.get(op.operands[0])  # a whole view: its XOR is zero
    return [[base, ctx.i32(0)]]


def _is_zero(v) -> bool:
    return isinstance(v, ir.Constant) and int(v.constant) == 0


def _control_ops():
    """scf's op definitions; imported late, as the control family's lowering imports this
    module (its hazard tracking through branches and loops)."""
    from shared_codegen.ops.control import definition
    return definition


def base_alignment(value, _seen=None) -> int:
    """Bytes the view's base pointer is known to be aligned to (drives vector width)."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 1 << 30
    seen.add(id(value))
    op = value.defining_op
    if op is None:
        return _carried_alignment(value, seen)
    if op.name == ALLOC:
        return alloc_alignment(op.result.type.layout)
    src_align = base_alignment(op.operands[0], seen) if op.operands else 1
    if op.name == INDEX:
        ty = op.operands[0].type
        return min(src_align, _lowbit(index_stride(offset_map(ty)) * ty.element.itemsize))
    if op.name == SUBSLICE:
        src, res = op.operands[0].type, op.result.type
        add, xor = subslice_offset(src, op.attrs["offsets"])
        size = src.element.itemsize
        out = min(src_align, _lowbit(add * size))
        if offset_map(res).foldable:
            out = min(out, _lowbit(xor * size))
            if not offset_map(src).foldable:  # the operand's runtime XOR is folded too
                out = min(out, _lowbit(offset_map(src).slice_mask) * size)
        return out
    if op.name in (TRANS, RESHAPE, REINTERPRET):
        return src_align
    control = _control_ops()
    if isinstance(op.opdef, (control.ForOp, control.IfOp)):
        return _carried_alignment(value, seen)
    return 1


def _carried_alignment(value, seen) -> int:
    """Alignment of a loop-carried or if-yielded descriptor: the least of what flows in."""
    from shared_codegen.ops.warp_specialize.definition import WarpSpecializeOp, worker_operands
    control = _control_ops()
    owner = value.owner
    sources = []
    if hasattr(owner, "ops"):  # a block argument
        region = owner.parent
        op = region.parent if region is not None else None
        if op is not None and isinstance(op.opdef, control.ForOp) and value.index >= 1:
            k = value.index - 1
            sources = [op.operands[3 + k], op.regions[0].block.terminator.operands[k]]
        elif op is not None and isinstance(op.opdef, WarpSpecializeOp):
            # A worker partition's argument: the operand captured for it.
            i = list(op.regions).index(region) - 1
            if i >= 0:
                sources = [worker_operands(op)[i][value.index]]
    elif isinstance(owner.opdef, control.ForOp):
        k = value.index
        sources = [owner.operands[3 + k], owner.regions[0].block.terminator.operands[k]]
    elif isinstance(owner.opdef, control.IfOp):
        sources = [r.block.terminator.operands[value.index] for r in owner.regions]
    if not sources:
        return 1
    return min(base_alignment(s, seen) for s in sources)


# ---- barriers ------------------------------------------------------------------------------

def _inside_loop(op) -> bool:
    control = _control_ops()
    op = op.parent_op
    while op is not None:
        if isinstance(op.opdef, (control.ForOp, control.WhileOp)):
            return True
        op = op.parent_op
    return False


def _overlap(ctx, a, b) -> bool:
    if a is b:
        return True
    ta, tb = a.result.type, b.result.type
    oa, ob = ctx.shared_offsets.get(a, 0), ctx.shared_offsets.get(b, 0)
    return oa < ob + alloc_bytes(tb) and ob < oa + alloc_bytes(ta)


def _known_pending(ctx, op) -> Optional[Dict]:
    """The accesses since the last barrier at the current point, or None where unknown."""
    state = ctx.shared_access_state
    block = ctx.builder.block
    if ctx.barrier_block is block and (state is None or state[1] != ctx.barrier_count):
        return {}  # a barrier in this block since the last record
    if state is not None and state[0] is block and state[1] == ctx.barrier_count:
        return state[2]
    if state is None and not _inside_loop(op):
        return {}  # the kernel's first shared access, straight-line: nothing to order
    return None  # entered a new block: any access may be outstanding


ONE_THREAD = "@0"  # suffix of a pending kind: only the issuing thread made that access


def _kinds_conflict(kind: str, one_thread: bool, kinds) -> bool:
    """A read after a write, or a write after anything, by different threads. Two accesses
    of the one issuing thread (`thread_zero`: mbarrier init / expect / invalidate, TMA issue)
    are ordered by program order."""
    for other in kinds:
        other_one = other.endswith(ONE_THREAD)
        if (kind == "write" or other.startswith("write")) and not (one_thread and other_one):
            return True
    return False


def _conflicts(ctx, accesses, pending: Optional[Dict]) -> bool:
    """Whether any of `accesses` ((allocations, kind, settled mbarrier use, one thread)
    tuples) may conflict with `pending` (None: unknown, so anything may be outstanding)."""
    for allocs, kind, settled_mbarrier, one_thread in accesses:
        if pending is None:
            if not settled_mbarrier:
                return True
            continue
        for other, kinds in pending.items():
            if isinstance(other, LoopHazards):
                continue
            if _kinds_conflict(kind, one_thread, kinds) and any(_overlap(ctx, a, other)
                                                                for a in allocs):
                return True
    return False


def sync_shared(ctx, op, desc, kind: str, check: bool = True, record: bool = True,
                mbarrier_use: bool = False, one_thread: bool = False) -> None:
    """Emit `bar.sync` before `op` reads (`kind="read"`) or writes through `desc` when an
    earlier access since the last barrier may conflict (see the module docstring).

    cp.async (ops/async_copy/lowering.py) splits the two halves: issuing a copy orders it after
    earlier accesses (`record=False`: its bytes land later), and the `wait_group` that
    retires it records the write without a barrier of its own (`check=False`).

    `mbarrier_use`: `desc` is an mbarrier that `op` waits on, arrives on or expects bytes on.
    Those are atomic operations on the barrier word; only `mbarrier.init` / `invalidate`
    write it non-atomically. Inside a warp-specialized partition without init/invalidate
    (`ctx.mbarrier_words_settled`, set by ops/warp_specialize/lowering.py) every init happened
    before the hand-off `bar.sync`, so such a use needs no barrier even where the history is
    unknown (the history stays unknown: the block's next other access gets one).

    `one_thread`: only the issuing thread (`ops/mbarrier/lowering.thread_zero`) makes this
    access, so it needs no barrier after that thread's own earlier ones: an mbarrier's init,
    expect and a TMA load issued on it in a row, or invalidating a ring's barriers one after
    the other, need none between them."""
    allocs = ctx.shared_aliases.get(desc) or frozenset(ctx.shared_offsets)
    settled_mbarrier = mbarrier_use and ctx.mbarrier_words_settled
    pending = _known_pending(ctx, op)
    if pending is None and (settled_mbarrier or not check):
        return  # unknown history: the block's next access gets a barrier anyway
    access = (allocs, kind, settled_mbarrier, one_thread)
    if check and (pending is None or _conflicts(ctx, [access], pending)):
        ctx.barrier()
        pending = {}
    elif check:
        for loop in pending:
            if isinstance(loop, LoopHazards):  # no barrier since that loop body's start
                loop.first_accesses.append(access)
    if not record:
        return
    pending = dict(pending)
    recorded = kind + ONE_THREAD if one_thread else kind
    for a in allocs:
        pending[a] = pending.get(a, frozenset()) | {recorded}
    ctx.shared_access_state = (ctx.builder.block, ctx.barrier_count, pending)


class LoopHazards:
    """Shared-memory hazards into a loop body, decided once the body is lowered (what Triton's
    membar analysis finds by iterating to a fixed point over the CFG).

    The body is lowered as if nothing were pending at its start, except this object as a
    marker: every access made while the marker is still pending (no barrier on the way from
    the body's start, through branches and inner loops too) is kept in `first_accesses`.
    Once the body is lowered: where those may conflict with what is pending where the body
    ends (the previous iteration), a barrier goes at the body's start; otherwise, where they
    may conflict with what was pending before the loop, one goes at the end of the block
    before it (run once). A pipelined loop whose body waits on mbarriers, reads its ring with
    wgmma and refills it with TMA after a barrier thus needs no `bar.sync` at the top of each
    iteration. Checking against the previous iteration is enough: every earlier iteration
    made the same accesses, so a conflict with one is a conflict with the previous one."""

    def __init__(self, ctx, op):
        self.ctx, self.op = ctx, op
        self.before = _known_pending(ctx, op)
        self.preheader = ctx.builder.block
        self.named_barrier = ctx.named_barrier
        self.body = None
        self.at_end: Optional[Dict] = None
        self.first_accesses: List = []

    def enter(self, body) -> None:
        """Call with the builder at the start of the body's entry block."""
        # Outer loops' markers stay: what this body does before a barrier is also done
        # before one since their bodies' starts.
        outer = {k: v for k, v in (self.before or {}).items() if isinstance(k, LoopHazards)}
        self.body = body
        _start_block(self.ctx, {**outer, self: frozenset()})

    def leave(self) -> None:
        """Call with the builder at the end of the body (the latch), before its back edge."""
        self.at_end = _known_pending(self.ctx, self.op)

    def exit(self) -> None:
        """Call with the builder at the start of the loop's exit block, reached from before
        the loop or from the end of the body: what either leaves pending is pending there.
        (Places the barriers found: the builder has left the blocks they go in, so inserting
        them does not move its insertion point.)"""
        ctx = self.ctx
        if _conflicts(ctx, self.first_accesses, self.at_end):
            # Every iteration syncs first, the first one too: nothing more for `before`.
            ctx.barrier_placed_before(self.body, self.named_barrier, self.op)
        elif _conflicts(ctx, self.first_accesses, self.before):
            ctx.barrier_placed_before(self.preheader.terminator, self.named_barrier, self.op)
        after = _union(self.before, self.at_end)
        if after is not None:
            after.pop(self, None)
        _start_block(ctx, after)


class BranchHazards:
    """Shared-memory hazards through an `scf.if`: each branch starts with what was pending
    before it, and the merge block with what either branch leaves pending."""

    def __init__(self, ctx, op):
        self.ctx, self.op = ctx, op
        self.before = _known_pending(ctx, op)
        self.ends: List[Optional[Dict]] = []

    def enter(self) -> None:
        """Call with the builder at the start of a branch."""
        _start_block(self.ctx, self.before)

    def leave(self) -> None:
        """Call with the builder at the end of a branch."""
        self.ends.append(_known_pending(self.ctx, self.op))

    def merge(self) -> None:
        """Call with the builder at the start of the merge block."""
        pending: Optional[Dict] = {}
        for end in self.ends:
            pending = _union(pending, end)
        _start_block(self.ctx, pending)


def _union(a: Optional[Dict], b: Optional[Dict]) -> Optional[Dict]:
    if a is None or b is None:
        return None
    merged = dict(a)
    for alloc, kinds in b.items():
        merged[alloc] = merged.get(alloc, frozenset()) | kinds
    return merged


def _start_block(ctx, pending: Optional[Dict]) -> None:
    """The current (empty) block starts with `pending` outstanding (None: unknown)."""
    if pending is not None:
        ctx.shared_access_state = (ctx.builder.block, ctx.barrier_count, pending)


# ---- loads and stores ------------------------------------------------------------------------

class _Access:
    """How one register tensor maps onto one view: per-bit offsets and the vector plan."""

    def __init__(self, ctx, op, mty: SharedMemoryType, rty: TensorType, desc_value):
        m = offset_map(mty)
        bits = m.linear_bits()
        if bits is None:
            raise LoweringError(f"a {list(mty.shape)} view with a non-power-of-two buffer "
                                "stride cannot be accessed as one tensor; index the buffer "
                                "dim first", op)
        ll = ctx.linear_layout(rty)
        self.itemsize = mty.element.itemsize

        def offset_of(vec) -> int:
            out = 0
            for d, c in enumerate(vec):
                for j, v in enumerate(bits[d]):
                    if c >> j & 1:
                        out ^= v
            return out

        from shared_codegen.layouts import LinearLayout
        new = {dim: [(offset_of(v),) for v in vecs] for dim, vecs in ll.bases.items()}
        top = 1
        for vecs in new.values():
            for (v,) in vecs:
                top |= v
        self.offsets = LinearLayout(new, [("dim0", 1 << top.bit_length())],
                                    require_surjective=False)
        reg = [v[0] for v in bases(self.offsets, REGISTER)]
        self.reg_bits = reg
        self.reg_offset = []
        for r in range(1 << len(reg)):
            o = 0
            for j, v in enumerate(reg):
                if r >> j & 1:
                    o ^= v
            self.reg_offset.append(o)
        self.thread_mask = 0
        for dim in (LANE, WARP):
            for (v,) in bases(self.offsets, dim):
                self.thread_mask |= v
        self.xor_mask = 0 if m.foldable else m.slice_mask
        self.padding = m.padding
        if m.padding and self.xor_mask:
            raise LoweringError("a PaddedSharedLayout view whose subslice start mixes with its "
                                "own offset bits is not supported", op)
        align = base_alignment(desc_value)
        self.base_align = align
        want = max(1, min(MAX_VECTOR_BYTES, align) // self.itemsize)
        if m.padding:  # a vector stays inside one interval (the padding splits runs there)
            want = min(want, 1 << min(shift for shift, _ in m.padding))
        self.vec_bits = self._vector_bits(want)

    def _vector_bits(self, want: int) -> List[int]:
        """Register bits whose offsets are 1, 2, 4, ... elements, shortened until no other
        bit (register, lane, warp or a subslice XOR) touches the vector's offset bits."""
        chosen: List[int] = []
        while (1 << len(chosen)) < want:
            hit = [j for j, v in enumerate(self.reg_bits) if v == 1 << len(chosen)]
            if not hit:
                break
            chosen.append(hit[0])
        while chosen:
            mask = (1 << len(chosen)) - 1
            others = [v for j, v in enumerate(self.reg_bits) if j not in chosen]
            others += [self.thread_mask, self.xor_mask]
            if all(not (o & mask) for o in others):
                break
            chosen.pop()
        return chosen

    def groups(self):
        """[(constant offset, [registers in offset order])], one per distinct offset."""
        vec_mask = sum(1 << j for j in self.vec_bits)
        seen, out = set(), []
        for r in range(len(self.reg_offset)):
            if r & vec_mask:
                continue
            const = self.reg_offset[r]
            if const in seen:
                continue  # a replicated register: same element, same address
            seen.add(const)
            members = []
            for k in range(1 << len(self.vec_bits)):
                rr = r
                for i, j in enumerate(self.vec_bits):
                    if k >> i & 1:
                        rr |= 1 << j
                members.append(rr)
            out.append((const, members))
        return out

    def address(self, ctx, base, xor, thread, const: int, st, thread_mask=None):
        mask = self.thread_mask if thread_mask is None else thread_mask
        if self.padding:
            return self._padded_address(ctx, base, thread, const, mask, st)
        return smem_matrix.address(ctx.builder, base, thread, const, mask, st,
                                   None if _is_zero(xor) else xor)

    def _padded_address(self, ctx, base, thread, const: int, mask: int, st):
        """PaddedSharedLayout: the linear offset (thread part ^ constant part), then the
        padding after each interval (`OffsetMap.pad`)."""
        b = ctx.builder
        if not const:
            lin = thread
        elif not mask & const:
            lin = b.or_(thread, ctx.i32(const))
        else:
            lin = b.xor(thread, ctx.i32(const))
        idx = lin
        for shift, pad in self.padding:
            idx = b.add(idx, b.shl(b.lshr(lin, ctx.i32(shift)), ctx.i32(pad)))
        return b.gep(base, [idx], source_etype=st)

    def matrix_plan(self, ctx, op: str):
        """The ld/stmatrix side for this access (`op` "ld" / "st"), or None where the plain
        vectors are as wide (16 bytes) or the instruction does not apply: not 16-bit, below
        its architecture, rows not 16-byte aligned, or a layout the fragment does not fit."""
        need = smem_matrix.LDMATRIX_ARCH if op == "ld" else smem_matrix.STMATRIX_ARCH
        if self.itemsize != 2 or smem_matrix.arch_of(ctx) < need or self.padding:
            return None
        if (self.itemsize << len(self.vec_bits)) >= MAX_VECTOR_BYTES:
            return None  # one ld/st.shared.v4 already moves what one .x4 would
        row_bytes = smem_matrix.ROW_ELEMENTS * self.itemsize
        if self.base_align < row_bytes or self.xor_mask % smem_matrix.ROW_ELEMENTS:
            return None
        side = smem_matrix.find_matrix_side(self.offsets)
        # Fewer bytes per instruction than the plain vectors (an .x1 against a .v2): keep them.
        if side is None or 4 * side.width <= self.itemsize << len(self.vec_bits):
            return None
        return side


def _store(ctx, op, value, desc_value):
    mty, rty = desc_value.type, value.type
    acc = _Access(ctx, op, mty, rty, desc_value)
    base, xor = ctx.get(desc_value)
    regs = ctx.get(value)
    lty = llvm_type(mty.element)
    st = storage_type(lty)
    sync_shared(ctx, op, desc_value, "write")
    side = acc.matrix_plan(ctx, "st")
    if side is not None:
        _store_matrices(ctx, acc, side, base, xor, regs, st)
        return
    (thread,) = thread_coord_values(ctx, acc.offsets)
    b = ctx.builder
    for const, members in acc.groups():
        addr = acc.address(ctx, base, xor, thread, const, st)
        if len(members) == 1:
            b.store(to_storage(b, regs[members[0]]), addr, align=acc.itemsize)
            continue
        vec = ir.Constant(ir.VectorType(st, len(members)), ir.Undefined)
        for k, r in enumerate(members):
            vec = b.insert_element(vec, to_storage(b, regs[r]), ctx.i32(k))
        b.store(vec, addr, align=acc.itemsize * len(members))


def _store_matrices(ctx, acc, side, base, xor, regs, st):
    """stmatrix (PTX ISA 9.7.14.5.16) per planned access; see `smem_matrix`."""
    (thread,) = thread_coord_values(ctx, side.thread_ll)
    for a in side.accesses:
        addr = acc.address(ctx, base, xor, thread, a.offset, st, side.thread_mask)
        smem_matrix.store_matrix(ctx, side, a, addr, regs)


def _load_matrices(ctx, acc, side, base, xor, lty, st):
    """ldmatrix (PTX ISA 9.7.14.5.15) per planned access; broadcast registers are copies."""
    (thread,) = thread_coord_values(ctx, side.thread_ll)
    by_register: Dict[int, ir.Value] = {}
    for a in side.accesses:
        addr = acc.address(ctx, base, xor, thread, a.offset, st, side.thread_mask)
        by_register.update(smem_matrix.load_matrix(ctx, side, a, addr, lty))
    return smem_matrix.gather_registers(by_register, acc.offsets)


@lowering_rule(LocalStoreOp)
def lower_local_store(op, ctx):
    _store(ctx, op, op.operands[0], op.operands[1])
    return None


@lowering_rule(LocalLoadOp)
def lower_local_load(op, ctx):
    desc_value, rty = op.operands[0], op.result.type
    mty = desc_value.type
    acc = _Access(ctx, op, mty, rty, desc_value)
    base, xor = ctx.get(desc_value)
    lty = llvm_type(mty.element)
    st = storage_type(lty)
    sync_shared(ctx, op, desc_value, "read")
    side = acc.matrix_plan(ctx, "ld")
    if side is not None:
        return [_load_matrices(ctx, acc, side, base, xor, lty, st)]
    (thread,) = thread_coord_values(ctx, acc.offsets)
    b = ctx.builder
    by_offset: Dict[int, ir.Value] = {}
    for const, members in acc.groups():
        addr = acc.address(ctx, base, xor, thread, const, st)
        if len(members) == 1:
            by_offset[const] = from_storage(b, b.load(addr, typ=st, align=acc.itemsize), lty)
            continue
        vec = b.load(addr, typ=ir.VectorType(st, len(members)),
                     align=acc.itemsize * len(members))
        for k in range(len(members)):
            by_offset[const ^ k] = from_storage(b, b.extract_element(vec, ctx.i32(k)), lty)
    return [[by_offset[o] for o in acc.reg_offset]]


__all__ = ["lower_local_alloc", "lower_local_load", "lower_local_store", "lower_memdesc_index",
           "lower_memdesc_subslice", "lower_memdesc_reinterpret", "sync_shared",
           "base_alignment"]
