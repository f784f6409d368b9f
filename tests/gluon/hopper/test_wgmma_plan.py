"""wgmma lowering plan on the CPU: layouts against the PTX ISA fragment figures, descriptor
encoding, and a simulation of every planned instruction that reads shared memory the way the
PTX ISA says the hardware does (descriptor fields decoded, canonical layout, swizzle)."""

import numpy as np
import pytest

from gluon.layouts import DotOperandLayout, NVMMADistributedLayout, NVMMASharedLayout
from shared_codegen.ops.shared_memory.definition import offset_map, trans_result
from shared_codegen.ir.types import (SharedMemoryType, TensorType, bfloat16, float8e4nv,
                                     float16, float32)
from shared_codegen.ops.wgmma.lowering import plan_acc, plan_smem_operand, plan_wgmma


# ---- the PTX ISA, read a second time ------------------------------------------------------------
# 9.7.15.5.1.1: a warpgroup's warp w owns rows 16w .. 16w + 15 of the 64-row tile; inside them
# groupID g = lane / 4 and t = lane % 4 place the fragments (Figures 148-153).

def ptx_d(warp, lane, j):
    """Accumulator d_j (Figure 149 / 151 / 153)."""
    g, t = lane >> 2, lane % 4
    row = 16 * warp + g + (8 if j % 4 >= 2 else 0)
    return row, (j // 4) * 8 + t * 2 + (j & 1)


def ptx_a(bits, warp, lane, i):
    """Register A element a_i (Figure 148 f16/bf16, 150 tf32, 152 e4m3/e5m2)."""
    g, t = lane >> 2, lane % 4
    if bits == 16:
        row = g if i in (0, 1, 4, 5) else g + 8
        col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    elif bits == 32:
        row = g if i in (0, 2) else g + 8
        col = t if i < 2 else t + 4
    else:
        row = g if (i < 4 or 8 <= i < 12) else g + 8
        col = t * 4 + (i & 3) + (16 if i >= 8 else 0)
    return 16 * warp + row, col


def decode(desc):
    """PTX ISA 9.7.15.5.1.2.2 matrix descriptor: (start, leading offset, stride offset, swizzle
    bytes)."""
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    swz = {0: 0, 1: 128, 2: 64, 3: 32}[desc >> 62]
    return start, lbo, sbo, swz


def ptx_read_address(desc, k_major, itemsize, mn, k):
    """Byte address of element (mn, k) of the tile: the canonical layouts of PTX ISA
    9.7.15.5.1.2.1.3 in 16-byte units (T elements each), then Swizzle<b, 4, 3>."""
    start, lbo, sbo, swz = decode(desc)
    t = 16 // itemsize
    chunks = max(1, swz // 16)
    if k_major:
        rows = 16 if swz == 0 else swz  # bytes between the 8 rows of a core matrix / atom
        kk = (k % t) * itemsize + (k // t) * (lbo if swz == 0 else 16)
        off = (mn % 8) * rows + (mn // 8) * sbo + kk
    else:
        run = t * chunks  # MN elements before the next leading-offset step
        if swz == 0:
            off = (mn % t) * itemsize + (mn // t) * sbo + (k % 8) * 16 + (k // 8) * lbo
        else:
            off = (mn % run) * itemsize + (mn // run) * lbo + (k % 8) * swz + (k // 8) * sbo
    addr = start + off
    if swz:
        b = (swz // 16).bit_length() - 1
        addr ^= ((addr >> 7) & ((1 << b) - 1)) << 4
    return addr


def point(ll, dim, index):
    out = [0, 0]
    for bit, vec in enumerate(ll.bases.get(dim, [])):
        if index >> bit & 1:
            out = [out[0] ^ vec[0], out[1] ^ vec[1]]
    return tuple(out)


def at(ll, reg, lane, warp):
    r, l, w = point(ll, "register", reg), point(ll, "lane", lane), point(ll, "warp", warp)
    return r[0] ^ l[0] ^ w[0], r[1] ^ l[1] ^ w[1]


# ---- layouts against the figures ----------------------------------------------------------------

@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_accumulator_layout_registers_are_the_ptx_d_fragment(n):
    acc = NVMMADistributedLayout([3, 0], [4, 1], [16, n, 16])
    ll = acc.to_linear_layout([64, n])
    tiles, _ = plan_acc(ll, n)
    assert len(tiles) == 1 and len(tiles[0].regs) == n // 2
    for w in range(4):
        for lane in range(32):
            got = [at(ll, r, lane, w) for r in tiles[0].regs]
            assert got == [ptx_d(w, lane, j) for j in range(n // 2)]


@pytest.mark.parametrize("elem", [float16, float32, float8e4nv])
def test_register_a_layout_is_the_ptx_a_fragment(elem):
    acc = NVMMADistributedLayout([3, 0], [4, 1], [16, 32, 16])
    k = {16: 16, 32: 8, 8: 32}[elem.bits]
    ll = DotOperandLayout(0, acc, 32 // elem.bits).to_linear_layout([64, k])
    slots = 16 * k // 32
    for w in range(4):
        for lane in range(32):
            assert [at(ll, i, lane, w) for i in range(slots)] == \
                [ptx_a(elem.bits, w, lane, i) for i in range(slots)]


def test_k_major_128b_descriptor_fields_match_the_ptx_canonical_layout():
    ty = SharedMemoryType((64, 64), float16, NVMMASharedLayout(128, 16), (64, 64))
    bits = offset_map(ty).linear_bits()
    plan = plan_smem_operand([v * 2 for v in bits[0]], [v * 2 for v in bits[1]], 2, 64, 16,
                             [(0, 0), (0, 16)], "a")
    # 128-byte rows, 8-row atoms of 1024 bytes one after another; LBO unused (encoded 1).
    assert (plan.swizzle, plan.k_major, plan.lbo, plan.sbo) == (128, True, 16, 1024)
    assert plan.descriptor_hi() == (1 << 16) | (64 << 32) | (1 << 62)


def test_swizzle_0_row_major_tiles_are_rejected_with_the_fix():
    ty = SharedMemoryType((64, 64), float16, NVMMASharedLayout(0, 16), (64, 64))
    bits = offset_map(ty).linear_bits()
    with pytest.raises(ValueError, match="wgmma cannot read a \\(K-major\\): its shared layout "
                                         "is none of the wgmma canonical layouts"):
        plan_smem_operand([v * 2 for v in bits[0]], [v * 2 for v in bits[1]], 2, 64, 16,
                          [(0, 0)], "a")


# ---- simulating the plan -----------------------------------------------------------------------

def smem_type(shape, elem, swizzle, contiguous_dim0=False):
    """A [R, C] view; with contiguous_dim0 it is the permute((1, 0)) of a [C, R] allocation."""
    lay = NVMMASharedLayout(swizzle, elem.bits)
    if not contiguous_dim0:
        return SharedMemoryType(tuple(shape), elem, lay, tuple(shape))
    alloc = SharedMemoryType((shape[1], shape[0]), elem, lay, (shape[1], shape[0]))
    return trans_result(alloc, (1, 0))


def place(ty, mat):
    """Shared memory bytes -> values: element (i, j) of `mat` at its layout's address."""
    s = ty.element.itemsize
    offs = offset_map(ty).element_offsets() * s
    mem = {}
    for (i, j), o in np.ndenumerate(offs):
        mem[int(o)] = mat[i, j]
    return mem


def warp_part(offsets, warp):
    out = 0
    for j, off in enumerate(offsets):
        if (warp >> 2) >> j & 1:
            out ^= off
    return out


def simulate(elem, mnk, warps, instr_n, a_regs, a_k_major, b_k_major, swizzle, rng):
    m, n, k = mnk
    num_warps = warps[0] * warps[1]
    acc = NVMMADistributedLayout([3, 0], warps, [16, instr_n, 16])
    c_ty = TensorType((m, n), float32, acc)
    c_ll = acc.to_linear_layout([m, n])
    s = elem.itemsize
    if a_regs:
        a_ty = TensorType((m, k), elem, DotOperandLayout(0, acc, 32 // elem.bits))
        a_ll = a_ty.layout.to_linear_layout([m, k])
    else:
        a_ty, a_ll = smem_type((m, k), elem, swizzle, contiguous_dim0=not a_k_major), None
    b_ty = smem_type((k, n), elem, swizzle, contiguous_dim0=b_k_major)
    plan = plan_wgmma(a_ty, b_ty, c_ty, a_ll, c_ll)
    A = rng.integers(-3, 4, (m, k)).astype(np.float64)
    B = rng.integers(-3, 4, (k, n)).astype(np.float64)
    C = rng.integers(-3, 4, (m, n)).astype(np.float64)
    b_mem = place(b_ty, B)
    a_mem = None if a_regs else place(a_ty, A)
    n_regs = 1 << len(c_ll.bases["register"])
    d = [[C[at(c_ll, r, lane, w)] for r in range(n_regs)] for w in range(num_warps)
         for lane in range(32)]
    a_file = None
    if a_regs:
        na = 1 << len(a_ll.bases["register"])
        a_file = [[A[at(a_ll, r, lane, w)] for r in range(na)] for w in range(num_warps)
                  for lane in range(32)]
    instr_k = {16: 16, 32: 8, 8: 32}[elem.bits]
    for step in plan.steps:
        tile = plan.tiles[step.tile]
        for wg in range(num_warps // 4):
            ws = range(4 * wg, 4 * wg + 4)
            ta, tb, td = np.zeros((64, instr_k)), np.zeros((instr_k, instr_n)), \
                np.zeros((64, instr_n))
            b_desc = plan.b.descriptor_hi() | ((step.b_start ^ warp_part(plan.b_warp, 4 * wg))
                                               >> 4)
            for kk in range(instr_k):
                for nn in range(instr_n):
                    addr = ptx_read_address(b_desc, plan.b.k_major, s, nn, kk)
                    tb[kk, nn] = b_mem[addr]
            if a_regs:
                for w in ws:
                    for lane in range(32):
                        regs = [r for reg in step.a_regs for r in reg]
                        for i, r in enumerate(regs):
                            ta[ptx_a(elem.bits, w % 4, lane, i)] = a_file[w * 32 + lane][r]
            else:
                a_desc = plan.a.descriptor_hi() | ((step.a_start ^ warp_part(plan.a_warp,
                                                                             4 * wg)) >> 4)
                for mm in range(64):
                    for kk in range(instr_k):
                        ta[mm, kk] = a_mem[ptx_read_address(a_desc, plan.a.k_major, s, mm, kk)]
            for w in ws:
                for lane in range(32):
                    for j, r in enumerate(tile.regs):
                        td[ptx_d(w % 4, lane, j)] = d[w * 32 + lane][r]
            td = ta @ tb + td
            for w in ws:
                for lane in range(32):
                    for j, r in enumerate(tile.regs):
                        d[w * 32 + lane][r] = td[ptx_d(w % 4, lane, j)]
    want = A @ B + C
    for w in range(num_warps):
        for lane in range(32):
            for r in range(n_regs):
                assert d[w * 32 + lane][plan.c_rep[r]] == want[at(c_ll, r, lane, w)], (w, lane, r)
    return plan


CASES = [
    # elem, (M, N, K), warps, instr N, A in registers, A K-major, B K-major, swizzle
    (float16, (64, 64, 64), [4, 1], 64, False, True, False, 128),
    (float16, (64, 64, 64), [4, 1], 64, False, True, True, 128),
    (float16, (64, 32, 32), [4, 1], 32, False, False, True, 64),
    (float16, (128, 64, 32), [4, 1], 32, False, True, False, 64),
    (bfloat16, (64, 16, 16), [4, 1], 16, False, True, True, 32),
    (float16, (64, 64, 32), [4, 1], 64, True, True, False, 64),
    (float16, (128, 128, 64), [8, 1], 128, False, True, False, 128),
    (float16, (64, 128, 32), [4, 2], 64, False, True, True, 64),
    (float32, (64, 32, 32), [4, 1], 32, False, True, True, 128),
    (float32, (64, 16, 16), [4, 1], 16, True, True, True, 64),
    (float8e4nv, (64, 32, 64), [4, 1], 32, False, True, True, 64),
    (float8e4nv, (64, 16, 32), [4, 1], 16, True, True, True, 32),
]


@pytest.mark.parametrize("case", CASES, ids=[
    f"{c[0].name}-{'x'.join(map(str, c[1]))}-w{c[2][0]}x{c[2][1]}-n{c[3]}-"
    f"{'areg' if c[4] else ('aK' if c[5] else 'aM')}-{'bK' if c[6] else 'bN'}-s{c[7]}"
    for c in CASES])
def test_simulated_plan_reads_the_right_elements_and_computes_the_product(case):
    elem, mnk, warps, instr_n, a_regs, a_k, b_k, swz = case
    plan = simulate(elem, mnk, warps, instr_n, a_regs, a_k, b_k, swz, np.random.default_rng(0))
    assert plan.steps


def test_two_warpgroups_along_m_start_their_a_descriptors_64_rows_apart():
    plan = simulate(float16, (128, 64, 16), [8, 1], 64, False, True, False, 32,
                    np.random.default_rng(1))
    # 64 rows of 32-byte swizzled rows: 8 atoms of 8 rows x 32 bytes.
    assert plan.a_warp == [64 * 32] and plan.b_warp == [0]
