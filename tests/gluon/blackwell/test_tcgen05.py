"""tcgen05 MMA and tensor memory in @gluon.jit kernels: interpreter numerics against numpy
under several completion orders, races and overflow errors word for word, and the sm_100a
PTX / cubin."""

import inspect

import ml_dtypes
import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             fence_async_shared, get_tmem_reg_layout,
                                             mbarrier, tcgen05_commit, tcgen05_mma)
from shared_codegen.errors import OutOfResources
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.interpreter.memory import InterpreterError
from shared_codegen.lowering.backend import parse_resource_usage


@gluon.jit
def tile_offsets(M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    return rows[:, None] * N + cols[None, :]


@gluon.jit
def tcgen05_kernel(a_ptr, b_ptr, c_ptr, out_ptr, DTYPE: gl.constexpr, M: gl.constexpr,
                   N: gl.constexpr, K: gl.constexpr, SWIZZLE: gl.constexpr,
                   USE_ACC: gl.constexpr, K_STEPS: gl.constexpr, COMMIT: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=SWIZZLE,
                                              element_bitwidth=DTYPE.primitive_bitwidth, rank=2)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], tmem_layout, gl.num_warps())
    a = gl.allocate_shared_memory(DTYPE, [M, K], smem, gl.load(a_ptr + tile_offsets(M, K, blocked)))
    b = gl.allocate_shared_memory(DTYPE, [K, N], smem, gl.load(b_ptr + tile_offsets(K, N, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    if USE_ACC:
        acc.store(gl.convert_layout(gl.load(c_ptr + tile_offsets(M, N, blocked)), reg))
    KS: gl.constexpr = K // K_STEPS
    for i in gl.static_range(K_STEPS):  # chained MMAs on one accumulator
        if COMMIT:
            tcgen05_mma(a.slice(i * KS, KS, dim=1), b.slice(i * KS, KS, dim=0), acc,
                        use_acc=USE_ACC or i > 0)
        else:
            tcgen05_mma(a.slice(i * KS, KS, dim=1), b.slice(i * KS, KS, dim=0), acc,
                        use_acc=USE_ACC or i > 0, mbarriers=[bar],
                        mbarrier_preds=[i == K_STEPS - 1])
    if COMMIT:
        tcgen05_commit(bar)
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + tile_offsets(M, N, blocked), gl.convert_layout(acc.load(reg), blocked))
    mbarrier.invalidate(bar)


DTYPES = {"fp16": (gl.float16, np.float16), "bf16": (gl.bfloat16, ml_dtypes.bfloat16)}


def run(kind="fp16", m=128, n=64, k=64, use_acc=False, k_steps=1, commit=False, seed=0):
    dtype, np_dtype = DTYPES[kind]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32).astype(np_dtype)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(np_dtype)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    swizzle = min(128, (k // k_steps) * 2, n * 2)
    tcgen05_kernel[(1,)](a, b, c, out, DTYPE=dtype, M=m, N=n, K=k, SWIZZLE=swizzle,
                         USE_ACC=use_acc, K_STEPS=k_steps, COMMIT=commit)
    want = a.astype(np.float32) @ b.astype(np.float32) + (c if use_acc else 0)
    return out, want


@pytest.mark.parametrize("seed", ["0", "1", "7"])
@pytest.mark.parametrize("kind,m,n,k,use_acc,k_steps,commit", [
    ("fp16", 128, 64, 64, False, 1, False),
    ("bf16", 128, 32, 64, True, 2, False),
    ("fp16", 64, 64, 32, False, 2, True),
])
def test_tcgen05_matmul_matches_numpy(monkeypatch, seed, kind, m, n, k, use_acc, k_steps,
                                      commit):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    out, want = run(kind, m, n, k, use_acc, k_steps, commit)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


# ---- races, poison, overflow ----------------------------------------------------------------

@gluon.jit
def racy_kernel(a_ptr, b_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr,
                WAIT_FIRST: gl.constexpr, USE_ACC: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16,
                                              rank=2)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], tmem_layout, gl.num_warps())
    a = gl.allocate_shared_memory(gl.float16, [M, K], smem,
                                  gl.load(a_ptr + tile_offsets(M, K, blocked)))
    b = gl.allocate_shared_memory(gl.float16, [K, N], smem,
                                  gl.load(b_ptr + tile_offsets(K, N, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    tcgen05_mma(a, b, acc, use_acc=USE_ACC)
    tcgen05_commit(bar)
    if WAIT_FIRST:
        mbarrier.wait(bar, 0)
    x = acc.load(reg)  # the racy read when WAIT_FIRST is False
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + tile_offsets(M, N, blocked), gl.convert_layout(x, blocked))


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def run_racy(wait_first, use_acc=False, m=128, n=32, k=32):
    a = np.ones((m, k), np.float16)
    b = np.ones((k, n), np.float16)
    out = np.zeros((m, n), np.float32)
    racy_kernel[(1,)](a, b, out, M=m, N=n, K=k, WAIT_FIRST=wait_first, USE_ACC=use_acc)
    return out


@pytest.mark.parametrize("seed", ["0", "3"])
def test_loading_the_accumulator_before_the_commit_barrier_is_a_race(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    np.testing.assert_array_equal(run_racy(True), np.full((128, 32), 32, np.float32))
    with pytest.raises(InterpreterError) as info:
        run_racy(False)
    mma, load = line_of(racy_kernel, "tcgen05_mma(a, b, acc"), line_of(racy_kernel, "x = acc")
    path = __file__
    assert f"{path}:{load}: race: tensor_memory_descriptor.load reads tensor memory that the " \
           f"tcgen05_mma at {path}:{mma} may still be writing; wait on the mbarrier its " \
           f"completion is committed to (tcgen05_commit or mbarriers=[...]) first" \
           in str(info.value), str(info.value)


def test_uninitialized_tensor_memory_is_nan():
    # use_acc=True on a fresh allocation accumulates onto poison.
    assert np.isnan(run_racy(True, use_acc=True)).all()


@gluon.jit
def overflow_kernel(out_ptr, N: gl.constexpr, BUFFERS: gl.constexpr):
    layout: gl.constexpr = TensorMemoryLayout(block=(128, N), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [128, N], layout)
    more = allocate_tensor_memory(gl.float32, [BUFFERS, 128, N], layout)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, N], layout, gl.num_warps())
    acc.store(gl.full([128, N], 1.0, gl.float32, reg))
    more.index(0).store(acc.load(reg))


def test_tensor_memory_overflow_names_the_allocations():
    with pytest.raises(OutOfResources) as info:
        gluon.compile(overflow_kernel, {"out_ptr": "*fp32:16"}, dict(N=256, BUFFERS=2),
                      target="sm_100a", num_warps=4)
    path = __file__.rsplit("/", 1)[-1]
    acc, more = line_of(overflow_kernel, "acc = allocate"), line_of(overflow_kernel, "more =")
    assert "kernel `overflow_kernel` needs 768 columns of tensor memory, more than the 512 a " \
           f"CTA has (allocations: 256 columns for [128, 256] x fp32 at {path}:{acc}, 512 " \
           f"columns for [2, 128, 256] x fp32 at {path}:{more})" in str(info.value), \
        str(info.value)
    assert (info.value.resource, info.value.required, info.value.limit) == (
        "tensor memory", 768, 512)
    # The interpreter plans the same columns and reports the same overflow.
    with pytest.raises(InterpreterError) as info:
        overflow_kernel[(1,)](np.zeros(1, np.float32), N=256, BUFFERS=2)
    assert "needs 768 columns of tensor memory, more than the 512 a CTA has" in str(info.value)


# ---- TS form, views --------------------------------------------------------------------------

@gluon.jit
def ts_kernel(a_ptr, b_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16,
                                              rank=2)
    a_layout: gl.constexpr = TensorMemoryLayout(block=(M, K), col_stride=1)
    a_reg: gl.constexpr = get_tmem_reg_layout(gl.float16, [M, K], a_layout, gl.num_warps())
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], acc_layout, gl.num_warps())
    b = gl.allocate_shared_memory(gl.float16, [K, N], smem,
                                  gl.load(b_ptr + tile_offsets(K, N, blocked)))
    a = allocate_tensor_memory(gl.float16, [M, K], a_layout,
                               gl.convert_layout(gl.load(a_ptr + tile_offsets(M, K, blocked)),
                                                 a_reg))
    # Two accumulators in one [2, M, N] allocation; each half of N computed separately.
    accs = allocate_tensor_memory(gl.float32, [2, M, N], acc_layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = accs.index(1)
    tcgen05_mma(a, b.slice(0, N // 2, dim=1), acc.slice(0, N // 2), use_acc=False)
    tcgen05_mma(a, b.slice(N // 2, N // 2, dim=1), acc.slice(N // 2, N // 2), use_acc=False,
                mbarriers=[bar])
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + tile_offsets(M, N, blocked), gl.convert_layout(acc.load(reg), blocked))


@pytest.mark.parametrize("seed", ["0", "5"])
def test_ts_form_with_index_and_slice_views(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    rng = np.random.default_rng(1)
    m, n, k = 128, 64, 32
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = np.zeros((m, n), np.float32)
    ts_kernel[(1,)](a, b, out, M=m, N=n, K=k)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)


@gluon.jit
def wrong_warp_kernel(out_ptr):
    layout: gl.constexpr = TensorMemoryLayout(block=(128, 32), col_stride=1)
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    acc = allocate_tensor_memory(gl.float32, [128, 32], layout)
    acc.store(gl.full([128, 32], 1.0, gl.float32, blocked))


def test_a_register_layout_outside_the_warps_lanes_is_an_error():
    with pytest.raises(CompilationError) as info:
        wrong_warp_kernel[(1,)](np.zeros(1, np.float32))
    assert "tmem store value: the register layout puts element [8, 0] (TMEM lane 8) in warp " \
           "1, which may only access lanes 32...63; use get_tmem_reg_layout(...) for the " \
           "layout" in str(info.value), str(info.value)


# ---- PTX and cubin ---------------------------------------------------------------------------

def compiled(m=128, n=64, k=64, use_acc=True, commit=False, k_steps=1, num_warps=4):
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16",
           "out_ptr": "*fp32:16"}
    consts = dict(DTYPE=gl.float16, M=m, N=n, K=k, SWIZZLE=min(128, 2 * k // k_steps),
                  USE_ACC=use_acc, K_STEPS=k_steps, COMMIT=commit)
    return gluon.compile(tcgen05_kernel, sig, consts, target="sm_100a", num_warps=num_warps)


def test_sm100a_ptx_has_the_tcgen05_instructions_and_assembles_without_spills():
    comp = compiled()
    ptx = comp.asm["ptx"]
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in ptx
    assert "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" in ptx
    assert "tcgen05.dealloc.cta_group::1.sync.aligned.b32" in ptx
    # K = 64 in four K steps of 16.
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 4
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64" in ptx
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 2  # 64 columns
    assert "tcgen05.wait::ld.sync.aligned;" in ptx
    assert "tcgen05.st.sync.aligned.32x32b.x32.b32" in ptx
    assert "tcgen05.wait::st.sync.aligned;" in ptx
    assert "ttng.tc_gen5_mma" in str(comp.asm["ttgir"])
    cubin = comp.asm["cubin"]
    assert cubin
    from shared_codegen.lowering.backend import ptx_to_cubin
    _, log = ptx_to_cubin(ptx, "sm_100a", extra_opts=["-verbose"])
    (res,) = parse_resource_usage(log).values()
    assert res.spill_stores == 0 and res.spill_loads == 0, log


def test_tcgen05_commit_and_m64():
    comp = compiled(m=64, n=64, k=32, use_acc=False, commit=True, k_steps=2)
    ptx = comp.asm["ptx"]
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 2
    assert ptx.count("tcgen05.commit.cta_group::1") == 1
    # M = 64: TMEM lanes 16-31 of each quadrant are empty; lanes 16-31 read columns 32-63.
    assert "tcgen05.ld.sync.aligned.16x32bx2.x32.b32" in ptx and "], 32;" in ptx
    assert comp.asm["cubin"]


def test_instruction_and_shared_memory_descriptors():
    from shared_codegen.ir.types import SharedMemoryType, TensorMemoryType
    from shared_codegen.ops.tcgen05.lowering import DESCRIPTOR_VERSION, plan_tcgen05
    smem = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    a = SharedMemoryType((128, 64), gl.float16, smem, (128, 64))
    b = SharedMemoryType((64, 128), gl.float16, smem, (64, 128))
    d = TensorMemoryType((128, 128), gl.float32, TensorMemoryLayout((128, 128), 1), (128, 128))
    plan = plan_tcgen05(a, b, d)
    # PTX ISA Table 42: f32 D (bit 4), f16 A/B (0), A K-major, B N-major (bit 16), N >> 3 at
    # 17, M >> 4 at 24.
    assert plan.idesc == (1 << 4) | (1 << 16) | (16 << 17) | (8 << 24)
    assert plan.kind == "f16" and len(plan.steps) == 4
    assert plan.a.swizzle == 128 and plan.a.k_major and not plan.b.k_major
    # Blackwell's descriptor = wgmma's fields + the version bits 46-48 = 0b001; the 3-bit
    # swizzle field 61-63 reads wgmma's 2-bit code at 62-63 (128B: 2 << 61 == 1 << 62).
    assert DESCRIPTOR_VERSION == 1 << 46
    assert (plan.a.descriptor_hi() >> 61) == 2


@gluon.jit
def overwrite_kernel(a_ptr, b_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16,
                                              rank=2)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], tmem_layout, gl.num_warps())
    x = gl.load(a_ptr + tile_offsets(M, K, blocked))
    a = gl.allocate_shared_memory(gl.float16, [M, K], smem, x)
    b = gl.allocate_shared_memory(gl.float16, [K, N], smem,
                                  gl.load(b_ptr + tile_offsets(K, N, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
    tcgen05_mma(a, b, acc, use_acc=True)  # reading a again is fine
    mbarrier.wait(bar, 0)  # observes the first MMA's completion only
    a.store(x + x)  # a race: the second MMA may still be reading a
    tcgen05_commit(bar)
    mbarrier.wait(bar, 1)
    gl.store(out_ptr + tile_offsets(M, N, blocked), gl.convert_layout(acc.load(reg), blocked))


@pytest.mark.parametrize("seed", ["0", "2"])
def test_writing_a_shared_operand_of_an_in_flight_mma_is_a_race(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    m, n, k = 128, 32, 32
    a, b = np.ones((m, k), np.float16), np.ones((k, n), np.float16)
    out = np.zeros((m, n), np.float32)
    # Waiting on the first commit retires only the first MMA: the second still reads `a`.
    with pytest.raises(InterpreterError) as info:
        overwrite_kernel[(1,)](a, b, out, M=m, N=n, K=k)
    mma, store = line_of(overwrite_kernel, "tcgen05_mma(a, b, acc, use_acc=True)"), \
        line_of(overwrite_kernel, "a.store(x + x)")
    assert f"{__file__}:{store}: race: local_store writes shared memory that the tcgen05_mma " \
           f"at {__file__}:{mma} may still be reading; wait on the mbarrier its completion " \
           f"is committed to (tcgen05_commit or mbarriers=[...]) first" in str(info.value), \
        str(info.value)


def test_ts_form_compiles_with_packed_fp16_tensor_memory():
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "out_ptr": "*fp32:16"}
    comp = gluon.compile(ts_kernel, sig, dict(M=128, N=64, K=32), target="sm_100a",
                         num_warps=4)
    ptx = comp.asm["ptx"]
    # A: 32 fp16 per row packed in 16 columns; accumulators: [2, 128, 64] from column 128.
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%rd1], 256;" in ptx
    assert "tcgen05.st.sync.aligned.32x32b.x16.b32" in ptx
    # Two N halves x two K steps, A read from tensor memory ([%r..]).
    assert len([line for line in ptx.splitlines()
                if "tcgen05.mma.cta_group::1.kind::f16" in line and "], [%r" in line]) == 4
    assert comp.asm["cubin"]


# ---- FlashAttention's P over S: _reinterpret and the TS form ------------------------------

@gluon.jit
def p_over_s_kernel(q_ptr, k_ptr, v_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                    D: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16,
                                              rank=2)
    s_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    p_layout: gl.constexpr = TensorMemoryLayout(block=(M, N), col_stride=1)
    o_layout: gl.constexpr = TensorMemoryLayout(block=(M, D), col_stride=1)
    s_reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, N], s_layout, gl.num_warps())
    p_reg: gl.constexpr = get_tmem_reg_layout(gl.float16, [M, N], p_layout, gl.num_warps())
    o_reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [M, D], o_layout, gl.num_warps())
    q = gl.allocate_shared_memory(gl.float16, [M, D], smem,
                                  gl.load(q_ptr + tile_offsets(M, D, blocked)))
    k = gl.allocate_shared_memory(gl.float16, [N, D], smem,
                                  gl.load(k_ptr + tile_offsets(N, D, blocked)))
    v = gl.allocate_shared_memory(gl.float16, [N, D], smem,
                                  gl.load(v_ptr + tile_offsets(N, D, blocked)))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    s_tmem = allocate_tensor_memory(gl.float32, [M, N], s_layout)
    o_tmem = allocate_tensor_memory(gl.float32, [M, D], o_layout)
    tcgen05_mma(q, k.permute((1, 0)), s_tmem, use_acc=False, mbarriers=[bar])
    mbarrier.wait(bar, 0)
    p = (s_tmem.load(s_reg) * 0.125).to(gl.float16)
    p_tmem = s_tmem._reinterpret(gl.float16, [M, N], p_layout)
    p_tmem.store(gl.convert_layout(p, p_reg))
    tcgen05_mma(p_tmem, v, o_tmem, use_acc=False, mbarriers=[bar])
    mbarrier.wait(bar, 1)
    gl.store(out_ptr + tile_offsets(M, D, blocked),
             gl.convert_layout(o_tmem.load(o_reg), blocked))


