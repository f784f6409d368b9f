"""tcgen05_mma_scaled (block-scaled MX MMA): interpreter numerics against a numpy decode of
the formats, scale factors in tensor memory (stores and tcgen05_copy), races word for word,
the errors, and the sm_100a PTX / cubin."""

import inspect
import re

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, TensorMemoryScalesLayout,
                                             allocate_tensor_memory, fence_async_shared,
                                             get_tmem_reg_layout, mbarrier,
                                             tcgen05_copy, tcgen05_mma_scaled, tma)
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


@gluon.jit
def _grid(ptr, R: gl.constexpr, C: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    return gl.load(ptr + rows[:, None] * C + cols[None, :])


# The "packed block" shared layout of upstream's tutorial 11 for a [128, 8] scale tile: 512
# bytes per 4 scales, byte 16 * i + 4 * j + b holding row 32 * j + i, scale b.
PACKED_BLOCK = gl.SharedLinearLayout(
    offset_bases=[[0, 1], [0, 2], [32, 0], [64, 0], [1, 0], [2, 0], [4, 0], [8, 0], [16, 0],
                  [0, 4]], block_bases=[], alignment=128)


@gluon.jit
def _scales_to_tmem(ptr, R: gl.constexpr, S: gl.constexpr, scale_layout: gl.constexpr,
                    SMEM_LAYOUT: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    x = _grid(ptr, R, S, blocked)
    tmem = allocate_tensor_memory(x.dtype, [R, S], scale_layout)
    if SMEM_LAYOUT is None:  # registers -> tcgen05.st
        reg: gl.constexpr = get_tmem_reg_layout(x.dtype, [R, S], scale_layout, gl.num_warps())
        tmem.store(gl.convert_layout(x, reg))
    else:  # shared -> tcgen05.cp (32x128b.warpx4), in order with the MMA after it
        smem = gl.allocate_shared_memory(x.dtype, [R, S], SMEM_LAYOUT, x)
        fence_async_shared()
        tcgen05_copy(smem, tmem)
    return tmem


@gluon.jit
def scaled_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, out_ptr, M: gl.constexpr,
                  N: gl.constexpr, KA: gl.constexpr, KB: gl.constexpr, S: gl.constexpr,
                  A_TYPE: gl.constexpr, B_TYPE: gl.constexpr, RACE: gl.constexpr,
                  SCALES_SMEM: gl.constexpr = None):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    # Mixed with an 8-bit format, e2m1 is read padded (.kind::mxf8f6f4).
    A_PAD: gl.constexpr = A_TYPE == "e2m1" and B_TYPE != "e2m1"
    B_PAD: gl.constexpr = B_TYPE == "e2m1" and A_TYPE != "e2m1"
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, KA], a_ptr.dtype.element_ty,
                                                                  fp4_padded=A_PAD)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([N, KB], b_ptr.dtype.element_ty,
                                                                  fp4_padded=B_PAD)
    a = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [M, KA], a_layout,
                                  _grid(a_ptr, M, KA, blocked))
    b = gl.allocate_shared_memory(b_ptr.dtype.element_ty, [N, KB], b_layout,
                                  _grid(b_ptr, N, KB, blocked))  # [N, K]: K contiguous
    scale_layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scale = _scales_to_tmem(sa_ptr, M, S, scale_layout, SCALES_SMEM)
    b_scale = _scales_to_tmem(sb_ptr, N, S, scale_layout, SCALES_SMEM)
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    acc_reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], acc_layout, gl.num_warps())
    acc = allocate_tensor_memory(gl.float32, [M, N], acc_layout,
                                 gl.convert_layout(_grid(c_ptr, M, N, blocked), acc_reg))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, A_TYPE, B_TYPE,
                       use_acc=True, mbarriers=[bar])
    if RACE:
        b_scale.store(b_scale.load())  # the MMA may still be reading the scales
    mbarrier.wait(bar, 0)
    out = gl.convert_layout(acc.load(), blocked)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * N + cols[None, :], out)


