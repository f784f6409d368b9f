"""Lowering of the control-flow ops: structured control flow to basic blocks with phi nodes.

Loop-carried tensors are lists of registers, so each carried value becomes one phi per
register (`_flatten` / `_unflatten` keep the nesting). An scf.for carries 8-bit registers
four to a 32-bit phi (`_pack_bytes`): carried one byte a phi, an fp8 wgmma A operand (four
bytes a register) was rebuilt byte by byte in every iteration (attention's fp8 P: 44 PRMT
and BFI a block; packed where the bytes are made, none).
"""

from __future__ import annotations

from typing import Any, List, Tuple

from llvmlite import ir

from shared_codegen.ir.core import lowering_rule
from shared_codegen.ir.types import SharedMemoryType, scalar_of
from shared_codegen.ops.control.definition import ForOp, IfOp, WhileOp
from shared_codegen.ops.shared_memory.definition import is_whole
from shared_codegen.ops.shared_memory.lowering import BranchHazards, LoopHazards


def _flatten(values: List[Any]) -> Tuple[List[ir.Value], List[int]]:
    flat, shape = [], []
    for v in values:
        if isinstance(v, list):
            flat.extend(v)
            shape.append(len(v))
        else:
            flat.append(v)
            shape.append(-1)
    return flat, shape


def _unflatten(flat: List[ir.Value], shape: List[int]) -> List[Any]:
    out, i = [], 0
    for n in shape:
        if n < 0:
            out.append(flat[i])
            i += 1
        else:
            out.append(list(flat[i:i + n]))
            i += n
    return out


def _pack_bytes(b, flat: List[ir.Value], shape: List[int]):
    """(values, groups): runs of 8-bit registers within one carried tensor, four at a time
    in register order, become one i32 each (little-endian: the first in the low byte);
    `groups` lists, per value, how many registers it holds (1, or 4 for a packed one)."""
    out, groups, i = [], [], 0
    for n in shape:
        count = 1 if n < 0 else n
        regs = flat[i:i + count]
        i += count
        if n >= 4 and n % 4 == 0 and all(r.type == ir.IntType(8) for r in regs):
            for k in range(0, n, 4):
                out.append(_word_of_bytes(b, regs[k:k + 4]))
                groups.append(4)
        else:
            out.extend(regs)
            groups.extend([1] * count)
    return out, groups


def _halfword_of(lo: ir.Value, hi: ir.Value):
    """h when lo and hi are the low and high byte of one i16 h (trunc h and trunc (h >> 8),
    the two results of one `cvt ... e4m3x2`), else None."""
    if not all(isinstance(x, ir.CastInstr) and x.opname == "trunc" for x in (lo, hi)):
        return None
    h, shifted = lo.operands[0], hi.operands[0]
    if (h.type == ir.IntType(16) and isinstance(shifted, ir.Instruction)
            and shifted.opname == "lshr" and shifted.operands[0] is h
            and isinstance(shifted.operands[1], ir.Constant)
            and shifted.operands[1].constant == 8):
        return h
    return None


def _word_of_bytes(b, regs: List[ir.Value]) -> ir.Value:
    """Four bytes as one i32, the first in the low byte. Two halves that are each one i16
    split in two go in whole (one `mov.b32 {lo, hi}`): LLVM put such a high half back
    together byte by byte (two BFI and their conversions)."""
    halves = [_halfword_of(regs[0], regs[1]), _halfword_of(regs[2], regs[3])]
    if all(h is not None for h in halves):
        vec = ir.Constant(ir.VectorType(ir.IntType(16), 2), None)
        for j, h in enumerate(halves):
            vec = b.insert_element(vec, h, ir.Constant(ir.IntType(32), j))
        return b.bitcast(vec, ir.IntType(32))
    vec = ir.Constant(ir.VectorType(ir.IntType(8), 4), None)
    for j, r in enumerate(regs):
        vec = b.insert_element(vec, r, ir.Constant(ir.IntType(32), j))
    return b.bitcast(vec, ir.IntType(32))


def _unpack_bytes(b, values: List[ir.Value], groups: List[int]) -> List[ir.Value]:
    out = []
    for v, g in zip(values, groups):
        if g == 1:
            out.append(v)
            continue
        vec = b.bitcast(v, ir.VectorType(ir.IntType(8), 4))
        out.extend(b.extract_element(vec, ir.Constant(ir.IntType(32), j)) for j in range(4))
    return out


def _whole_views_have_no_xor(ctx, values: List[Any], types) -> List[Any]:
    """A shared-memory view of whole trailing dims of its allocation (a buffer of a ring, a
    barrier) has no XOR part (`ops/shared_memory/lowering.py`): keep the constant zero
    rather than a phi of zeros, so ops that need the XOR known (mbarriers, MMA descriptors)
    take a view that a loop or branch carried."""
    out = []
    for v, ty in zip(values, types):
        if isinstance(ty, SharedMemoryType) and is_whole(ty) and isinstance(v, list):
            v = [v[0], ctx.i32(0)]
        out.append(v)
    return out


def new_block(ctx, name: str) -> ir.Block:
    return ctx.function.append_basic_block(name)


# ---- scf.for --------------------------------------------------------------------------------

