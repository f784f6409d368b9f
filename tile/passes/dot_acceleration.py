"""Dot acceleration: the instruction and the layouts of every `tt.dot` (Triton's
AccelerateMatmul, for the tile DSL's layout assignment).

Three steps, hooked into `layout_assignment.assign_function_layouts`:

1. `plan_dots` (on the layout-free IR): per `tt.dot`, the instruction the target and shape
   allow, best first, and its accumulator layout:
   - `wgmma` (sm_90+): rank 2, fp16 / bf16 / fp8 / fp32-as-tf32 inputs, M a multiple of 64,
     num_warps a multiple of 4, N a multiple of 8 (16-bit B: N >= 16, a 32-byte swizzle row).
     Accumulator `NVMMADistributedLayout(version=[3, 0], warps_per_cta, [16, n, k])` with
     Triton's `warpsPerTileV3` and largest instruction N; B, and A when it is loaded, staged
     in NVMMA-swizzled shared memory where they are defined (B K-major, the transposed NVMMA
     layout, for fp8 and tf32: wgmma reads those only K-major); a computed A (attention's P)
     stays in registers as `DotOperandLayout(0, acc, 32 / bits)`, as Triton does.
   - `mma_v2` (sm_80+): rank 2, fp16 / bf16 / fp32-as-tf32 / int8, M >= 16, N >= 8; fp8 inputs
     are widened to fp16 first (mma.sync has no fp8 before sm_89). Accumulator
     `NVMMADistributedLayout(version=[2, 0], warpsPerTileV2, [16, 8])`, operands
     `DotOperandLayout(i, acc, k_width = 32 / bits)`.
   - `fma` otherwise (fp64, fp32 with input_precision='ieee', rank 3, shapes below the
     tensor-core tiles, sm_7x): the default blocked accumulator, operands
     `DotOperandLayout(i, acc, 0)`, inputs widened to the accumulator type.
   Casts the instruction needs are inserted here, before layouts exist.
2. The solver gives each accumulator class (acc and result, loop-carried included) its plan's
   layout before anything else, as Triton's RemoveLayoutConversions spreads the MMA layout.
3. `rewrite_dots` (after materialization): converts / stages the operands (for wgmma:
   `local_alloc`s, then `fence_async_shared`, since wgmma reads through the async proxy what
   the generic proxy wrote; none when wgmma reads only buffers TMA filled), and replaces the
   `tt.dot` by `ttng.warp_group_dot` (synchronous; pipelining makes it async), `ttg.mma_v2`
   or `ttg.dot_fma`: the IR a Gluon author would write.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass
from typing import Dict, List, Optional

from shared_codegen.frontend.errors import CompilationError
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block, MemoryEffect, Operation, Value, lookup_opdef
from shared_codegen.ir.passes import insert_after, insert_before
from shared_codegen.ir.types import SharedMemoryType, float16, float32, int1
from shared_codegen.layouts import (DotOperandLayout, NVMMADistributedLayout, NVMMASharedLayout,
                                    default_blocked_layout)
from shared_codegen.ops.arith.definition import CastOp, ConstantOp, cast_op_name
from shared_codegen.ops.dot.definition import (MMA_V2_TYPES, DotFmaOp, DotOp, MmaV2Op,
                                               mma_v2_k_width)
from shared_codegen.ops.fence.definition import FenceAsyncSharedOp
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, LocalDeallocOp,
                                                         LocalLoadOp, MemDescTransOp,
                                                         trans_result)
from shared_codegen.ops.memory.definition import LoadOp
from shared_codegen.ops.tensor.definition import ConvertLayoutOp, TransOp
from shared_codegen.ops.tma.definition import AsyncTMACopyGlobalToLocalOp
from shared_codegen.ops.wgmma.definition import (WGMMA_TYPES, WarpGroupDotOp,
                                                 check_warpgroup_mma, wgmma_instr_k,
                                                 wgmma_k_width)
from tile.passes.combine_dot_add import is_zero_constant


@dataclass
class DotPlan:
    kind: str                   # "wgmma", "mma_v2" or "fma"
    acc_layout: object
    operand_elem: object        # a and b are cast to this before the product (None: as is)


def is_dot(op: Operation) -> bool:
    return isinstance(op.opdef, DotOp)


def _target_cc(target: str) -> int:
    from shared_codegen.lowering.backend import parse_target
    return parse_target(target)[0]


# ---- choosing ------------------------------------------------------------------------------

def warps_per_tile_v3(m: int, n: int, num_warps: int, instr_n: int):
    """Triton's warpsPerTileV3: a warpgroup along M, then more along M while M has rows for
    them, then along N."""
    wm, wn = 4, 1
    while wm * wn < num_warps:
        if m > 16 * wm:
            wm *= 2
        else:
            wn *= 2
    return wm, wn


def wgmma_instr_n(m: int, n: int, num_warps: int) -> int:
    """The largest wgmma N (a multiple of 8 up to 256) that divides N and each warp column's
    share of it (Triton's mmaVersionToInstrShape for version 3)."""
    m_warps = max(m // 16, 1)
    n_warps = max(num_warps // m_warps, 1)
    max_n = max(n // n_warps, 8)
    for cand in range(256, 7, -8):
        if n % cand == 0 and cand <= max_n:
            return cand
    return 8


def warps_per_tile_v2(m: int, n: int, num_warps: int):
    """Triton's warpsPerTileV2: split warps over M and N by which has more 16x8 tiles left."""
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m // 16 // wm >= n // (8 * wn):
            if wm < m // 16:
                wm *= 2
            else:
                wn *= 2
        else:
            wn *= 2
    return wm, wn


def _wgmma_layout(a_elem, acc_elem, shape, precision, num_warps) -> Optional[object]:
    if len(shape) != 3 or (a_elem.name, acc_elem.name) not in WGMMA_TYPES:
        return None
    m, n, k = shape
    if a_elem == float32 and precision != "tf32":
        return None
    if num_warps % 4 or m % 64 or n % 8 or (a_elem.bits == 16 and n < 16):
        return None
    instr_n = wgmma_instr_n(m, n, num_warps)
    wm, wn = warps_per_tile_v3(m, n, num_warps, instr_n)
    if m % (16 * wm) or n % (instr_n * wn):
        # Too few rows / columns for every warp: fewer warp columns, replicate along M.
        return None
    return NVMMADistributedLayout(version=[3, 0], warps_per_cta=[wm, wn],
                                  instr_shape=[16, instr_n, wgmma_instr_k(a_elem)])


def _mma_v2_elem(a_elem, acc_elem, precision):
    """The element mma_v2 computes on for these inputs (fp8 widens to fp16), or None."""
    if a_elem.is_fp8():
        return float16 if ("fp16", acc_elem.name) in MMA_V2_TYPES else None
    if a_elem == float32 and precision != "tf32":
        return None
    return a_elem if (a_elem.name, acc_elem.name) in MMA_V2_TYPES else None


def dot_error(op: Operation, message: str) -> CompilationError:
    """A compile error at the `tl.dot` call in the kernel source."""
    loc = op.loc
    source = linecache.getline(loc.file, loc.line) if loc.line else ""
    return CompilationError(message, loc.file, loc.line, getattr(loc, "col", 0), source)


def plan_dot(op: Operation, target: str, num_warps: int) -> DotPlan:
    a, b, acc = (v.type for v in op.operands)
    a_elem, acc_elem = a.element, acc.element
    precision = op.attrs.get("input_precision", "")
    cc = _target_cc(target)
    for elem in (a_elem, b.element):
        if elem.is_fp8() and cc < 90:
            # Triton takes fp8 from sm_89; our fp8 conversions (cvt.f16x2.e4m3x2) need sm_90.
            raise dot_error(op, f"tl.dot on {elem} inputs needs sm_90 or newer, got target "
                                f"{target} (Triton also runs fp8 on sm_89; this compiler's "
                                f"fp8 conversions do not yet)")
    if len(acc.shape) == 2:
        mnk = (acc.shape[0], acc.shape[1], a.shape[1])
        same = a_elem == b.element or (a_elem.is_fp8() and b.element.is_fp8())
        if cc >= 90 and same:
            layout = _wgmma_layout(a_elem, acc_elem, mnk, precision, num_warps)
            if layout is not None:
                return DotPlan("wgmma", layout, None)
        elem = _mma_v2_elem(a_elem, acc_elem, precision) if cc >= 80 else None
        if elem is not None and (a_elem.is_fp8() or a_elem == b.element) \
                and mnk[0] >= 16 and mnk[1] >= 8:
            wm, wn = warps_per_tile_v2(mnk[0], mnk[1], num_warps)
            layout = NVMMADistributedLayout(version=[2, 0], warps_per_cta=[wm, wn],
                                            instr_shape=[16, 8])
            return DotPlan("mma_v2", layout, elem if elem != a_elem or a_elem != b.element
                           else None)
    layout = default_blocked_layout(tuple(acc.shape), num_warps)
    fma_ok = a_elem == b.element and (a_elem == acc_elem or (
        a_elem.is_floating() == acc_elem.is_floating() and not a_elem.is_fp8()
        and a_elem.bits <= acc_elem.bits))
    return DotPlan("fma", layout, None if fma_ok else acc_elem)


def _build_before(anchor: Operation, build):
    """Run `build(builder)` and move the ops it created right before `anchor`."""
    scratch = Block()
    builder = Builder(scratch, anchor.loc)
    result = build(builder)
    for new in list(scratch.ops):
        insert_before(anchor, new)
    return result


def _cast_operands(op: Operation, elem) -> None:
    for i in (0, 1):
        v = op.operands[i]
        if v.type.element == elem:
            continue
        name = cast_op_name(v.type.element, elem)
        op.operands[i] = _build_before(op, lambda b, v=v, name=name: CastOp.build(b, name, v, elem))


def plan_dots(ops: List[Operation], target: str, num_warps: int) -> Dict[Operation, DotPlan]:
    """Step 1: a plan per `tt.dot` of the (layout-free) ops, with the operand casts inserted."""
    plans = {}
    for op in ops:
        if is_dot(op):
            plan = plans[op] = plan_dot(op, target, num_warps)
            if plan.operand_elem is not None:
                _cast_operands(op, plan.operand_elem)
    return plans


def operand_buffer_bytes(plans: Dict[Operation, DotPlan], default_stages: int) -> int:
    """Shared memory the tensor-core dots' operands will take: one buffer per operand, or a
    ring of num_stages in a loop the pipeliner will run ahead (an upper bound: it may not)."""
    from shared_codegen.ops.control.definition import ForOp
    total = 0
    for op, plan in plans.items():
        if plan.kind == "fma":
            continue
        a, b = op.operands[0].type, op.operands[1].type
        per_stage = (a.numel * a.element.bits + b.numel * b.element.bits) // 8
        loop = op.parent_op
        stages = 1
        if isinstance(loop, Operation) and isinstance(loop.opdef, ForOp):
            stages = max(1, int(loop.attrs.get("num_stages", default_stages)))
        total += per_stage * stages
    return total


# ---- rewriting -----------------------------------------------------------------------------

def nvmma_shared_layout(shape, elem, k_major_dim0: bool = False) -> NVMMASharedLayout:
    """Triton's NVMMASharedEncoding for a wgmma operand: the widest swizzle (128, 64 or 32
    bytes) the contiguous dim's row fills; `k_major_dim0` stores dim 0 contiguous
    (transposed) for a [K, N] B operand that wgmma must read K-major."""
    contig = shape[0] if k_major_dim0 else shape[-1]
    row_bytes = contig * elem.bits // 8
    swizzle = next((s for s in (128, 64, 32) if row_bytes >= s), 0)
    return NVMMASharedLayout(swizzle_byte_width=swizzle, element_bitwidth=elem.bits, rank=2,
                             transposed=k_major_dim0)


def _stage_in_shared(op: Operation, index: int, layout) -> None:
    """The operand copied into shared memory right where it is defined, so a value from
    outside a loop is staged once, not every iteration."""
    v = op.operands[index]
    ty = SharedMemoryType(tuple(v.type.shape), v.type.element, layout, tuple(v.type.shape))
    owner = v.owner
    if owner is None or owner.parent is None:  # a block argument: stage it at the dot
        op.operands[index] = _build_before(op, lambda b: LocalAllocOp.build(b, ty, v))
        return
    scratch = Block()
    alloc = LocalAllocOp.build(Builder(scratch, op.loc), ty, v)
    insert_after(owner, scratch.ops[0])
    op.operands[index] = alloc


def _shared_source(v):
    """(buffer, transposed) when the register operand `v` is a `local_load` of an
    NVMMA-swizzled shared buffer (a descriptor's TMA load), possibly through layout
    conversions and a 2-D `tl.trans`; wgmma can read that buffer itself."""
    transposed = False
    while v.owner is not None and isinstance(v.owner.opdef, ConvertLayoutOp):
        v = v.owner.operands[0]
    if v.owner is not None and isinstance(v.owner.opdef, TransOp) \
            and tuple(v.owner.attrs["order"]) == (1, 0):
        transposed, v = True, v.owner.operands[0]
        while v.owner is not None and isinstance(v.owner.opdef, ConvertLayoutOp):
            v = v.owner.operands[0]
    owner = v.owner
    if owner is None or not isinstance(owner.opdef, LocalLoadOp):
        return None
    mem = owner.operands[0]
    if not isinstance(mem.type.layout, NVMMASharedLayout) or len(mem.type.shape) != 2:
        return None
    return mem, transposed


def _read_in_place(op: Operation, precision) -> Dict[int, Value]:
    """The operands wgmma reads straight from their shared buffers, as Triton reads TMA
    loads: the largest subset whose types `check_warpgroup_mma` accepts."""
    found = {}
    for index in (0, 1):
        src = _shared_source(op.operands[index])
        if src is not None:
            found[index] = src
    acc = op.operands[2].type

    def view_type(index):
        mem, transposed = found[index]
        return trans_result(mem.type, (1, 0)) if transposed else mem.type

    def fallback_type(index):
        ty = op.operands[index].type
        if index == 1 or operand_from_memory(op.operands[index]):
            k_major = index == 1 and (ty.element == float32 or ty.element.is_fp8())
            return SharedMemoryType(tuple(ty.shape), ty.element,
                                    nvmma_shared_layout(ty.shape, ty.element, k_major),
                                    tuple(ty.shape))
        return ty.with_layout(DotOperandLayout(0, acc.layout, wgmma_k_width(ty.element)))

    for subset in ([0, 1], [1], [0], []):
        chosen = [i for i in subset if i in found]
        if len(chosen) != len(subset):
            continue
        types = [view_type(i) if i in chosen else fallback_type(i) for i in (0, 1)]
        try:
            check_warpgroup_mma(types[0], types[1], acc, precision or "",
                                op.attrs.get("max_num_imprecise_acc"))
        except ValueError:
            continue
        return {i: found[i] for i in chosen}
    return {}


def _written_by_generic_proxy(mem: Value, op: Operation) -> bool:
    """Whether anything but TMA copies may write the buffer `mem` (conservatively: yes for
    a buffer that is not a plain `local_alloc`)."""
    alloc = mem.owner
    if alloc is None or not isinstance(alloc.opdef, LocalAllocOp) or alloc.operands:
        return True
    return any(mem in other.operands and MemoryEffect.WRITE_SHARED in other.opdef.memory_effects
               and not isinstance(other.opdef, AsyncTMACopyGlobalToLocalOp)
               for other in _function_ops(op))


def _use_buffer(op: Operation, index: int, mem: Value, transposed: bool) -> None:
    fn_ops = _function_ops(op)
    if transposed:
        view = _build_before(op, lambda b: MemDescTransOp.build(b, mem, (1, 0)))
    else:
        view = mem
    op.operands[index] = view
    # The buffer now lives until the wgmma: its early dealloc goes (liveness frees it).
    for other in fn_ops:
        if isinstance(other.opdef, LocalDeallocOp) and other.operands[0] is mem:
            other.parent.ops.remove(other)
            other.parent = None


def _function_ops(op: Operation):
    block = op.outermost_op.parent
    return [o for t in list(block.ops) for o in t.walk()] if block is not None else []


def operand_from_memory(v) -> bool:
    """Whether a dot operand comes from a load (through layout conversions and transposes)
    or is carried by a loop: Triton stages those in shared memory for wgmma and keeps
    computed A operands (attention's P) in registers."""
    while v.owner is not None and isinstance(v.owner.opdef, (ConvertLayoutOp, TransOp)):
        v = v.owner.operands[0]
    return v.owner is None or isinstance(v.owner.opdef, LoadOp)


def _retarget(op: Operation, opdef_cls, operands, attrs) -> None:
    op.name = opdef_cls.name
    op.opdef = lookup_opdef(op.name)
    op.operands = list(operands)
    op.attrs = attrs


def rewrite_dot(op: Operation, plan: DotPlan, convert_operand) -> None:
    """Step 3 for one `tt.dot` whose acc and result already have `plan.acc_layout`."""
    precision = op.attrs.get("input_precision")
    acc_layout = plan.acc_layout
    if plan.kind == "wgmma":
        a_ty, b_ty = op.operands[0].type, op.operands[1].type
        b_k_major = a_ty.element == float32 or a_ty.element.is_fp8()
        in_place = _read_in_place(op, precision)
        # wgmma reads through the async proxy: what the generic proxy wrote (the staging
        # stores below, or stores into a buffer read in place) needs a fence first; what only
        # TMA wrote does not (Triton fences the same way), and the fence costs a MEMBAR.
        generic_writes = any(_written_by_generic_proxy(mem, op) for mem, _ in in_place.values())
        for index, (mem, transposed) in in_place.items():
            _use_buffer(op, index, mem, transposed)
        if 0 in in_place:
            pass
        elif operand_from_memory(op.operands[0]):
            _stage_in_shared(op, 0, nvmma_shared_layout(a_ty.shape, a_ty.element))
            generic_writes = True
        else:
            convert_operand(op, 0, DotOperandLayout(0, acc_layout, wgmma_k_width(a_ty.element)),
                            exact=True)
        if 1 not in in_place:
            _stage_in_shared(op, 1, nvmma_shared_layout(b_ty.shape, b_ty.element, b_k_major))
            generic_writes = True
        if generic_writes:
            _build_before(op, lambda b: FenceAsyncSharedOp.build(b))
        # A zero accumulator (`tl.dot(a, b)`, or `acc=tl.zeros(...)`) is not read: the first K
        # step's scale-d is 0 (Triton's accumulator-init optimization), and lowering gives it
        # undefined input registers instead of a MOV of zero into each, every time it runs.
        use_acc = not is_zero_constant(op.operands[2])
        flag = _build_before(op, lambda b: ConstantOp.build(b, use_acc, int1))
        attrs = {"is_async": False}
        if precision is not None:
            attrs["input_precision"] = precision
        if "max_num_imprecise_acc" in op.attrs:
            attrs["max_num_imprecise_acc"] = op.attrs["max_num_imprecise_acc"]
        _retarget(op, WarpGroupDotOp, [*op.operands[:3], flag], attrs)
        return
    k_width = mma_v2_k_width(op.operands[0].type.element) if plan.kind == "mma_v2" else 0
    for i in (0, 1):
        convert_operand(op, i, DotOperandLayout(i, acc_layout, k_width), exact=True)
    if plan.kind == "mma_v2":
        _retarget(op, MmaV2Op, op.operands,
                  {"input_precision": "tf32"} if op.operands[0].type.element == float32
                  else {})
    else:
        _retarget(op, DotFmaOp, op.operands, {})


def rewrite_dots(plans: Dict[Operation, DotPlan], convert_operand) -> None:
    for op, plan in plans.items():
        rewrite_dot(op, plan, convert_operand)
    if plans:
        _drop_unread_register_copies(_function_ops(next(iter(plans))))


def _drop_unread_register_copies(ops) -> None:
    """The register copies of buffers wgmma now reads in place (`local_load`, and the
    conversions / transposes after it) that nothing reads any more."""
    kinds = (LocalLoadOp, ConvertLayoutOp, TransOp)
    candidates = [op for op in ops if isinstance(op.opdef, kinds)]
    changed = True
    while changed:
        changed = False
        used = {v for op in ops if op.parent is not None for v in op.operands}
        for op in candidates:
            if op.parent is not None and not any(r in used for r in op.results):
                op.parent.ops.remove(op)
                op.parent = None
                changed = True


__all__ = ["DotPlan", "plan_dot", "plan_dots", "rewrite_dots", "operand_buffer_bytes", "warps_per_tile_v2",
           "warps_per_tile_v3", "wgmma_instr_n", "nvmma_shared_layout", "is_dot"]