def quantized(rng, rows, k, fmt, vec, ue4m3):
    """(operand array to pass, float64 values, scale bytes, float64 scales)."""
    if fmt == "e2m1":
        codes = rng.integers(0, 16, (rows, k)).astype(np.uint8)
        packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # first element in the low nibble
        values = E2M1[codes]
    else:
        dtype = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
        packed = rng.uniform(-4, 4, (rows, k)).astype(dtype)
        values = packed.astype(np.float64)
    if ue4m3:
        scales = rng.choice([0.25, 0.5, 1.0, 1.5, 2.0, 3.0], (rows, k // vec))
        scale_bytes = scales.astype(ml_dtypes.float8_e4m3fn)
    else:
        exps = rng.integers(120, 134, (rows, k // vec)).astype(np.uint8)
        scales, scale_bytes = np.ldexp(1.0, exps.astype(np.int64) - 127), exps
    return packed, values, scale_bytes, scales


def run_scaled(a_type, b_type, n, k, ue4m3=False, race=False, seed=0, scales_smem=None):
    m, vec = 128, 16 if ue4m3 else 32
    rng = np.random.default_rng(seed)
    a, av, sa, sav = quantized(rng, m, k, a_type, vec, ue4m3)
    b, bv, sb, sbv = quantized(rng, n, k, b_type, vec, ue4m3)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    scaled_kernel[(1,)](a, b, sa, sb, c, out, M=m, N=n, KA=a.shape[1], KB=b.shape[1],
                        S=k // vec, A_TYPE=a_type, B_TYPE=b_type, RACE=race,
                        SCALES_SMEM=scales_smem)
    ref = (av * sav.repeat(vec, axis=1)) @ (bv * sbv.repeat(vec, axis=1)).T + c
    return out, ref


@pytest.mark.parametrize("a_type,b_type,n,k,ue4m3", [
    ("e4m3", "e4m3", 64, 128, False),   # mxfp8, 4 K steps: scale IDs 0-3
    ("e5m2", "e4m3", 32, 64, False),    # mixed 8-bit formats
    ("e2m1", "e2m1", 64, 128, False),   # mxfp4 (.kind::mxf4)
    ("e2m1", "e2m1", 32, 128, True),    # nvfp4 (.kind::mxf4nvf4, e4m3 scales per 16)
    ("e4m3", "e2m1", 64, 128, False),   # mixed: e2m1 B fp4-padded (.kind::mxf8f6f4)
    ("e2m1", "e5m2", 32, 64, False),    # mixed: e2m1 A fp4-padded
])
def test_scaled_mma_matches_numpy(monkeypatch, a_type, b_type, n, k, ue4m3):
    monkeypatch.setenv("SC_INTERPRET_SEED", "3")
    out, ref = run_scaled(a_type, b_type, n, k, ue4m3)
    # Products of the formats and power-of-two scales are exact; only the fp32 rounding
    # of the sum differs from the float64 reference.
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_storing_scales_an_in_flight_mma_reads_is_a_race():
    with pytest.raises(InterpreterError) as info:
        run_scaled("e4m3", "e4m3", 32, 64, race=True)
    mma = line_of(scaled_kernel, "tcgen05_mma_scaled(a, b.permute")
    store = line_of(scaled_kernel, "b_scale.store(b_scale.load())")
    path = __file__
    assert f"{path}:{store}: race: tensor_memory_descriptor.store writes tensor memory that " \
           f"the tcgen05_mma_scaled at {path}:{mma} may still be reading; wait on the " \
           f"mbarrier its completion is committed to (tcgen05_commit or mbarriers=[...]) " \
           f"first" in str(info.value), str(info.value)


@pytest.mark.parametrize("seed", ["0", "5"])
def test_scales_copied_from_shared_memory_feed_the_mma(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    out, ref = run_scaled("e2m1", "e2m1", 128, 256, scales_smem=PACKED_BLOCK)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)


def signature(a_type, b_type, ue4m3):
    dtypes = {"e4m3": "*fp8e4nv:16", "e5m2": "*fp8e5:16", "e2m1": "*u8:16"}
    scale = "*fp8e4nv:16" if ue4m3 else "*u8:16"
    return {"a_ptr": dtypes[a_type], "b_ptr": dtypes[b_type], "sa_ptr": scale,
            "sb_ptr": scale, "c_ptr": "*fp32:16", "out_ptr": "*fp32:16"}


def compile_scaled(a_type, b_type, n, k, ue4m3=False, scales_smem=None):
    vec = 16 if ue4m3 else 32
    constexprs = dict(M=128, N=n, KA=k // (2 if a_type == "e2m1" else 1),
                      KB=k // (2 if b_type == "e2m1" else 1), S=k // vec, A_TYPE=a_type,
                      B_TYPE=b_type, RACE=False, SCALES_SMEM=scales_smem)
    return gluon.compile(scaled_kernel, signature(a_type, b_type, ue4m3), constexprs,
                         target="sm_100a", num_warps=4)


def mma_lines(ptx):
    return [line.strip() for line in ptx.splitlines() if "tcgen05.mma" in line]


# Instruction descriptors from Triton's own lowering tests (test/Conversion/tritongpu_to_llvm
# _blackwell.mlir): e4m3 x e2m1, M = N = 128, scale IDs 0 then 1 (.kind::mxf8f6f4); nvfp4,
# N = 256 (.kind::mxf4nvf4). The e4m3 x e4m3 words are the first two with B's format 0.
TRITON_IDESC = {("mxf8f6f4", "e4m3", "e2m1", 128, 0): 144708608,
                ("mxf8f6f4", "e4m3", "e2m1", 128, 1): 681579536,
                ("mxf4nvf4", "e2m1", "e2m1", 256, 0): 138413184}


MXF4_N64 = 1 << 7 | 1 << 10 | 8 << 17 | 1 << 23 | 8 << 24


def test_instruction_descriptors_match_triton():
    from shared_codegen.ops.tcgen05.scaled import ScaledKind
    from shared_codegen.ops.tcgen05.scaled_lowering import instruction_descriptor
    kinds = {"mxf8f6f4": ScaledKind("mxf8f6f4", "1X", 32, 32, 64, True),
             "mxf4nvf4": ScaledKind("mxf4nvf4", "4X", 16, 64, 128, False)}
    for (kind, a_type, b_type, n, sid), word in TRITON_IDESC.items():
        assert instruction_descriptor(kinds[kind], a_type, b_type, 128, n, sid, sid) == word


@pytest.mark.parametrize("a_type,b_type,n,k,ue4m3,opcode,idescs", [
    ("e4m3", "e4m3", 128, 128, False, "mxf8f6f4.block_scale.scale_vec::1X",
     [144703488, 681574416, 1218445344, 1755316272]),  # scale IDs 0-3 in bits 4-5, 29-30
    ("e2m1", "e2m1", 64, 256, False, "mxf4.block_scale.scale_vec::2X",
     # e2m1 = 1 in both format fields, N >> 3 = 8, UE8M0, M >> 4 = 8; IDs 0 and 2 (bytes
     # 0-1 and 2-3 of a scale column), then the same in the next column
     [MXF4_N64, MXF4_N64 | 2 << 4 | 2 << 29] * 2),
    ("e2m1", "e2m1", 256, 128, True, "mxf4nvf4.block_scale.scale_vec::4X", [138413184] * 2),
    # Triton's e4m3 x e2m1 words (B fp4-padded), then scale IDs 2 and 3.
    ("e4m3", "e2m1", 128, 128, False, "mxf8f6f4.block_scale.scale_vec::1X",
     [144708608, 681579536, 144708608 | 2 << 4 | 2 << 29, 144708608 | 3 << 4 | 3 << 29]),
])
def test_ptx_and_cubin(a_type, b_type, n, k, ue4m3, opcode, idescs):
    comp = compile_scaled(a_type, b_type, n, k, ue4m3)
    ptx = comp.asm["ptx"]
    lines = mma_lines(ptx)
    pattern = (rf"@%p\d+ tcgen05\.mma\.cta_group::1\.kind::{re.escape(opcode)} \[%r\d+\], "
               rf"%rd\d+, %rd\d+, (%r\d+), \[%r\d+\], \[%r\d+\], en;")
    regs = [re.fullmatch(pattern, line) for line in lines]
    assert len(lines) == len(idescs) and all(regs), lines
    moves = dict(re.findall(r"mov\.b32 \s*(%r\d+), (\d+);", ptx))
    assert [int(moves[r.group(1)]) for r in regs] == idescs
    ttgir = str(comp.asm["ttgir"])
    assert "ttng.tc_gen5_mma_scaled" in ttgir and f'a_type = "{a_type}"' in ttgir
    assert len(comp.asm["cubin"]) > 0
    assert (".version 8.7" in ptx) == ue4m3  # .kind::mxf4nvf4 needs PTX ISA 8.7


def test_scales_copy_ptx():
    comp = compile_scaled("e2m1", "e2m1", 128, 256, scales_smem=PACKED_BLOCK)
    ptx = comp.asm["ptx"]
    # a_scale and b_scale are [128, 8]: two 128-row x 4-scale copies each.
    assert ptx.count("tcgen05.cp.cta_group::1.32x128b.warpx4") == 4
    assert len(comp.asm["cubin"]) > 0


def test_scale_columns_and_ids_follow_the_scale_layout():
    from shared_codegen.ir.types import TensorMemoryType, uint8
    from shared_codegen.ops.tcgen05.scaled_lowering import plan_scale_step

    def scales(m, s):
        return TensorMemoryType((m, s), uint8, TensorMemoryScalesLayout(), (m, s))
    # 1X: one scale per instruction, byte s0 % 4 of the 4-column word of K group s0 // 4.
    assert [plan_scale_step(scales(128, 8), 0, 128, s0, 1, "a_scale") for s0 in range(8)] == \
        [(0, 0), (0, 1), (0, 2), (0, 3), (4, 0), (4, 1), (4, 2), (4, 3)]
    # 2X: two scales per instruction, scale IDs 0 and 2.
    assert [plan_scale_step(scales(128, 8), 0, 128, s0, 2, "a_scale") for s0 in (0, 2, 4, 6)] \
        == [(0, 0), (0, 2), (4, 0), (4, 2)]
    # N = 256 B scales span 8 columns per K group; rows 256-511 of N = 512 start 8 on.
    assert plan_scale_step(scales(256, 8), 0, 256, 4, 1, "b_scale") == (8, 0)
    assert plan_scale_step(scales(512, 4), 256, 256, 1, 1, "b_scale") == (8, 1)
    # N = 32 takes one column of a 2-column K group.
    assert plan_scale_step(scales(32, 8), 0, 32, 5, 1, "b_scale") == (2, 1)


@gluon.jit
def bad_scaled_kernel(A_DTYPE: gl.constexpr, B_DTYPE: gl.constexpr, KA: gl.constexpr,
                      KB: gl.constexpr, N: gl.constexpr, SA_DTYPE: gl.constexpr,
                      SB_DTYPE: gl.constexpr, SA_SHAPE: gl.constexpr, A_TYPE: gl.constexpr,
                      B_TYPE: gl.constexpr, BLOCK_M: gl.constexpr):
    a = gl.allocate_shared_memory(A_DTYPE, [128, KA],
                                  gl.NVMMASharedLayout.get_default_for([128, KA], A_DTYPE))
    b = gl.allocate_shared_memory(B_DTYPE, [N, KB],
                                  gl.NVMMASharedLayout.get_default_for([N, KB], B_DTYPE))
    acc = allocate_tensor_memory(gl.float32, [128, N], TensorMemoryLayout((BLOCK_M, N), 1))
    a_scale = allocate_tensor_memory(SA_DTYPE, SA_SHAPE, TensorMemoryScalesLayout())
    b_scale = allocate_tensor_memory(SB_DTYPE, [N, 2], TensorMemoryScalesLayout())
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, A_TYPE, B_TYPE)


GOOD = dict(A_DTYPE=gl.float8e4nv, B_DTYPE=gl.float8e4nv, KA=64, KB=64, N=64,
            SA_DTYPE=gl.uint8, SB_DTYPE=gl.uint8, SA_SHAPE=[128, 2], A_TYPE="e4m3",
            B_TYPE="e4m3", BLOCK_M=128)


@pytest.mark.parametrize("change,message", [
    (dict(A_TYPE="e3m2"), "a_type must be one of 'e2m1', 'e4m3', 'e5m2', got 'e3m2'"),
    (dict(B_TYPE="e5m2"), "b_type 'e5m2' needs a float8e5 (or uint8 bytes) operand, got fp8e4nv"),
    (dict(A_DTYPE=gl.float16), "a_type 'e4m3' needs a float8e4nv (or uint8 bytes) operand, "
                               "got fp16"),
    (dict(KB=32), "tcgen05_mma_scaled shapes do not match: a [128, 64] (e4m3) x b [32, 64] "
                  "(e4m3) -> acc [128, 64]; e2m1 operands hold two elements per byte along K"),
    (dict(BLOCK_M=64), "tcgen05_mma_scaled computes M = 128 rows (blockM = 64 is not supported)"),
    (dict(SA_SHAPE=[128, 4]), "a_scale must be [128, K // 32] = [128, 2] for K = 64 (u8 scales "
                              "cover 32 elements each), got [128, 4]"),
    (dict(SA_DTYPE=gl.float8e5), "a_scale must hold uint8 (e8m0) or float8e4nv (ue4m3) scale "
                                 "factors, got fp8e5"),
    (dict(SA_DTYPE=gl.float8e4nv, SA_SHAPE=[128, 4]),
     "a_scale and b_scale must have one format, got fp8e4nv and u8"),
    (dict(A_DTYPE=gl.uint8, KA=32, A_TYPE="e2m1"),
     "a_type 'e2m1' with 'e4m3' is .kind::mxf8f6f4, which reads e2m1 padded to a byte per "
     "element pair: a's shared layout must be an NVMMASharedLayout with fp4_padded=True, got "
     "NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=8)"),
    (dict(KA=32, KB=32, SA_SHAPE=[128, 1]),  # K = 32 is one mxf8f6f4 step, but
     "b_scale must be [64, K // 32] = [64, 1] for K = 32 (u8 scales cover 32 elements each), "
     "got [64, 2]"),
])
def test_errors_in_the_users_terms(change, message):
    with pytest.raises(CompilationError) as info:
        gluon.compile(bad_scaled_kernel, {}, {**GOOD, **change}, target="sm_100a",
                      num_warps=4)
    text = str(info.value)
    assert message in text, text
    line = line_of(bad_scaled_kernel, "tcgen05_mma_scaled(a, b.permute")
    assert f"test_tcgen05_mma_scaled.py:{line}" in text, text


@gluon.jit
def bad_copy_kernel(SMEM_LAYOUT: gl.constexpr, M: gl.constexpr, S: gl.constexpr):
    smem = gl.allocate_shared_memory(gl.uint8, [M, S], SMEM_LAYOUT)
    tmem = allocate_tensor_memory(gl.uint8, [M, S], TensorMemoryScalesLayout())
    tcgen05_copy(smem, tmem)


def test_scale_copy_errors():
    row_major = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    with pytest.raises(CompilationError) as info:
        gluon.compile(bad_copy_kernel, {}, dict(SMEM_LAYOUT=row_major, M=64, S=8),
                      target="sm_100a", num_warps=4)
    assert "tcgen05_copy of scale factors moves 128 rows x 4 scales at a time " \
           "(32x128b.warpx4); the shape must be a multiple of [128, 4], got [64, 8]" \
           in str(info.value), str(info.value)
    row_major = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    with pytest.raises(CompilationError) as info:
        gluon.compile(bad_copy_kernel, {}, dict(SMEM_LAYOUT=row_major, M=128, S=8),
                      target="sm_100a", num_warps=4)
    assert "failed to find valid tcgen05.copy layout from shared memory descriptor: scale " \
           "rows [0, 128) x [0, 4) of NVMMASharedLayout(swizzle_byte_width=0, " \
           "element_bitwidth=8) must be 512 contiguous bytes" in str(info.value), \
        str(info.value)
    assert f"test_tcgen05_mma_scaled.py:{line_of(bad_copy_kernel, 'tcgen05_copy(')}" in \
        str(info.value)


@gluon.jit
def scales_roundtrip_kernel(in_ptr, out_ptr, R: gl.constexpr, S: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    layout: gl.constexpr = TensorMemoryScalesLayout()
    tmem = allocate_tensor_memory(gl.uint8, [R, S], layout)
    reg: gl.constexpr = get_tmem_reg_layout(gl.uint8, [R, S], layout, gl.num_warps())
    tmem.store(gl.convert_layout(_grid(in_ptr, R, S, blocked), reg))
    back = gl.convert_layout(tmem.load(reg), blocked)
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, S, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * S + cols[None, :], back)


@pytest.mark.parametrize("num_warps,r,s", [(4, 128, 8), (8, 256, 8), (4, 32, 2)])
def test_scales_store_and_load(num_warps, r, s):
    x = np.random.default_rng(1).integers(0, 255, (r, s)).astype(np.uint8)
    out = np.zeros_like(x)
    scales_roundtrip_kernel[(1,)](x, out, R=r, S=s, num_warps=num_warps)
    np.testing.assert_array_equal(out, x)
    comp = gluon.compile(scales_roundtrip_kernel, {"in_ptr": "*u8:16", "out_ptr": "*u8:16"},
                         dict(R=r, S=s), target="sm_100a", num_warps=num_warps)
    ptx = comp.asm["ptx"]
    # One 32-bit column per (32-row group, 4-scale group) and thread; every warp of a
    # warpgroup writes its own quadrant's copy with the same registers.
    cols = max(1, r // 32) * -(-s // 4) // (num_warps // 4)
    assert re.search(rf"tcgen05\.st\.sync\.aligned\.32x32b\.x{cols}\.b32", ptx), ptx[-3000:]
    assert re.search(rf"tcgen05\.ld\.sync\.aligned\.32x32b\.x{cols}\.b32", ptx)


@gluon.jit
def unswizzle_in_registers_kernel(in_ptr, out_ptr):
    # Scales reach registers in a packed order; AutoLayout lets the layout the tensor-memory
    # store needs flow back through the reshape and permute to the shared-memory load.
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    smem = gl.allocate_shared_memory(gl.uint8, [128, 8], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]),
                                     _grid(in_ptr, 128, 8, blocked))
    x = smem.load(gl.AutoLayout())
    x = x.reshape(128, 2, 4).permute(0, 2, 1).reshape(128, 8)
    layout: gl.constexpr = TensorMemoryScalesLayout()
    reg: gl.constexpr = get_tmem_reg_layout(gl.uint8, [128, 8], layout, gl.num_warps())
    tmem = allocate_tensor_memory(gl.uint8, [128, 8], layout, gl.set_auto_layout(x, reg))
    back = gl.convert_layout(tmem.load(reg), blocked)
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, 8, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * 8 + cols[None, :], back)


def test_shared_load_in_auto_layout_resolved_from_the_scales_store():
    x = np.random.default_rng(2).integers(0, 255, (128, 8)).astype(np.uint8)
    out = np.zeros_like(x)
    unswizzle_in_registers_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, x.reshape(128, 2, 4).transpose(0, 2, 1).reshape(128, 8))
    comp = gluon.compile(unswizzle_in_registers_kernel,
                         {"in_ptr": "*u8:16", "out_ptr": "*u8:16"}, {}, target="sm_100a",
                         num_warps=4)
    assert "tcgen05.st.sync.aligned.32x32b.x8.b32" in comp.asm["ptx"]  # 4 row x 2 K groups


