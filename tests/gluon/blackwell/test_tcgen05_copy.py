"""tcgen05_copy (shared -> tensor memory): interpreter numerics, its order with tcgen05_mma,
races word for word, the errors, and the sm_100a PTX / cubin."""

import inspect

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             fence_async_shared, mbarrier, tcgen05_commit,
                                             tcgen05_copy, tcgen05_mma)
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError


@gluon.jit
def offsets(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


@gluon.jit
def copy_kernel(in_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, BLOCK_N: gl.constexpr,
                SWIZZLE: gl.constexpr, RACY: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    smem_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=SWIZZLE,
                                                     element_bitwidth=32, rank=2)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(128, BLOCK_N), col_stride=1)
    x = gl.load(in_ptr + offsets(M, N, blocked))
    smem = gl.allocate_shared_memory(gl.float32, [M, N], smem_layout, x)
    tmem = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    tcgen05_copy(smem, tmem)
    tcgen05_commit(bar)
    if RACY:
        smem.store(x + 1.0)  # the copy may still be reading smem
    mbarrier.wait(bar, 0)
    out = tmem.load()
    gl.store(out_ptr + offsets(M, N, blocked), gl.convert_layout(out, blocked))


def run_copy(m, n, block_n, swizzle, racy=False):
    x = np.random.default_rng(0).standard_normal((m, n)).astype(np.float32)
    out = np.zeros_like(x)
    copy_kernel[(1,)](x, out, M=m, N=n, BLOCK_N=block_n, SWIZZLE=swizzle, RACY=racy)
    return x, out


@pytest.mark.parametrize("seed", ["0", "4"])
@pytest.mark.parametrize("m,n,block_n,swizzle", [(128, 32, 32, 128), (256, 16, 8, 64)])
def test_copy_is_exact(monkeypatch, seed, m, n, block_n, swizzle):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    x, out = run_copy(m, n, block_n, swizzle)
    np.testing.assert_array_equal(out, x)


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_overwriting_the_source_of_an_in_flight_copy_is_a_race():
    with pytest.raises(InterpreterError) as info:
        run_copy(128, 32, 32, 128, racy=True)
    copy = line_of(copy_kernel, "tcgen05_copy(smem, tmem)")
    store = line_of(copy_kernel, "smem.store(x + 1.0)")
    path = __file__
    assert f"{path}:{store}: race: local_store writes shared memory that the tcgen05_copy at " \
           f"{path}:{copy} may still be reading; wait on the mbarrier its completion is " \
           f"committed to (tcgen05_commit or mbarriers=[...]) first" in str(info.value), \
        str(info.value)


@gluon.jit
def copy_then_mma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                         K: gl.constexpr, LOAD_EARLY: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    ab_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16,
                                                   rank=2)
    c_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32,
                                                  rank=2)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    a = gl.allocate_shared_memory(gl.float16, [M, K], ab_layout,
                                  gl.load(a_ptr + offsets(M, K, blocked)))
    b = gl.allocate_shared_memory(gl.float16, [K, N], ab_layout,
                                  gl.load(b_ptr + offsets(K, N, blocked)))
    c = gl.allocate_shared_memory(gl.float32, [M, N], c_layout,
                                  gl.load(c_ptr + offsets(M, N, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    tcgen05_copy(c, acc)  # D = A @ B + C: the MMA runs after the copy, no wait between
    tcgen05_mma(a, b, acc, use_acc=True, mbarriers=[bar])
    if LOAD_EARLY:
        early = acc.load()  # a race: the copy and the MMA own acc until the wait
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + offsets(M, N, blocked), gl.convert_layout(acc.load(), blocked))


@pytest.mark.parametrize("seed", ["0", "1", "6"])
def test_copy_is_ordered_before_a_later_mma(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    m, n, k = 128, 32, 32
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    copy_then_mma_kernel[(1,)](a, b, c, out, M=m, N=n, K=k, LOAD_EARLY=False)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32) + c,
                               rtol=1e-5, atol=1e-4)
    with pytest.raises(InterpreterError) as info:
        copy_then_mma_kernel[(1,)](a, b, c, out, M=m, N=n, K=k, LOAD_EARLY=True)
    # The report names the last tensor-core operation that writes acc.
    load, mma = line_of(copy_then_mma_kernel, "early ="), line_of(copy_then_mma_kernel,
                                                                  "tcgen05_mma(a, b, acc")
    path = __file__
    assert f"{path}:{load}: race: tensor_memory_descriptor.load reads tensor memory that the " \
           f"tcgen05_mma at {path}:{mma} may still be writing; wait on the mbarrier its " \
           f"completion is committed to (tcgen05_commit or mbarriers=[...]) first" \
           in str(info.value), str(info.value)


def test_copy_ptx_and_cubin():
    comp = gluon.compile(copy_kernel, {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                         dict(M=256, N=32, BLOCK_N=32, SWIZZLE=128, RACY=False),
                         target="sm_100a", num_warps=4)
    ptx = comp.asm["ptx"]
    # 2 row blocks x 4 groups of 8 columns.
    assert ptx.count("tcgen05.cp.cta_group::1.128x256b") == 8
    assert "ttng.tmem_copy" in str(comp.asm["ttgir"])
    assert comp.asm["cubin"]


def test_copy_plan_columns_and_descriptor_starts():
    from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType
    from shared_codegen.ops.tcgen05.copy_lowering import plan_tcgen05_copy
    smem = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    src = SharedMemoryType((256, 32), gl.float32, smem, (256, 32))
    dst = TensorMemoryType((256, 32), gl.float32, TensorMemoryLayout((128, 32), 1), (256, 32))
    plan, steps = plan_tcgen05_copy(src, dst)
    assert plan.swizzle == 128 and plan.k_major
    # Rows 128-255 sit 32 columns further; each 8-column group starts 32 bytes on.
    assert steps == [(0, 0), (8, 32), (16, 64), (24, 96),
                     (32, 16384), (40, 16416), (48, 16448), (56, 16480)]


@gluon.jit
def bad_copy_kernel(DTYPE: gl.constexpr, BLOCK_M: gl.constexpr):
    smem_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64,
                                                     element_bitwidth=16, rank=2)
    smem = gl.allocate_shared_memory(DTYPE, [128, 64], smem_layout)
    tmem = allocate_tensor_memory(DTYPE, [128, 64], TensorMemoryLayout((BLOCK_M, 64), 1))
    tcgen05_copy(smem, tmem)


@pytest.mark.parametrize("dtype,block_m,message", [
    (gl.float16, 128, "tcgen05_copy into a TensorMemoryLayout copies 32-bit elements, got fp16"),
    (gl.float32, 64, "tcgen05_copy needs TensorMemoryLayout block M = 128 and M a multiple of "
                     "128 (it fills all 128 TMEM lanes), got block [64, 64] and shape [128, 64]"),
])
def test_copy_errors_in_the_users_terms(dtype, block_m, message):
    with pytest.raises(CompilationError) as info:
        gluon.compile(bad_copy_kernel, {}, dict(DTYPE=dtype, BLOCK_M=block_m),
                      target="sm_100a", num_warps=4)
    assert message in str(info.value), str(info.value)
    assert "test_tcgen05_copy.py" in str(info.value)
