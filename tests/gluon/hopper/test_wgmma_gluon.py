"""`warpgroup_mma` / `warpgroup_mma_wait` in @gluon.jit kernels: interpreter numerics against
numpy, async races, compile errors in the user's terms, and the PTX / cubin for sm_90a."""

import re

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper._wgmma import warpgroup_mma, warpgroup_mma_wait
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError
from shared_codegen.ops.wgmma.definition import check_instr_n, check_warpgroup_mma
from shared_codegen.ir.types import SharedMemoryType, TensorType
from shared_codegen.lowering.backend import parse_resource_usage, ptx_to_cubin


@gluon.jit
def tile_offsets(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


@gluon.jit
def wgmma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, DTYPE: gl.constexpr, M: gl.constexpr,
                 N: gl.constexpr, K: gl.constexpr, INSTR_N: gl.constexpr,
                 WARPS_N: gl.constexpr, SWIZZLE: gl.constexpr, A_IN_REGS: gl.constexpr,
                 B_K_MAJOR: gl.constexpr, IS_ASYNC: gl.constexpr, USE_ACC: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps() // WARPS_N, WARPS_N],
        instr_shape=[16, INSTR_N, 16])
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=SWIZZLE,
                                              element_bitwidth=DTYPE.primitive_bitwidth, rank=2)
    if A_IN_REGS:
        a_layout: gl.constexpr = gl.DotOperandLayout(
            operand_index=0, parent=acc_layout, k_width=32 // DTYPE.primitive_bitwidth)
        a = gl.load(a_ptr + tile_offsets(M, K, a_layout))
    else:
        a = gl.allocate_shared_memory(DTYPE, [M, K], smem,
                                      gl.load(a_ptr + tile_offsets(M, K, blocked)))
    if B_K_MAJOR:  # stored [N, K], K contiguous; the [K, N] operand is its transpose
        b = gl.allocate_shared_memory(DTYPE, [N, K], smem,
                                      gl.load(b_ptr + tile_offsets(N, K, blocked)))
        b = b.permute((1, 0))
    else:
        b = gl.allocate_shared_memory(DTYPE, [K, N], smem,
                                      gl.load(b_ptr + tile_offsets(K, N, blocked)))
    acc = gl.load(c_ptr + tile_offsets(M, N, acc_layout))
    acc = warpgroup_mma(a, b, acc, use_acc=USE_ACC, is_async=IS_ASYNC)
    if IS_ASYNC:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    gl.store(out_ptr + tile_offsets(M, N, acc_layout), acc)


DTYPES = {"fp16": (gl.float16, np.float16), "bf16": (gl.bfloat16, ml_dtypes.bfloat16),
          "fp8e4nv": (gl.float8e4nv, ml_dtypes.float8_e4m3fn),
          "fp8e5": (gl.float8e5, ml_dtypes.float8_e5m2), "tf32": (gl.float32, np.float32)}


def tf32_truncate(x):
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def run(kind, m, n, k, instr_n=None, warps_n=1, num_warps=4, a_in_regs=False, b_k_major=False,
        is_async=False, use_acc=True, acc_np=np.float32, seed=0):
    dtype, np_dtype = DTYPES[kind]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32).astype(np_dtype)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(np_dtype)
    c = rng.standard_normal((m, n)).astype(acc_np)
    out = np.zeros((m, n), acc_np)
    contig = k if (b_k_major or not a_in_regs) else n
    swizzle = min(128, min(contig, k if not a_in_regs else contig) * np.dtype(np_dtype).itemsize)
    wgmma_kernel[(1,)](a, b.T.copy() if b_k_major else b, c, out, DTYPE=dtype, M=m, N=n, K=k,
                       INSTR_N=instr_n or n // warps_n, WARPS_N=warps_n, SWIZZLE=swizzle,
                       A_IN_REGS=a_in_regs, B_K_MAJOR=b_k_major, IS_ASYNC=is_async,
                       USE_ACC=use_acc, num_warps=num_warps)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    if kind == "tf32":
        af = tf32_truncate(af) if not a_in_regs else af
        bf = tf32_truncate(bf)
    want = af @ bf + (c.astype(np.float32) if use_acc else 0)
    return out, want


