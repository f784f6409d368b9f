"""The state one kernel's lowering shares between op rules: builder, value map, thread ids,
layout arithmetic, shared memory, and the handful of PTX primitives every rule needs.

How a distributed tensor lives in registers
-------------------------------------------
`ctx.get(v)` for a tensor value is a Python list with one `ir.Value` per *register* of the
layout's `register` input dimension (`2**len(bases["register"])` entries, replicated registers
included). Register `r` of the thread with lane `l` in warp `w` holds the element at

    coords = L(register=r) ^ L(lane=l) ^ L(warp=w)          (XOR of the set bits' bases)

`ctx.register_coords(ty)[r]` is the constant `L(register=r)` (a tuple of ints, one per dim) and
`ctx.thread_coords(ty)[d]` the runtime part `L(lane, warp)` of dim `d` (an i32). For blocked
layouts the register bits and the lane/warp bits of a dim never overlap, so the XOR is an OR
and also an ADD; `ctx.element_coords` uses `or` whenever the bits are provably disjoint, so
LLVM can fold the constant part into addressing. Scalars are a single `ir.Value`.

Contract for lowering rules (`OpDef.lower(op, ctx)`): emit code through `ctx.builder` and
return one lowered value per result (a list of registers for a tensor result), or None for an
op without results. A rule may instead call `ctx.set` itself and return None.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from llvmlite import ir

from shared_codegen.errors import CompilationError
from shared_codegen.ir.core import Block, Operation, Value
from shared_codegen.ir.types import IRType, PointerType, ScalarType, TensorType
from shared_codegen.lowering.scratch import ScratchClaims, settle as settle_scratch

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
VOID = ir.VoidType()
GLOBAL_PTR = ir.PointerType(addrspace=1)
SHARED_PTR = ir.PointerType(addrspace=3)

FULL_MASK = 0xFFFFFFFF


class BFloatType(ir.types._BaseFloatType):
    """LLVM's `bfloat` (llvmlite 0.50 has no class for it). NVPTX lowers `fpext`/`fptrunc` on
    it to `cvt.f32.bf16` / `cvt.rn.bf16.f32` (sm_80+), and bf16 add/mul natively on sm_90."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        import ml_dtypes
        bits = int(np.asarray(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
        return f"0xR{bits:04X}"


BFloatType._create_instance()
BF16 = BFloatType()


# The most shared memory one CTA may use on sm_90 / sm_100 (227 KB; CUDA programming guide,
# "Compute capabilities", technical specifications).
MAX_SHARED_BYTES = 227 * 1024


class LoweringError(CompilationError):
    """A kernel could not be lowered; the message names the op and its source line."""

    def __init__(self, message: str, op: Optional[Operation] = None):
        if op is not None:
            where = f"{op.loc}" if op.loc.line else "<unknown location>"
            message = f"{where}: {op.name}: {message}"
            if op.loc.source_line:
                message += f"\n    {op.loc.source_line.strip()}"
        super().__init__(message)
        self.op = op
        if op is not None and op.loc.line:
            self.file, self.line = op.loc.file, op.loc.line


def llvm_type(ty: IRType) -> ir.Type:
    """The LLVM type of one element of `ty`: pointers are opaque `ptr addrspace(N)`, fp8 is
    stored as i8 (converted with `cvt` instructions), bf16 is LLVM `bfloat`."""
    ty = ty.scalar if isinstance(ty, TensorType) else ty
    if isinstance(ty, PointerType):
        return ir.PointerType(addrspace=ty.address_space)
    if not isinstance(ty, ScalarType):
        raise TypeError(f"no LLVM type for {ty}")
    if ty.kind == "float":
        return {8: I8, 16: BF16 if ty.is_bf16() else F16, 32: F32, 64: F64}[ty.bits]
    return ir.IntType(ty.bits)


def _popcount_union_disjoint(values: Sequence[int]) -> bool:
    seen = 0
    for v in values:
        if seen & v:
            return False
        seen |= v
    return True


class LoweringContext:
    """See the module docstring. One context lowers one kernel function."""

    def __init__(self, module: ir.Module, function: ir.Function, *, num_warps: int,
                 threads_per_warp: int = 32, target: str = "sm_90a",
                 axis_info: Any = None, fp_fusion: bool = False):
        self.module = module
        self.function = function
        self.num_warps = int(num_warps)
        self.threads_per_warp = int(threads_per_warp)
        self.target = target
        self.axis_info = axis_info  # the axis analysis result, or None (see vectorize.py)
        # Float mul/add/sub carry LLVM's `contract` flag, so a multiply feeding an add becomes
        # one fma.rn (Triton's enable_fp_fusion; module attr `enable_fp_fusion`).
        self.fp_fusion = fp_fusion
        self.shared_bytes = 0
        # Static allocations (`ttg.local_alloc`), planned by the stages before lowering
        # (shared_codegen/stages.py): their byte offsets, which allocations each descriptor
        # may view, and their total size; scratch (`request_shared`) starts after them.
        self.shared_offsets: Dict[Operation, int] = {}
        self.shared_aliases: Dict[Value, Any] = {}
        self.static_shared_bytes = 0
        self._scratch = None
        # Barrier bookkeeping for shared-memory hazard tracking (ops/shared_memory/lowering.py):
        # how many `bar.sync` were emitted, and the basic block of the last one.
        self.barrier_count = 0
        self.barrier_block = None
        # Scratch claimed by the exchanges lowered so far (lowering/scratch.py): which bytes
        # may still be read, so a claim needs a barrier before it only where they may be.
        self.scratch_claims = ScratchClaims()
        # Where `barrier()` put each bar.sync: (the op being lowered, named barrier or None),
        # which the lower_to_llvm stage's dump lists; `current_op` is that op.
        self.barriers: List[tuple] = []
        self.current_op: Optional[Operation] = None
        # (barrier id, thread count) that `barrier()` uses instead of `bar.sync 0`, set while
        # lowering a warp-specialized kernel (ops/warp_specialize/lowering.py).
        self.named_barrier = None
        # The `scf.if` on a `gl.warp_any` answer being lowered, or None: its branch runs in
        # some warps only, so no barrier or scratch shared memory may be asked for inside.
        self.warp_branch: Optional[Operation] = None
        # First warp of the partition being lowered (warp_id() counts from it); tensor memory
        # needs the absolute warp: warp w reaches TMEM lanes 32*(w%4) ...
        self.partition_first_warp = 0
        # The partition being lowered, by the name debug-mode records give it.
        self.partition_name = "default"
        # Debug-mode instrumentation (lowering/debug_checks.py), or None: debug off emits
        # nothing.
        self.debug = None
        # Timeline events (lowering/timeline.py), or None: profiling off emits nothing.
        self.timeline = None
        # The kernel's tensor-memory base address (ops/tensor_memory/lowering.py), or None.
        self.tmem_base = None
        # What `sync_shared` (ops/shared_memory/lowering.py) knows of earlier shared-memory
        # accesses: (block, barrier_count, pending accesses) as of the last one, or None before
        # the first. `shared_accesses_ordered` resets it after a CTA-wide barrier.
        self.shared_access_state = None
        # True inside a warp-specialized partition that never writes an mbarrier word, where
        # `sync_shared` needs no barrier before a wait (ops/warp_specialize/lowering.py).
        self.mbarrier_words_settled = False
        # The kernel's warp-specialization lowering state (ops/warp_specialize/lowering.py).
        self.warp_spec = None
        self._tid_is_zero = None
        self._values: Dict[Value, Any] = {}
        self._layouts: Dict[Any, Any] = {}
        self._thread_coords: Dict[Any, List[ir.Value]] = {}
        self._smem = None
        # Two blocks: `prologue` holds values computed once per thread (ids, per-layout thread
        # coordinates) so they dominate every use, even uses first requested inside a loop or
        # branch; `body` is where the kernel's ops start.
        prologue = function.append_basic_block("prologue")
        body = function.append_basic_block("body")
        self.kernel_prologue = prologue
        self.entry_builder = ir.IRBuilder(prologue)
        self._prologue_br = self.entry_builder.branch(body)
        self.entry_builder.position_before(self._prologue_br)
        self.builder = ir.IRBuilder(body)
        b = self.entry_builder
        tid = self._call_on(b, "llvm.nvvm.read.ptx.sreg.tid.x", I32, [])
        self._tid = tid
        self._lane = b.and_(tid, ir.Constant(I32, self.threads_per_warp - 1), name="lane")
        warp = b.lshr(tid, ir.Constant(I32, self.threads_per_warp.bit_length() - 1))
        # Every lane of a warp holds the same warp id, but LLVM cannot see that from tid; a
        # shfl.sync.idx from lane 0 makes it provably uniform, so branches on it stay uniform.
        self._warp = self._shfl_on(b, "idx", warp, ir.Constant(I32, 0), name="warp")

    # ---- values ---------------------------------------------------------------------------
    def get(self, value: Value):
        """The lowered form of `value`: an ir.Value (scalar) or list of ir.Values (tensor)."""
        try:
            return self._values[value]
        except KeyError:
            raise LoweringError(f"value {value!r} used before it was lowered") from None

    def set(self, value: Value, lowered) -> None:
        if isinstance(value.type, TensorType):
            lowered = list(lowered)
            want = self.num_registers(value.type)
            if len(lowered) != want:
                raise LoweringError(f"{value!r} lowered to {len(lowered)} registers, its layout "
                                    f"has {want}")
        self._values[value] = lowered

    def is_set(self, value: Value) -> bool:
        return value in self._values

    # ---- types and constants --------------------------------------------------------------
    @staticmethod
    def llvm_type(ty: IRType) -> ir.Type:
        return llvm_type(ty)

    def constant(self, ty: IRType, value) -> ir.Constant:
        """An LLVM constant of scalar type `ty` (the element type when `ty` is a tensor)."""
        ty = ty.scalar if isinstance(ty, TensorType) else ty
        lty = llvm_type(ty)
        if isinstance(ty, PointerType):
            return ir.Constant(I64, int(value)).inttoptr(lty)
        if ty.is_fp8():
            bits = int(np.asarray(float(value), dtype=ty.np).view(np.uint8))
            return ir.Constant(I8, bits)
        if ty.is_floating():
            return ir.Constant(lty, float(value))
        if ty.bits == 1:
            return ir.Constant(I1, int(bool(value)))
        v = int(value) & ((1 << ty.bits) - 1)
        return ir.Constant(lty, v)

    def i32(self, value: int) -> ir.Constant:
        return ir.Constant(I32, int(value) & FULL_MASK)

    # ---- thread ids -----------------------------------------------------------------------
    def thread_id(self) -> ir.Value:
        return self._tid

    def lane_id(self) -> ir.Value:
        return self._lane

    def warp_id(self) -> ir.Value:
        """The warp index, warp-uniform (see __init__)."""
        return self._warp

    def thread_is_zero(self) -> ir.Value:
        """`thread_id() == 0` as an i1, computed once in the prologue (once per partition
        inside a warp-specialized kernel)."""
        if self._tid_is_zero is None:
            self._tid_is_zero = self.entry_builder.icmp_unsigned("==", self.thread_id(),
                                                                 self.i32(0))
        return self._tid_is_zero

    # ---- layouts --------------------------------------------------------------------------
    def linear_layout(self, ty: TensorType):
        """`to_linear_layout(ty.layout, ty.shape)`, cached per (layout, shape)."""
        if not isinstance(ty, TensorType) or ty.layout is None:
            raise LoweringError(f"tensor {ty} has no layout; run layout assignment first")
        key = (ty.layout, tuple(ty.shape))
        ll = self._layouts.get(key)
        if ll is None:
            ll = _to_linear(ty.layout, tuple(ty.shape))
            self._layouts[key] = ll
        return ll

    def num_registers(self, ty: TensorType) -> int:
        return 1 << len(self.linear_layout(ty).bases.get("register", []))

    def _bases(self, ty: TensorType, in_dim: str) -> List[tuple]:
        return list(self.linear_layout(ty).bases.get(in_dim, []))

    def register_coords(self, ty: TensorType) -> List[tuple]:
        """Per register, the constant coordinates L(register=r) (one int per dim)."""
        return _register_coords(self.linear_layout(ty))

    def thread_coords(self, ty: TensorType) -> List[ir.Value]:
        """Per dim, the i32 coordinate part L(lane=lane_id, warp=warp_id), computed once in
        the prologue (so it may be used anywhere in the kernel)."""
        ll = self.linear_layout(ty)
        cached = self._thread_coords.get(ll)
        if cached is not None:
            return cached
        b = self.entry_builder
        rank = len(ll.out_dims)
        coords = []
        for d in range(rank):
            terms = []
            values = []
            for src, name in ((self._lane, "lane"), (self._warp, "warp")):
                for bit, vec in enumerate(ll.bases.get(name, [])):
                    if vec[d]:
                        terms.append((src, bit, vec[d]))
                        values.append(vec[d])
            coords.append(_combine_bit_terms(b, terms, _popcount_union_disjoint(values)))
        self._thread_coords[ll] = coords
        return coords

    def coords_disjoint(self, ty: TensorType, dim: int) -> bool:
        """True when, along `dim`, no register bit overlaps a lane/warp bit, so that
        register_const ^ thread_part == register_const | thread_part == the sum."""
        reg = 0
        for vec in self._bases(ty, "register"):
            reg |= vec[dim]
        thr = 0
        for name in ("lane", "warp"):
            for vec in self._bases(ty, name):
                thr |= vec[dim]
        return not (reg & thr)

    def element_coords(self, ty: TensorType) -> List[List[ir.Value]]:
        """Per register, per dim, the element coordinate as an i32 (emitted at the current
        insertion point; the thread part comes from the prologue)."""
        thread = self.thread_coords(ty)
        disjoint = [self.coords_disjoint(ty, d) for d in range(len(thread))]
        out = []
        for reg in self.register_coords(ty):
            row = []
            for d, c in enumerate(reg):
                if c == 0:
                    row.append(thread[d])
                elif disjoint[d]:
                    row.append(self.builder.or_(thread[d], self.i32(c)))
                else:
                    row.append(self.builder.xor(thread[d], self.i32(c)))
            out.append(row)
        return out

    def free_variable_masks(self, ty: TensorType) -> Dict[str, int]:
        """Bits of register/lane/warp that only replicate data (Triton's free variables)."""
        return self.linear_layout(ty).get_free_variable_masks()

    def unique_registers(self, ty: TensorType) -> List[int]:
        """The registers that hold an element no lower register of the thread holds."""
        mask = self.free_variable_masks(ty).get("register", 0)
        return [r for r in range(self.num_registers(ty)) if not r & mask]

    def replication_predicate(self, ty: Optional[TensorType]) -> Optional[ir.Value]:
        """An i1 that is true in exactly one lane/warp of each group holding the same data
        (the one whose free lane and warp bits are zero), or None when nothing is replicated.
        Stores and atomics are predicated on it so each element is written once."""
        if ty is None:
            # A scalar is held by every thread: let thread 0 of the CTA act for it.
            lane_mask, warp_mask = self.threads_per_warp - 1, (1 << 30) - 1
        else:
            masks = self.free_variable_masks(ty)
            lane_mask, warp_mask = masks.get("lane", 0), masks.get("warp", 0)
        key = ("pred", lane_mask, warp_mask)
        cached = self._thread_coords.get(key)
        if cached is not None:
            return cached[0]
        b = self.entry_builder
        pred = None
        for src, mask in ((self._lane, lane_mask), (self._warp, warp_mask)):
            if mask:
                c = b.icmp_unsigned("==", b.and_(src, self.i32(mask)), self.i32(0))
                pred = c if pred is None else b.and_(pred, c)
        self._thread_coords[key] = [pred]
        return pred

    # ---- shared memory and barriers -------------------------------------------------------
    def shared_base(self) -> ir.Value:
        """`ptr addrspace(3)` to the kernel's dynamic shared memory (`@global_smem`, an
        `extern __shared__` array; the launcher passes `shared_bytes`)."""
        if self._smem is None:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0), "global_smem", addrspace=3)
            g.linkage = "external"
            g.align = 16
            # llvmlite types globals with typed pointers; the IR is opaque-pointer IR, so give
            # the global the opaque `ptr addrspace(3)` type (it prints identically to LLVM).
            g.type = SHARED_PTR
            self._smem = g
        return self._smem

    def request_shared(self, nbytes: int) -> ir.Value:
        """Record that the current op needs `nbytes` of scratch shared memory and return its
        base (offset 0, or right after the static allocations when the kernel has any).
        Scratch is reused by every op: rules take it through `claim_scratch`
        (lowering/scratch.py), which puts a barrier before it where an earlier op's threads
        may still be reading, and put one between their own writes and reads. The kernel's
        `shared_bytes` is the maximum over ops."""
        self._outside_warp_branch("scratch shared memory")
        self.shared_bytes = max(self.shared_bytes, self.static_shared_bytes + int(nbytes))
        if not self.static_shared_bytes:
            return self.shared_base()
        if self._scratch is None:
            self._scratch = self.entry_builder.gep(
                self.shared_base(), [self.i32(self.static_shared_bytes)], source_etype=I8,
                name="scratch")
        return self._scratch

    def barrier(self) -> None:
        """Synchronize the threads running the current code: `bar.sync 0` for the whole CTA
        (PTX ISA 9.7.13.1 barrier; LLVM 22 spells it
        `llvm.nvvm.barrier.cta.sync.aligned.all`), or, when `named_barrier` is set (code of
        a warp-specialized kernel, see ops/warp_specialize/lowering.py), `bar.sync id, nthreads` for just
        the partition's warps."""
        self._outside_warp_branch("a barrier of every warp")
        self._emit_barrier(self.builder, self.named_barrier)
        self._record_barrier()

    def _outside_warp_branch(self, what: str) -> None:
        """Refuse `what` inside a branch that only some warps take (`gl.warp_any`): the warps
        that skip it would never arrive (a conversion or reduction through shared memory
        asks for both)."""
        if self.warp_branch is not None:
            raise LoweringError(f"the branch on gl.warp_any (line {self.warp_branch.loc.line}) "
                                f"runs in some warps only, but this op needs {what} (it "
                                f"exchanges data through shared memory); move it out of the "
                                f"branch", self.current_op)

    def _record_barrier(self) -> None:
        """Note a barrier just emitted where the builder stands: what `sync_shared` and the
        mbarrier lowering ask (`barrier_count`, `barrier_block`) and the dump's list."""
        self.barrier_count += 1
        self.barrier_block = self.builder.block
        self.barriers.append((self.current_op, self.named_barrier))

    def barrier_or(self, pred: ir.Value) -> ir.Value:
        """`barrier()` that also ORs an i1 over the same threads (PTX ISA 9.7.13.1
        `bar.red.or.pred`, which orders memory as `bar.sync` does): true in every thread
        when `pred` is true in any. Counts as the barrier it is, so an mbarrier arrival
        right after it needs no other (mbarrier lowering, `_ordered_by_last_barrier`)."""
        self._outside_warp_branch("a barrier of every warp")
        ident, nthreads = self.named_barrier or (0, None)
        count = "" if nthreads is None else f", {nthreads}"
        asm = ("{\n.reg .pred %p_in, %p_any;\nsetp.ne.u32 %p_in, $1, 0;\n"
               f"bar.red.or.pred %p_any, {ident}{count}, %p_in;\n"
               "selp.u32 $0, 1, 0, %p_any;\n}")
        flag = self.inline_asm(asm, "=r,r", I32, [self.builder.zext(pred, I32)],
                               side_effects=True)
        self._record_barrier()
        return self.builder.icmp_unsigned("!=", flag, self.i32(0))

    def barrier_placed_before(self, instruction_or_block, named_barrier, op) -> None:
        """The barrier `barrier()` would emit, placed afterwards in code already lowered: before
        `instruction_or_block` (an instruction, or a block's start). For loop-carried hazards
        found once a loop body is lowered (ops/shared_memory/lowering.py); the code being
        lowered now is elsewhere, so the hazard state at the insertion point is unchanged."""
        b = ir.IRBuilder()
        if isinstance(instruction_or_block, ir.Block):
            b.position_at_start(instruction_or_block)
        else:
            b.position_before(instruction_or_block)
        self._emit_barrier(b, named_barrier)
        self.barriers.append((op, named_barrier))

    def _emit_barrier(self, b: ir.IRBuilder, named_barrier) -> None:
        if named_barrier is not None:
            ident, nthreads = named_barrier
            self._call_on(b, "llvm.nvvm.barrier.cta.sync.aligned.count", VOID,
                          [self.i32(ident), self.i32(nthreads)])
        else:
            self._call_on(b, "llvm.nvvm.barrier.cta.sync.aligned.all", VOID, [self.i32(0)])

    def shared_accesses_ordered(self, block) -> None:
        """Record that a CTA-wide barrier before `block` ordered every earlier shared-memory
        access: `sync_shared` starts over with nothing pending."""
        self.shared_access_state = (block, self.barrier_count, {})

    # ---- warp-specialized partitions ------------------------------------------------------
    @contextmanager
    def partition(self, name: str, first_warp: int, warps: int, barrier_id: int,
                  scratch_base: int):
        """Lower the code inside the `with` for the warps [first_warp, first_warp + warps) as
        if they were a kernel of their own: ids from 0, `warps` warps, their named barrier,
        their own prologue (values rules cache there dominate only this partition's code) and
        scratch from `scratch_base`. On exit every field is restored; inside, `self.builder`
        ends where the partition's code ends."""
        saved = {k: getattr(self, k) for k in _PARTITION_SCOPED}
        tid, warp = self.thread_id(), self.warp_id()
        prologue = self.function.append_basic_block(f"{name}.prologue")
        body = self.function.append_basic_block(f"{name}.body")
        self.builder.branch(prologue)
        entry = ir.IRBuilder(prologue)
        entry.position_before(entry.branch(body))
        self.entry_builder = entry
        self._tid = entry.sub(tid, self.i32(32 * first_warp), name=f"{name}.tid") \
            if first_warp else tid
        self._warp = entry.sub(warp, self.i32(first_warp), name=f"{name}.warp") \
            if first_warp else warp
        self.num_warps = warps
        self._thread_coords = {}
        self._tid_is_zero = None
        self._scratch = None
        self.scratch_claims = ScratchClaims()
        self.static_shared_bytes = scratch_base
        self.named_barrier = (barrier_id, 32 * warps)
        self.partition_first_warp = first_warp
        self.partition_name = name
        self.builder = ir.IRBuilder(body)
        try:
            yield
        finally:
            for k, v in saved.items():
                setattr(self, k, v)

    # ---- calls ----------------------------------------------------------------------------
    def declare(self, name: str, ret_type: ir.Type, arg_types: Sequence[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret_type, list(arg_types)), name)
        return fn

    def _call_on(self, builder, name, ret_type, args, name_hint=""):
        fn = self.declare(name, ret_type, [a.type for a in args])
        return builder.call(fn, list(args), name=name_hint)

    def intrinsic(self, name: str, ret_type: ir.Type, args: Sequence[ir.Value]) -> ir.Value:
        """Call an LLVM intrinsic (declared on first use, typed by its arguments)."""
        return self._call_on(self.builder, name, ret_type, args)

    def inline_asm(self, asm: str, constraints: str, ret_type: ir.Type,
                   args: Sequence[ir.Value], side_effects: bool = False) -> ir.Value:
        """Inline PTX. `$0..$n` name outputs then inputs, as in LLVM's constraint strings;
        a struct `ret_type` returns several outputs (read them with `extract_value`)."""
        ftype = ir.FunctionType(ret_type, [a.type for a in args])
        return self.builder.call(ir.InlineAsm(ftype, asm, constraints, side_effects), list(args))

    # ---- warp shuffles (PTX ISA 9.7.9.6 shfl.sync) ----------------------------------------
    def _shfl_on(self, b, mode, value, lane, name=""):
        clamp = 0x1F if mode != "up" else 0
        fn = self.declare(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
        return b.call(fn, [ir.Constant(I32, FULL_MASK), value, lane, ir.Constant(I32, clamp)],
                      name=name)

    def _shuffle(self, mode: str, value: ir.Value, lane) -> ir.Value:
        """shfl.sync moves 32 bits; narrower values are widened, 64-bit ones split in two."""
        b = self.builder
        lane = lane if isinstance(lane, ir.Value) else self.i32(lane)
        ty = value.type
        if isinstance(ty, ir.PointerType):
            as_int = b.ptrtoint(value, I64)
            return b.inttoptr(self._shuffle(mode, as_int, lane), ty)
        if isinstance(ty, (ir.HalfType, BFloatType, ir.FloatType, ir.DoubleType)):
            width = {ir.HalfType: 16, BFloatType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(ty)]
            as_int = b.bitcast(value, ir.IntType(width))
            return b.bitcast(self._shuffle(mode, as_int, lane), ty)
        width = ty.width
        if width == 32:
            return self._shfl_on(b, mode, value, lane)
        if width < 32:
            wide = b.zext(value, I32)
            return b.trunc(self._shfl_on(b, mode, wide, lane), ty)
        if width == 64:
            lo = b.trunc(value, I32)
            hi = b.trunc(b.lshr(value, ir.Constant(I64, 32)), I32)
            lo = self._shfl_on(b, mode, lo, lane)
            hi = self._shfl_on(b, mode, hi, lane)
            return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        raise LoweringError(f"cannot shuffle a value of type {ty}")

    def shuffle_xor(self, value: ir.Value, lane_mask) -> ir.Value:
        """The value of lane `lane_id ^ lane_mask` (shfl.sync.bfly)."""
        return self._shuffle("bfly", value, lane_mask)

    def shuffle_idx(self, value: ir.Value, src_lane) -> ir.Value:
        """The value of lane `src_lane` (an int or i32; shfl.sync.idx)."""
        return self._shuffle("idx", value, src_lane)

    # ---- nested blocks and ops ------------------------------------------------------------
    def lower_op(self, op: Operation) -> None:
        opdef = op.opdef
        if opdef is None:
            raise LoweringError("unknown op (no OpDef registered)", op)
        if type(opdef).lower is _BASE_LOWER and type(opdef).lower_rule is None:
            raise LoweringError(f"no lowering rule for {op.name}", op)
        outer, self.current_op = self.current_op, op
        try:
            lowered = opdef.lower(op, self)
        except LoweringError as exc:
            if exc.op is None:
                raise LoweringError(str(exc), op) from None
            raise
        except NotImplementedError as exc:
            raise LoweringError(str(exc) or f"no lowering rule for {op.name}", op) from None
        self.current_op = outer
        settle_scratch(self, op)  # the op's reads are emitted: they count from this barrier
        if lowered is not None:
            lowered = list(lowered)
            if len(lowered) != len(op.results):
                raise LoweringError(f"lowering returned {len(lowered)} values for "
                                    f"{len(op.results)} results", op)
            for v, low in zip(op.results, lowered):
                self.set(v, low)
        for v in op.results:
            if v not in self._values:
                raise LoweringError(f"lowering rule left result #{v.index} unset", op)

    def lower_block(self, block: Block, arg_values: Sequence[Any]) -> List[Any]:
        """Lower `block`'s ops at the current insertion point with its arguments bound to
        `arg_values`; returns the lowered operands of its terminator (`scf.yield`,
        `scf.condition` (condition first), `tt.reduce.return`), [] when it has none."""
        if len(arg_values) != len(block.args):
            raise LoweringError(f"block takes {len(block.args)} arguments, got "
                                f"{len(arg_values)}")
        for arg, low in zip(block.args, arg_values):
            self.set(arg, low)
        for op in block.ops:
            if op.opdef is not None and op.opdef.terminator:
                return [self.get(v) for v in op.operands]
            self.lower_op(op)
        return []


# What `partition` replaces and restores: ids, the prologue and what rules cache in it, the
# warp count, scratch, barriers and shared-memory hazard state.
_PARTITION_SCOPED = ("partition_name", "entry_builder", "builder", "_tid", "_warp", "num_warps", "_thread_coords",
                     "_tid_is_zero", "_scratch", "scratch_claims", "static_shared_bytes",
                     "named_barrier",
                     "partition_first_warp",
                     "shared_access_state", "mbarrier_words_settled")


def _combine_bit_terms(b: ir.IRBuilder, terms, disjoint: bool) -> ir.Value:
    """XOR (or OR, when `disjoint`) of `bit(src, bit) * value` over `terms`.

    Runs of consecutive source bits that map to consecutive single powers of two (the
    blocked-layout case) become one `(src >> lo) & mask) << shift`."""
    pieces = []
    i = 0
    while i < len(terms):
        src, bit, value = terms[i]
        if value & (value - 1) == 0:
            j = i + 1
            while (j < len(terms) and terms[j][0] is src and terms[j][1] == terms[j - 1][1] + 1
                   and terms[j][2] == terms[j - 1][2] * 2):
                j += 1
            n = j - i
            shift = value.bit_length() - 1
            field = src
            if bit:
                field = b.lshr(field, ir.Constant(I32, bit))
            field = b.and_(field, ir.Constant(I32, (1 << n) - 1))
            if shift:
                field = b.shl(field, ir.Constant(I32, shift))
            pieces.append(field)
            i = j
        else:
            one = b.and_(b.lshr(src, ir.Constant(I32, bit)), ir.Constant(I32, 1))
            pieces.append(b.mul(one, ir.Constant(I32, value)))
            i += 1
    if not pieces:
        return ir.Constant(I32, 0)
    acc = pieces[0]
    for p in pieces[1:]:
        acc = b.or_(acc, p) if disjoint else b.xor(acc, p)
    return acc


@functools.lru_cache(maxsize=None)
def _register_coords(ll) -> List[tuple]:
    bases = ll.bases.get("register", [])
    rank = len(ll.out_dims)
    out = []
    for r in range(1 << len(bases)):
        c = [0] * rank
        for bit, vec in enumerate(bases):
            if r >> bit & 1:
                for d in range(rank):
                    c[d] ^= vec[d]
        out.append(tuple(c))
    return out


def _to_linear(layout, shape):
    from shared_codegen.layouts import LinearLayout
    if isinstance(layout, LinearLayout):
        return layout
    method = getattr(layout, "to_linear_layout", None)
    if method is not None:
        return method(list(shape))
    from shared_codegen.layouts import to_linear_layout
    return to_linear_layout(layout, shape)


from shared_codegen.ir.core import OpDef as _OpDef  # noqa: E402

_BASE_LOWER = _OpDef.lower