@lowering_rule(ForOp)
def lower_for(op, ctx):
    """    pre:    br header
        header: iv = phi [lb, pre], [iv + step, latch]; iters = phi ...
                br (iv < ub), body, exit
        body:   ...; br header              (the latch is wherever the body ends)
    A constant negative step compares with `>` (the interpreter's semantics)."""
    b = ctx.builder
    lb, ub, step = (ctx.get(v) for v in op.operands[:3])
    inits = [ctx.get(v) for v in op.operands[3:]]
    flat_init, shape = _flatten(inits)
    packed_init, groups = _pack_bytes(b, flat_init, shape)
    unsigned = scalar_of(op.operands[0].type).is_int_unsigned()
    pre = b.block
    hazards = LoopHazards(ctx, op)
    header, body, exit_ = (new_block(ctx, n) for n in ("for.header", "for.body", "for.exit"))
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type, name="iv")
    iv.add_incoming(lb, pre)
    phis = []
    for v in packed_init:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    cmp = b.icmp_unsigned if unsigned else b.icmp_signed
    if isinstance(step, ir.Constant) and not unsigned and _const_int(step) < 0:
        cond = cmp(">", iv, ub)
    elif isinstance(step, ir.Constant) or unsigned:
        cond = cmp("<", iv, ub)
    else:  # a runtime step: pick the comparison by its sign
        pos = b.icmp_signed(">", step, ir.Constant(step.type, 0))
        cond = b.select(pos, cmp("<", iv, ub), cmp(">", iv, ub))
    b.cbranch(cond, body, exit_)
    b.position_at_end(body)
    hazards.enter(body)

    def carried_values():  # the phis as the op's values, in the block being built
        return _whole_views_have_no_xor(ctx, _unflatten(_unpack_bytes(b, phis, groups), shape),
                                        [v.type for v in op.operands[3:]])

    carried = carried_values()
    yielded = ctx.lower_block(op.regions[0].block, [iv] + carried)
    flat_next, _ = _flatten(yielded)
    packed_next, _ = _pack_bytes(b, flat_next, shape)
    latch = b.block
    hazards.leave()
    iv.add_incoming(b.add(iv, step), latch)
    for p, v in zip(phis, packed_next):
        p.add_incoming(v, latch)
    b.branch(header)
    b.position_at_end(exit_)
    hazards.exit()
    return carried_values()  # unpacked again: the body's unpacking does not reach the exit


def _const_int(c: ir.Constant) -> int:
    v = int(c.constant)
    bits = c.type.width
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


# ---- scf.if ---------------------------------------------------------------------------------

@lowering_rule(IfOp)
def lower_if(op, ctx):
    from shared_codegen.ops.program.warp_vote import WarpAnyOp  # (program imports control)

    b = ctx.builder
    cond = ctx.get(op.operands[0])
    hazards = BranchHazards(ctx, op)
    then_bb, else_bb, merge = (new_block(ctx, n) for n in ("if.then", "if.else", "if.end"))
    b.cbranch(cond, then_bb, else_bb)
    ends = []
    outer_branch = ctx.warp_branch
    if isinstance(getattr(op.operands[0].defining_op, "opdef", None), WarpAnyOp):
        ctx.warp_branch = op  # each warp takes it on its own answer (ctx.barrier refuses)
    for region, bb in zip(op.regions, (then_bb, else_bb)):
        b.position_at_end(bb)
        hazards.enter()
        vals = ctx.lower_block(region.block, [])
        hazards.leave()
        ends.append((b.block, _flatten(vals)))
        b.branch(merge)
    ctx.warp_branch = outer_branch
    b.position_at_end(merge)
    hazards.merge()
    if not op.results:
        return None
    (then_end, (tflat, shape)), (else_end, (eflat, _)) = ends
    phis = []
    for tv, ev in zip(tflat, eflat):
        p = b.phi(tv.type)
        p.add_incoming(tv, then_end)
        p.add_incoming(ev, else_end)
        phis.append(p)
    return _whole_views_have_no_xor(ctx, _unflatten(phis, shape), [r.type for r in op.results])


# ---- scf.while ------------------------------------------------------------------------------

@lowering_rule(WhileOp)
def lower_while(op, ctx):
    """    pre:    br before
        before: args = phi [inits, pre], [yielded, after-end]; ...; br cond, after, exit
        after:  ...; br before
    The results are the values `scf.condition` forwards; they are defined in `before`,
    which dominates `exit`, so no phi is needed there."""
    b = ctx.builder
    inits = [ctx.get(v) for v in op.operands]
    flat_init, shape = _flatten(inits)
    pre = b.block
    before, after, exit_ = (new_block(ctx, n) for n in ("while.before", "while.after",
                                                          "while.exit"))
    b.branch(before)
    b.position_at_end(before)
    phis = []
    for v in flat_init:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    carried = _whole_views_have_no_xor(ctx, _unflatten(phis, shape),
                                       [v.type for v in op.operands])
    vals = ctx.lower_block(op.regions[0].block, carried)
    cond, forwarded = vals[0], vals[1:]
    b.cbranch(cond, after, exit_)
    b.position_at_end(after)
    yielded = ctx.lower_block(op.regions[1].block, forwarded)
    flat_next, _ = _flatten(yielded)
    for p, v in zip(phis, flat_next):
        p.add_incoming(v, b.block)
    b.branch(before)
    b.position_at_end(exit_)
    return forwarded


__all__ = ["lower_for", "lower_if", "lower_while", "new_block"]