@gluon.jit
def tma_mixed_kernel(a_desc, b_desc, sa_ptr, sb_ptr, out_ptr, kb, N: gl.constexpr,
                     K: gl.constexpr):
    # mxfp8 A x mxfp4 B, both by TMA: B's descriptor is fp4-padded (16U4_ALIGN16B), so its
    # packed bytes land padded in shared memory for .kind::mxf8f6f4.
    a = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(a_desc, [0, 0], bar, a)
    tma.async_copy_global_to_shared(b_desc, [0, kb], bar, b)  # kb: in packed bytes
    mbarrier.wait(bar, 0)
    scale_layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scale = _scales_to_tmem(sa_ptr, 128, K // 32, scale_layout, None)
    b_scale = _scales_to_tmem(sb_ptr, N, K // 32, scale_layout, None)
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(128, N), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [128, N], acc_layout)
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, "e4m3", "e2m1",
                       use_acc=False, mbarriers=[bar])
    mbarrier.wait(bar, 1)
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
    gl.store(out_ptr + rows[:, None] * N + cols[None, :], gl.convert_layout(acc.load(), blocked))


def aligned(x, to=64):
    """A copy of `x` whose data starts `to`-byte aligned (fp4-padded TMA needs 32)."""
    raw = np.empty(x.nbytes + to, np.uint8)
    start = -raw.__array_interface__["data"][0] % to
    out = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