def p_over_s_inputs(m=128, n=64, d=64):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(shape).astype(np.float16)
               for shape in ((m, d), (n, d), (n, d)))
    p = ((q.astype(np.float32) @ k.astype(np.float32).T) * 0.125).astype(np.float16)
    return q, k, v, p.astype(np.float32) @ v.astype(np.float32)


@pytest.mark.parametrize("seed", ["0", "6"])
def test_p_written_over_s_feeds_the_ts_mma(monkeypatch, seed):
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    q, k, v, want = p_over_s_inputs()
    out = np.zeros_like(want)
    p_over_s_kernel[(1,)](q, k, v, out, M=128, N=64, D=64)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-2)


def test_p_over_s_compiles_for_sm100a():
    sig = {"q_ptr": "*fp16:16", "k_ptr": "*fp16:16", "v_ptr": "*fp16:16", "out_ptr": "*fp32:16"}
    comp = gluon.compile(p_over_s_kernel, sig, dict(M=128, N=64, D=64), target="sm_100a",
                         num_warps=4)
    ptx = comp.asm["ptx"]
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%rd1], 128;" in ptx
    assert "ttng.tmem_reinterpret" in str(comp.asm["ttgir"])
    assert comp.asm["cubin"]


def test_tensor_memory_on_hopper_is_a_clear_error():
    with pytest.raises(Exception) as info:
        gluon.compile(tcgen05_kernel, {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16",
                                       "c_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                      dict(DTYPE=gl.float16, M=128, N=64, K=64, SWIZZLE=128, USE_ACC=False,
                           K_STEPS=1, COMMIT=False), target="sm_90a", num_warps=4)
    line = line_of(tcgen05_kernel, "acc = allocate_tensor_memory")
    assert f"{__file__}:{line}: ttng.tmem_alloc: allocate_tensor_memory needs tensor memory " \
           f"and tcgen05 (sm_100a); the target is sm_90a" in str(info.value), str(info.value)