# ---- interpreter numerics ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fp16", "bf16"])
@pytest.mark.parametrize("n,b_k_major,a_in_regs", [(64, False, False), (32, True, False),
                                                   (16, False, True), (128, True, True)])
def test_fp16_bf16_against_fp32_numpy(kind, n, b_k_major, a_in_regs):
    out, want = run(kind, 64, n, 32, b_k_major=b_k_major, a_in_regs=a_in_regs)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", ["fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("n,a_in_regs", [(32, False), (64, True)])
def test_fp8_against_fp32_numpy(kind, n, a_in_regs):
    out, want = run(kind, 64, n, 64, b_k_major=True, a_in_regs=a_in_regs)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_tf32_rounds_register_a_and_truncates_shared_operands():
    out, want = run("tf32", 64, 32, 16, b_k_major=True)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)
    out, want = run("tf32", 64, 16, 16, b_k_major=True, a_in_regs=True, seed=1)
    # a is rounded to nearest (cvt.rna), b truncated: within tf32's precision of fp32 numpy.
    np.testing.assert_allclose(out, want, rtol=1e-2, atol=1e-2)


def test_fp16_accumulator_and_use_acc_false_and_async_and_two_warpgroups():
    out, want = run("fp16", 64, 32, 32, acc_np=np.float16)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-3, atol=2e-2)
    out, want = run("fp16", 64, 32, 32, use_acc=False, is_async=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    out, want = run("bf16", 128, 64, 32, num_warps=8)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    out, want = run("fp16", 64, 128, 16, warps_n=2, num_warps=8, b_k_major=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


# ---- async semantics ----------------------------------------------------------------------------

@gluon.jit
def pipelined_kernel(a_ptr, b_ptr, out_ptr, K_TILES: gl.constexpr, RACE: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 32, 16])
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16)
    a_s = gl.allocate_shared_memory(gl.float16, [2, 64, 16], smem)
    b_s = gl.allocate_shared_memory(gl.float16, [2, 16, 32], smem)
    acc = gl.zeros([64, 32], gl.float32, layout=acc_layout)
    for i in range(K_TILES):
        s = i % 2
        rows = gl.arange(0, 64, layout=gl.SliceLayout(1, blocked))
        cols = gl.arange(0, 16, layout=gl.SliceLayout(0, blocked))
        a_s.index(s).store(gl.load(a_ptr + rows[:, None] * (16 * K_TILES) + i * 16
                                   + cols[None, :]))
        b_s.index(s).store(gl.load(b_ptr + i * 16 * 32 + tile_offsets(16, 32, blocked)))
        acc = warpgroup_mma(a_s.index(s), b_s.index(s), acc, is_async=True)
        if RACE == 1:
            acc = acc + 1.0
        acc = warpgroup_mma_wait(num_outstanding=RACE // 2, deps=[acc])
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    gl.store(out_ptr + tile_offsets(64, 32, acc_layout), acc)


def pipelined(race, k_tiles=4):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 16 * k_tiles)).astype(np.float16)
    b = rng.standard_normal((16 * k_tiles, 32)).astype(np.float16)
    out = np.zeros((64, 32), np.float32)
    pipelined_kernel[(1,)](a, b, out, K_TILES=k_tiles, RACE=race, num_warps=4)
    return out, a.astype(np.float32) @ b.astype(np.float32)


