"""The warp-local form of `tt.gather`: warp shuffles instead of shared memory.

When every element a warp's results need lives in that same warp of the source (no warp bit
of the source layout walks the gather axis, and the result's warps hold the same other
coordinates as the source's), each result element is one `shfl.sync.idx` from the lane that
holds it (PTX ISA 9.7.9.6). Where the source lane and register come from: `P`, a right
inverse of the source layout (coordinates -> register, lane, warp), applied to the element's
coordinates, which split into a constant (the result register), the thread's lane and warp
bits, and the index read at run time. When the gather axis also walks source registers, the
register is not known at compile time: each candidate register is shuffled and the index
bits pick one, so this form is used only while there are few candidates.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from llvmlite import ir

from shared_codegen.lowering.cross_thread import _i32, register_coords

# More candidate registers than this and the shared-memory round trip is cheaper.
MAX_CANDIDATE_REGISTERS = 4


class _Inverse:
    """Source coordinates -> the (register, lane, warp) that holds them (a right inverse)."""

    def __init__(self, ll):
        self.p = ll.pseudo_invert()
        self.names = list(self.p.out_dims)

    def __call__(self, coords) -> Dict[str, int]:
        acc = {name: 0 for name in self.names}
        for d, value in enumerate(coords):
            for j, basis in enumerate(self.p.bases.get(f"dim{d}", [])):
                if value >> j & 1:
                    for name, v in zip(self.names, basis):
                        acc[name] ^= v
        return acc


def _plan(src_ll, res_ll, axis: int, axis_size: int):
    """(inverse, per-axis-bit locations) when the gather is warp-local, else None."""
    if any(any(v) for v in src_ll.bases.get("block", [])) or \
            any(any(v) for v in res_ll.bases.get("block", [])):
        return None
    try:
        inverse = _Inverse(src_ll)
    except ValueError:
        return None

    def others(vec):
        return tuple(0 if d == axis else c for d, c in enumerate(vec))

    rank = len(src_ll.out_dims)
    axis_bits = []
    for j in range(axis_size.bit_length() - 1):
        unit = [0] * rank
        unit[axis] = 1 << j
        loc = inverse(unit)
        if loc.get("warp") or loc.get("block"):
            return None  # the axis crosses warps
        axis_bits.append(loc)
    for name in ("register", "lane"):
        for vec in res_ll.bases.get(name, []):
            loc = inverse(others(vec))
            if loc.get("warp") or (name == "lane" and loc.get("register")):
                return None
    for bit, vec in enumerate(res_ll.bases.get("warp", [])):
        loc = inverse(others(vec))
        if loc.get("warp") != 1 << bit or loc.get("register"):
            return None  # this warp's results need another warp's source elements
    if 1 << sum(1 for loc in axis_bits if loc["register"]) > MAX_CANDIDATE_REGISTERS:
        return None
    return inverse, axis_bits, others


def _bit(b, value: ir.Value, j: int) -> ir.Value:
    return b.and_(b.lshr(value, _i32(j)) if j else value, _i32(1))


def _xor_scaled(b, acc: Optional[ir.Value], bit: ir.Value, constant: int):
    """acc ^ (bit ? constant : 0)."""
    if not constant:
        return acc
    term = b.mul(bit, _i32(constant))
    return term if acc is None else b.xor(acc, term)


def warp_local_gather(ctx, op, index_as_i32) -> Optional[List[ir.Value]]:
    """The result registers through shuffles, or None when the gather is not warp-local."""
    src, index = op.operands
    axis = op.attrs["axis"]
    if isinstance(ctx.llvm_type(src.type.element), ir.IntType) and \
            ctx.llvm_type(src.type.element).width == 1:
        return None
    src_ll = ctx.linear_layout(src.type)
    res_ll = ctx.linear_layout(op.result.type)
    axis_size = src.type.shape[axis]
    planned = _plan(src_ll, res_ll, axis, axis_size)
    if planned is None:
        return None
    inverse, axis_bits, others = planned
    b = ctx.builder
    # The source lane's part that this thread's own lane and warp bits decide.
    thread_lane = None
    for thread_id, name in ((ctx.lane_id(), "lane"), (ctx.warp_id(), "warp")):
        for bit, vec in enumerate(res_ll.bases.get(name, [])):
            thread_lane = _xor_scaled(b, thread_lane, _bit(b, thread_id, bit),
                                      inverse(others(vec))["lane"])
    reg_bits = [j for j, loc in enumerate(axis_bits) if loc["register"]]
    src_regs = ctx.get(src)
    idx_regs = ctx.get(index)
    out = []
    for r, c in enumerate(register_coords(res_ll)):
        const = inverse(others(c))
        idx = b.and_(index_as_i32(b, idx_regs[r]), _i32(axis_size - 1))
        lane = thread_lane
        for j, loc in enumerate(axis_bits):
            lane = _xor_scaled(b, lane, _bit(b, idx, j), loc["lane"])
        lane = _i32(const["lane"]) if lane is None else (
            b.xor(lane, _i32(const["lane"])) if const["lane"] else lane)
        chosen = None
        selector = None
        for k in range(1 << len(reg_bits)):
            reg = const["register"]
            for i, j in enumerate(reg_bits):
                if k >> i & 1:
                    reg ^= axis_bits[j]["register"]
            value = ctx.shuffle_idx(src_regs[reg], lane)
            if chosen is None:
                chosen = value
                continue
            if selector is None:
                selector = None
                for i, j in enumerate(reg_bits):
                    piece = _bit(b, idx, j)
                    piece = b.shl(piece, _i32(i)) if i else piece
                    selector = piece if selector is None else b.or_(selector, piece)
            chosen = b.select(b.icmp_unsigned("==", selector, _i32(k)), value, chosen)
        out.append(chosen)
    return out


__all__ = ["warp_local_gather", "MAX_CANDIDATE_REGISTERS"]