@gluon.jit
def reuse_kernel(out_ptr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    layout: gl.constexpr = TensorMemoryLayout(block=(128, 256), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, 256], layout, gl.num_warps())
    first = allocate_tensor_memory(gl.float32, [128, 256], layout)
    first.store(gl.full([128, 256], 1.0, gl.float32, reg))
    x = gl.sum(gl.convert_layout(first.load(reg), blocked), axis=1)  # first's last use
    second = allocate_tensor_memory(gl.float32, [2, 128, 256], layout)  # all 512 columns
    second.index(1).store(gl.full([128, 256], 2.0, gl.float32, reg))
    y = gl.sum(gl.convert_layout(second.index(1).load(reg), blocked), axis=1)
    gl.store(out_ptr + gl.arange(0, 128, layout=gl.SliceLayout(1, blocked)), x + y)


def test_allocations_whose_lifetimes_do_not_overlap_share_columns():
    out = np.zeros(128, np.float32)
    reuse_kernel[(1,)](out)
    np.testing.assert_array_equal(out, np.full(128, 256 * 3.0, np.float32))
    comp = gluon.compile(reuse_kernel, {"out_ptr": "*fp32:16"}, {}, target="sm_100a",
                         num_warps=4)
    # 256 + 512 columns fit in 512 only because `second` reuses `first`'s columns.
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%rd1], 512;" in \
        comp.asm["ptx"]