def test_loop_carried_async_accumulator_with_one_wgmma_in_flight_matches_numpy():
    # RACE=2: wait(1) leaves each wgmma in flight into the next iteration, whose double
    # buffer index differs; the product is exact.
    out, want = pipelined(2, k_tiles=1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    out, want = pipelined(0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def line_of(text):
    with open(__file__) as f:
        return [i for i, line in enumerate(f, 1) if text in line][0]


def test_reading_the_accumulator_before_the_wait_is_a_race_naming_both_lines():
    with pytest.raises(InterpreterError) as info:
        pipelined(1)
    text = str(info.value)
    issue, read = line_of("acc = warpgroup_mma(a_s.index(s)"), line_of("acc = acc + 1.0")
    assert re.search(rf"test_wgmma_gluon.py:{read}: race: arith.addf reads the accumulator of "
                     rf"the async warpgroup_mma at .*test_wgmma_gluon.py:{issue} before "
                     rf"warpgroup_mma_wait retires it", text), text
    assert "acc = acc + 1.0" in text


def test_overwriting_a_shared_operand_of_an_in_flight_wgmma_is_a_race():
    # wait(1) after each issue: the MMA of iteration i - 1 retired before iteration i + 1
    # stores into its buffer (double buffering), so there is no race.
    out, want = pipelined(2, k_tiles=4)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    with pytest.raises(InterpreterError) as info:
        pipelined(4, k_tiles=4)  # wait(2): iteration 2 overwrites iteration 0's buffers
    text = str(info.value)
    issue, store = line_of("acc = warpgroup_mma(a_s.index(s)"), line_of("a_s.index(s).store(")
    assert re.search(rf"test_wgmma_gluon.py:{store}: race: local_store writes shared memory "
                     rf"that the async warpgroup_mma at .*test_wgmma_gluon.py:{issue} may "
                     rf"still be reading; retire it with warpgroup_mma_wait first", text), text


# ---- compile errors -----------------------------------------------------------------------------

def compile_error(**kw):
    args = dict(kind="fp16", m=64, n=32, k=32)
    args.update(kw)
    with pytest.raises(CompilationError) as info:
        run(**args)
    return str(info.value)


def test_errors_name_the_value_and_the_limit():
    with pytest.raises(ValueError, match=re.escape(
            "wgmma N must be a multiple of 8 in [8, 256], got 264")):
        check_instr_n(264)
    text = compile_error(kind="fp8e4nv", n=64, k=64, b_k_major=False)
    assert "wgmma with fp8e4nv inputs reads b K-major (K contiguous in shared memory)" in text
    assert "allocate B as [N, K] and pass b.permute((1, 0))" in text
    # M = 64 on 8 warps is allowed (the second warpgroup holds a copy); M = 32 is not.
    text = compile_error(m=32, num_warps=8)
    assert "wgmma M must be a multiple of 16 x warps_per_cta[0] = 128" in text
    text = compile_error(n=64, instr_n=64, warps_n=2, num_warps=8)
    assert "wgmma N=64 must be a multiple of instr_shape[1] x warps_per_cta[1] = 64 x 2" in text
    v2 = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    smem = SharedMemoryType((32, 32), gl.float32, gl.NVMMASharedLayout(128, 32), (32, 32))
    acc = TensorType((64, 32), gl.float32, v2)
    with pytest.raises(ValueError, match=re.escape(
            "acc must have layout NVMMADistributedLayout(version=[3, 0], warps_per_cta=..., "
            "instr_shape=[16, N, K]), got NVMMADistributedLayout(version=[2, 0]")):
        check_warpgroup_mma(smem, smem, acc, "tf32")
    v3 = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                   instr_shape=[16, 32, 16])
    a = SharedMemoryType((64, 32), gl.float32, gl.NVMMASharedLayout(128, 32), (64, 32))
    with pytest.raises(ValueError, match=re.escape(
            "warpgroup_mma on fp32 inputs computes in tf32 (precision='tf32'), got 'ieee'")):
        check_warpgroup_mma(a, smem, acc.with_layout(v3), "ieee")


def test_register_a_with_the_wrong_k_width_names_the_layout():
    @gluon.jit
    def bad(a_ptr, out_ptr):
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0],
                                                             warps_per_cta=[4, 1],
                                                             instr_shape=[16, 16, 16])
        a = gl.load(a_ptr + tile_offsets(64, 16, gl.DotOperandLayout(0, acc_layout, 4)))
        smem: gl.constexpr = gl.NVMMASharedLayout(32, 16)
        b = gl.allocate_shared_memory(gl.float16, [16, 16], smem)
        acc = gl.zeros([64, 16], gl.float32, layout=acc_layout)
        acc = warpgroup_mma(a, b, acc)
        gl.store(out_ptr + tile_offsets(64, 16, acc_layout), acc)

    with pytest.raises(CompilationError) as info:
        bad[(1,)](np.zeros((64, 16), np.float16), np.zeros((64, 16), np.float32))
    assert "a must have layout DotOperandLayout(operand_index=0, parent=NVMMADistributed" \
           "Layout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16]), " \
           "k_width=2)" in str(info.value)