@pytest.mark.parametrize("k", [128, 512])
def test_fp4_padded_tma_feeds_a_mixed_mma(k):
    from gluon.nvidia.hopper import TensorDescriptor
    n = 64
    rng = np.random.default_rng(4)
    a, av, sa, sav = quantized(rng, 128, k, "e4m3", 32, False)
    b, bv, sb, sbv = quantized(rng, n, k, "e2m1", 32, False)
    a_desc = TensorDescriptor.from_tensor(
        a, [128, k], gl.NVMMASharedLayout.get_default_for([128, k], gl.float8e4nv))
    b_layout = gl.NVMMASharedLayout.get_default_for([n, k // 2], gl.uint8, fp4_padded=True)
    assert b_layout == gl.NVMMASharedLayout(128, 8, fp4_padded=True)  # whole 128-value rows
    b_desc = TensorDescriptor.from_tensor(aligned(b), [n, k // 2], b_layout)
    out = np.zeros((128, n), np.float32)
    tma_mixed_kernel[(1,)](a_desc, b_desc, sa, sb, out, 0, N=n, K=k)
    ref = (av * sav.repeat(32, axis=1)) @ (bv * sbv.repeat(32, axis=1)).T
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)
    comp = gluon.compile(tma_mixed_kernel, {"a_desc": a_desc, "b_desc": b_desc,
                                            "sa_ptr": "*u8:16", "sb_ptr": "*u8:16",
                                            "out_ptr": "*fp32:16", "kb": "i32"},
                         dict(N=n, K=k),
                         target="sm_100a", num_warps=4)
    ptx = comp.asm["ptx"]
    # A's boxes are 128 bytes wide (its 128-byte swizzle), B's 64 packed bytes = 128 e2m1
    # values each, whose coordinate counts values (shifted); K = 512 splits both 4 ways.
    inner = re.findall(r"cp\.async\.bulk\.tensor\.2d\S* \[%rd\d+\], \[%rd\d+, \{(%r\d+), ", ptx)
    assert len(inner) == 2 * (k // 128), inner
    assert re.search(rf"shl\.b32\s+{re.escape(inner[k // 128])}, %r\d+, 1;", ptx), ptx[:4000]
    assert len(mma_lines(ptx)) == k // 32 and len(comp.asm["cubin"]) > 0


def test_fp4_padded_descriptor_checks():
    from gluon.nvidia.hopper import TensorDescriptor
    padded = gl.NVMMASharedLayout(128, 8, fp4_padded=True)
    with pytest.raises(ValueError, match="with fp4_padded=True the innermost dim must hold a "
                                         "multiple of 128 e2m1 values \\(64 bytes\\), got 96"):
        TensorDescriptor.from_tensor(aligned(np.zeros((64, 96), np.uint8)), [64, 64], padded)
    with pytest.raises(ValueError, match="an fp4_padded TMA descriptor needs "
                                         "swizzle_byte_width=128"):
        TensorDescriptor.from_tensor(aligned(np.zeros((64, 64), np.uint8)), [64, 32],
                                     gl.NVMMASharedLayout(64, 8, fp4_padded=True))


@gluon.jit
def _ws_mma(a, b, acc, a_scale, b_scale, ready, done):
    mbarrier.wait(ready, 0)  # the scales are in tensor memory
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, "e4m3", "e4m3",  # scales
                       use_acc=False, mbarriers=[done])


@gluon.jit
def _ws_scales_and_epilogue(sa_ptr, sb_ptr, a_scale, b_scale, acc, ready, done, out_ptr,
                            N: gl.constexpr, S: gl.constexpr, RACE: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    layout: gl.constexpr = TensorMemoryScalesLayout()
    reg_a: gl.constexpr = get_tmem_reg_layout(gl.uint8, [128, S], layout, gl.num_warps())
    reg_b: gl.constexpr = get_tmem_reg_layout(gl.uint8, [N, S], layout, gl.num_warps())
    a_scale.store(gl.convert_layout(_grid(sa_ptr, 128, S, blocked), reg_a))
    b_scale.store(gl.convert_layout(_grid(sb_ptr, N, S, blocked), reg_b))
    mbarrier.arrive(ready, count=1)
    if RACE:
        b_scale.store(gl.convert_layout(_grid(sb_ptr, N, S, blocked), reg_b))  # overwrites
    mbarrier.wait(done, 0)
    out_layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, out_layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, out_layout))
    gl.store(out_ptr + rows[:, None] * N + cols[None, :],
             gl.convert_layout(acc.load(), out_layout))


@gluon.jit
def ws_scaled_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, out_ptr, N: gl.constexpr, K: gl.constexpr,
                     RACE: gl.constexpr):
    """The default partition puts the scales in tensor memory and loads the product; a
    1-warp partition issues the MMA once they are ready."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    a = gl.allocate_shared_memory(gl.float8e4nv, [128, K],
                                  gl.NVMMASharedLayout.get_default_for([128, K], gl.float8e4nv),
                                  _grid(a_ptr, 128, K, blocked))
    b = gl.allocate_shared_memory(gl.float8e4nv, [N, K],
                                  gl.NVMMASharedLayout.get_default_for([N, K], gl.float8e4nv),
                                  _grid(b_ptr, N, K, blocked))
    fence_async_shared()
    layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scale = allocate_tensor_memory(gl.uint8, [128, K // 32], layout)
    b_scale = allocate_tensor_memory(gl.uint8, [N, K // 32], layout)
    acc = allocate_tensor_memory(gl.float32, [128, N], TensorMemoryLayout((128, N), 1))
    ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(ready, count=1)
    mbarrier.init(done, count=1)
    gl.warp_specialize([(_ws_scales_and_epilogue, (sa_ptr, sb_ptr, a_scale, b_scale, acc, ready,
                                                   done, out_ptr, N, K // 32, RACE)),
                        (_ws_mma, (a, b, acc, a_scale, b_scale, ready, done))], [1], [24])


@pytest.mark.parametrize("seed", ["0", "2"])
def test_warp_specialized_scales_then_mma(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    n, k = 64, 128
    rng = np.random.default_rng(5)
    a, av, sa, sav = quantized(rng, 128, k, "e4m3", 32, False)
    b, bv, sb, sbv = quantized(rng, n, k, "e4m3", 32, False)
    out = np.zeros((128, n), np.float32)
    ws_scaled_kernel[(1,)](a, b, sa, sb, out, N=n, K=k, RACE=False)
    ref = (av * sav.repeat(32, axis=1)) @ (bv * sbv.repeat(32, axis=1)).T
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-5)
    with pytest.raises(InterpreterError) as info:
        ws_scaled_kernel[(1,)](a, b, sa, sb, out, N=n, K=k, RACE=True)
    text = str(info.value)
    store = line_of(_ws_scales_and_epilogue, "# overwrites")
    mma = line_of(_ws_mma, "# scales")
    # Which access the detector meets second depends on the partitions' interleaving; both
    # lines are named either way.
    assert f"{__file__}:{store}" in text and f"{__file__}:{mma}" in text, text
    assert "race: " in text and "tcgen05_mma_scaled" in text, text


def test_warp_specialized_scaled_mma_compiles():
    comp = gluon.compile(ws_scaled_kernel, {"a_ptr": "*fp8e4nv:16", "b_ptr": "*fp8e4nv:16",
                                            "sa_ptr": "*u8:16", "sb_ptr": "*u8:16",
                                            "out_ptr": "*fp32:16"}, dict(N=64, K=128, RACE=False),
                         target="sm_100a", num_warps=4)
    assert len(mma_lines(comp.asm["ptx"])) == 4 and len(comp.asm["cubin"]) > 0
