"""`@gluon.jit` kernels calling `ampere.mma_v2` and `dot_fma`: interpreter numerics, PTX for
sm_90a and sm_80, and compile errors that name the layout an operand needs."""

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia import ampere
from gluon.language.nvidia.ampere import async_copy, dot_fma
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError


@gluon.jit
def tile_offsets(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


@gluon.jit
def mma_kernel(a_ptr, b_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr,
               WARPS_M: gl.constexpr, WARPS_N: gl.constexpr, K_WIDTH: gl.constexpr):
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0],
                                                  warps_per_cta=[WARPS_M, WARPS_N],
                                                  instr_shape=[16, 8])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=K_WIDTH)
    b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=K_WIDTH)
    a = gl.load(a_ptr + tile_offsets(M, K, a_layout))
    b = gl.load(b_ptr + tile_offsets(K, N, b_layout))
    acc = gl.zeros([M, N], gl.float32, layout=mma)
    acc = ampere.mma_v2(a, b, acc)
    gl.store(c_ptr + tile_offsets(M, N, mma), acc)


@pytest.mark.parametrize("np_dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("mnk,warps", [((32, 32, 16), (2, 2)), ((64, 16, 64), (4, 1))])
def test_mma_v2_kernel_in_the_interpreter(np_dtype, mnk, warps):
    m, n, k = mnk
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np_dtype)
    b = rng.standard_normal((k, n)).astype(np_dtype)
    c = np.zeros((m, n), np.float32)
    mma_kernel[(1,)](a, b, c, M=m, N=n, K=k, WARPS_M=warps[0], WARPS_N=warps[1], K_WIDTH=2,
                     num_warps=warps[0] * warps[1])
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_mma_v2_kernel_compiles_to_mma_sync(target):
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16"}
    compiled = gluon.compile(mma_kernel, sig, dict(M=64, N=64, K=32, WARPS_M=2, WARPS_N=2,
                                                   K_WIDTH=2), target=target, num_warps=4)
    ptx = compiled.asm["ptx"]
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 16
    assert "ttg.mma_v2" in str(compiled.asm["ttgir"])
    assert compiled.asm["cubin"]


def test_mma_v2_with_the_wrong_k_width_is_a_compile_error_naming_the_layout():
    a = np.zeros((32, 16), np.float16)
    b = np.zeros((16, 32), np.float16)
    c = np.zeros((32, 32), np.float32)
    with pytest.raises(CompilationError) as info:
        mma_kernel[(1,)](a, b, c, M=32, N=32, K=16, WARPS_M=2, WARPS_N=2, K_WIDTH=4)
    text = str(info.value)
    assert "acc = ampere.mma_v2(a, b, acc)" in text
    assert "a must have layout DotOperandLayout(operand_index=0, parent=NVMMADistributed" \
           "Layout(version=[2, 0], warps_per_cta=[2, 2], instr_shape=[16, 8]), k_width=2)" in text


@gluon.jit
def fma_kernel(a_ptr, b_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout, k_width=0)
    b_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=layout, k_width=0)
    a = gl.load(a_ptr + tile_offsets(M, K, a_layout))
    b = gl.load(b_ptr + tile_offsets(K, N, b_layout))
    acc = gl.load(c_ptr + tile_offsets(M, N, layout))
    gl.store(c_ptr + tile_offsets(M, N, layout), dot_fma(a, b, acc))


def test_dot_fma_kernel_in_the_interpreter_and_ptx():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 8)).astype(np.float32)
    b = rng.standard_normal((8, 16)).astype(np.float32)
    c = rng.standard_normal((32, 16)).astype(np.float32)
    want = a @ b + c
    fma_kernel[(1,)](a, b, c, M=32, N=16, K=8)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    sig = {"a_ptr": "*fp32:16", "b_ptr": "*fp32:16", "c_ptr": "*fp32:16"}
    ptx = gluon.compile(fma_kernel, sig, dict(M=32, N=16, K=8)).asm["ptx"]
    assert ptx.count("fma.rn.f32") == 4 * 8  # 4 acc registers per thread, K = 8


def test_gl_dot_fma_is_the_ampere_builtin_when_exported():
    if not hasattr(gl, "dot_fma"):
        pytest.skip("gl.dot_fma is not exported yet (gluon/language/__init__.py)")
    assert gl.dot_fma is dot_fma


@gluon.jit
def cp_async_kernel(x_ptr, out_ptr, WAIT_FIRST: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    smem = gl.allocate_shared_memory(gl.float16, [2, 16, 64],
                                     gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))
    offs = tile_offsets(16, 64, layout)
    async_copy.async_copy_global_to_shared(smem.index(0), x_ptr + offs)
    async_copy.commit_group()
    async_copy.async_copy_global_to_shared(smem.index(1), x_ptr + 1024 + offs,
                                           mask=offs < 1000)
    async_copy.commit_group()
    if WAIT_FIRST:
        async_copy.wait_group(0)
    gl.store(out_ptr + offs, smem.index(1).load(layout))
    async_copy.wait_group(0)
    gl.store(out_ptr + 1024 + offs, smem.index(0).load(layout))


def test_cp_async_through_the_language_is_visible_after_wait_group():
    x = np.arange(2048).astype(np.float16)
    out = np.zeros_like(x)
    cp_async_kernel[(1,)](x, out, WAIT_FIRST=True)
    second = x[1024:].copy()
    second[1000:] = 0  # masked off: zero-filled
    np.testing.assert_array_equal(out[:1024], second)
    np.testing.assert_array_equal(out[1024:], x[:1024])


def test_cp_async_read_before_wait_group_is_a_race_naming_both_lines():
    x = np.arange(2048).astype(np.float16)
    with pytest.raises(InterpreterError) as info:
        cp_async_kernel[(1,)](x, np.zeros_like(x), WAIT_FIRST=False)
    text = str(info.value)
    assert "race: local_load reads shared memory that the async copy at" in text
    assert "gl.store(out_ptr + offs, smem.index(1).load(layout))" in text


def test_cp_async_kernel_ptx():
    sig = {"x_ptr": "*fp16:16", "out_ptr": "*fp16:16"}
    ptx = gluon.compile(cp_async_kernel, sig, dict(WAIT_FIRST=True)).asm["ptx"]
    assert ptx.count("cp.async.cg.shared.global") == 2  # 16x64 fp16 / 128 threads / 16 B x2
    assert "cp.async.commit_group;" in ptx and "cp.async.wait_group 0;" in ptx