# ---- PTX and cubin ------------------------------------------------------------------------------

def compiled(kind="fp16", m=128, n=128, k=64, num_warps=4, b_k_major=False, a_in_regs=False,
             is_async=False, instr_n=None, acc="fp32"):
    dtype, np_dtype = DTYPES[kind]
    name = {"fp16": "fp16", "bf16": "bf16", "fp8e4nv": "fp8e4nv", "fp8e5": "fp8e5",
            "tf32": "fp32"}[kind]
    sig = {"a_ptr": f"*{name}:16", "b_ptr": f"*{name}:16", "c_ptr": f"*{acc}:16",
           "out_ptr": f"*{acc}:16"}
    swizzle = min(128, k * np.dtype(np_dtype).itemsize)
    consts = dict(DTYPE=dtype, M=m, N=n, K=k, INSTR_N=instr_n or n, WARPS_N=1,
                  SWIZZLE=swizzle, A_IN_REGS=a_in_regs, B_K_MAJOR=b_k_major,
                  IS_ASYNC=is_async, USE_ACC=True)
    return gluon.compile(wgmma_kernel, sig, consts, target="sm_90a", num_warps=num_warps)


def test_128x128_fp16_tile_with_4_warps_compiles_without_spills():
    comp = compiled()
    ptx = comp.asm["ptx"]
    # 2 tiles of 64 rows x 4 K steps of 16.
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16", ptx)) \
        == 8
    assert "wgmma.fence.sync.aligned;" in ptx
    assert "wgmma.commit_group.sync.aligned;" in ptx
    assert "wgmma.wait_group.sync.aligned 0;" in ptx
    assert "ttng.warp_group_dot" in str(comp.asm["ttgir"])
    cubin, log = ptx_to_cubin(ptx, "sm_90a", extra_opts=["-verbose"])
    assert cubin
    usage = parse_resource_usage(log)
    (res,) = usage.values()
    assert res.spill_stores == 0 and res.spill_loads == 0, log


@pytest.mark.parametrize("kw,instr", [
    (dict(kind="bf16", m=64, n=64, k=32, b_k_major=True),
     r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+, "
     r"p, 1, 1, 0, 0;"),
    (dict(kind="fp8e4nv", m=64, n=256, k=64, b_k_major=True),
     r"wgmma\.mma_async\.sync\.aligned\.m64n256k32\.f32\.e4m3\.e4m3 \{[^}]*\}, %rd\d+, %rd\d+, "
     r"p, 1, 1;"),
    (dict(kind="tf32", m=64, n=8, k=32, b_k_major=True),
     r"wgmma\.mma_async\.sync\.aligned\.m64n8k8\.f32\.tf32\.tf32"),
    (dict(kind="fp16", m=64, n=32, k=32, a_in_regs=True),
     r"wgmma\.mma_async\.sync\.aligned\.m64n32k16\.f32\.f16\.f16 \{[^}]*\}, \{%r\d+, %r\d+, "
     r"%r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;"),
    (dict(kind="fp16", m=64, n=64, k=32, acc="fp16"),
     r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f16\.f16\.f16"),
])
def test_types_and_operand_sources_compile_to_their_wgmma(kw, instr):
    comp = compiled(**kw)
    assert re.search(instr, comp.asm["ptx"]), comp.asm["ptx"][:3000]
    assert comp.asm["cubin"]


def test_async_wgmma_waits_only_at_warpgroup_mma_wait():
    ptx = compiled(m=64, n=64, k=32, is_async=True).asm["ptx"]
    # One commit for the op, then the explicit wait(0) of the kernel.
    assert ptx.count("wgmma.commit_group.sync.aligned;") == 1
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 1
    assert ptx.index("wgmma.commit_group") < ptx.index("wgmma.wait_group")
