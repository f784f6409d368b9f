"""Hopper kernels written the way Triton 3.6-3.8 Gluon kernels are: shared layouts from
`NVMMASharedLayout.get_default_for`, the 3.7/3.8 spellings (`tma.async_load`,
`tma.async_store`, `mbarrier.allocate_mbarrier`, `gl.barrier`) and `warpgroup_mma_init`.
Each runs in the interpreter and compiles for sm_90a."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                          warpgroup_mma, warpgroup_mma_accumulator_type,
                                          warpgroup_mma_init, warpgroup_mma_wait)
from gluon.nvidia.hopper import TensorDescriptor


@gluon.jit
def add_one_tma_kernel(in_desc, out_desc):
    # Everything about the tile comes from the descriptor, as upstream tutorials write it.
    block_m: gl.constexpr = in_desc.block_type.shape[0]
    block_n: gl.constexpr = in_desc.block_type.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    m = gl.program_id(0) * block_m
    n = gl.program_id(1) * block_n
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [m, n], bar, smem)
    mbarrier.wait(bar, phase=0)
    mbarrier.invalidate(bar)
    x = smem.load(layout)
    gl.barrier()  # every thread has read smem before it is overwritten
    smem.store(x + 1.0)
    fence_async_shared()
    tma.async_store(out_desc, [m, n], smem)
    tma.store_wait(0)


def _descs(x, out, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.float16)
    return (TensorDescriptor.from_tensor(x, block, layout),
            TensorDescriptor.from_tensor(out, block, layout))


@pytest.mark.parametrize("block", [[64, 64], [32, 128], [64, 16]])
def test_a_tma_round_trip_with_default_layouts_and_newer_names(block):
    x = (np.arange(128 * 128) % 251).astype(np.float16).reshape(128, 128)
    out = np.zeros_like(x)
    add_one_tma_kernel[(128 // block[0], 128 // block[1])](*_descs(x, out, block))
    np.testing.assert_array_equal(out, x + np.float16(1))


def test_the_newer_names_compile_to_bulk_tensor_copies():
    x = np.zeros((128, 128), np.float16)
    in_desc, out_desc = _descs(x, x, [64, 64])
    ptx = gluon.compile(add_one_tma_kernel, {"in_desc": in_desc, "out_desc": out_desc},
                        target="sm_90a").asm["ptx"]
    for text in ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                 "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
                 "mbarrier.try_wait.parity", "bar.sync"):
        assert text in ptx, text


def test_options_that_need_clusters_are_refused_by_name():
    @gluon.jit
    def kernel(in_desc):
        smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
        bar = mbarrier.allocate_mbarrier(two_ctas=True)
        tma.async_load(in_desc, [0, 0], bar, smem)

    x = np.zeros((64, 64), np.float16)
    with pytest.raises(Exception, match="two_ctas=True is not supported"):
        kernel[(1,)](_descs(x, x, [64, 64])[0])


@gluon.jit
def batched_barriers_kernel(out_ptr, N: gl.constexpr):
    bars = mbarrier.allocate_mbarrier(batch=N)
    for i in gl.static_range(N):
        mbarrier.init(bars.index(i), count=1)
        mbarrier.arrive(bars.index(i))
        mbarrier.wait(bars.index(i), 0)
        gl.store(out_ptr + i, i + 1)


def test_allocate_mbarrier_with_a_batch_gives_one_barrier_per_index():
    out = np.zeros(3, np.int32)
    batched_barriers_kernel[(1,)](out, 3)
    np.testing.assert_array_equal(out, [1, 2, 3])


@gluon.jit
def wgmma_init_kernel(a_ptr, b_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                      K: gl.constexpr):
    mma: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, N, 16])
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rk = gl.arange(0, K, layout=gl.SliceLayout(0, blocked))
    rm = gl.arange(0, M, layout=gl.SliceLayout(1, blocked))
    rn = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
    rkb = gl.arange(0, K, layout=gl.SliceLayout(1, blocked))
    a = gl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = gl.load(b_ptr + rkb[:, None] * N + rn[None, :])
    a_s = gl.allocate_shared_memory(gl.float16, [M, K],
                                    gl.NVMMASharedLayout.get_default_for([M, K], gl.float16), a)
    b_s = gl.allocate_shared_memory(gl.float16, [K, N],
                                    gl.NVMMASharedLayout.get_default_for([K, N], gl.float16), b)
    fence_async_shared()
    acc = warpgroup_mma_init(gl.zeros([M, N], gl.float32, mma))
    acc = warpgroup_mma(a_s, b_s, acc, is_async=True)
    gl.static_assert(acc.accumulator_type == warpgroup_mma_accumulator_type(
        gl.distributed_type(gl.float32, [M, N], mma)))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    out = gl.convert_layout(acc, blocked)
    gl.store(out_ptr + rm[:, None] * N + rn[None, :], out)


def test_warpgroup_mma_accumulator_type_wraps_the_tensor_type():
    mma = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])
    t = warpgroup_mma_accumulator_type(gl.distributed_type(gl.float32, [64, 64], mma))
    assert t == warpgroup_mma_accumulator_type(gl.distributed_type(gl.float32, [64, 64], mma))
    assert t != warpgroup_mma_accumulator_type(gl.distributed_type(gl.float16, [64, 64], mma))
    assert tuple(t.tensor_type.shape) == (64, 64) and t.tensor_type.element == gl.float32


def test_warpgroup_mma_init_starts_an_async_accumulator():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 32)).astype(np.float16)
    b = rng.uniform(-1, 1, (32, 64)).astype(np.float16)
    out = np.zeros((64, 64), np.float32)
    wgmma_init_kernel[(1,)](a, b, out, 64, 64, 32)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)
    ptx = gluon.compile(wgmma_init_kernel, {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16",
                                            "out_ptr": "*fp32:16"},
                        {"M": 64, "N": 64, "K": 32}).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx


@gluon.jit
def block_type_kernel(a_desc, b_desc, out_ptr):
    gl.static_assert(a_desc.block_type == b_desc.block_type)
    gl.static_assert(a_desc.type.block_type == a_desc.block_type)
    dtype: gl.constexpr = a_desc.type.block_type.element_ty
    shape: gl.constexpr = [2] + a_desc.block_type.shape
    smem = gl.allocate_shared_memory(dtype, shape, a_desc.layout)
    gl.store(out_ptr, smem.index(1).type.shape[0] + a_desc.block_type.numel)


def test_descriptor_block_types_compare_by_shape_and_element():
    x = np.zeros((64, 64), np.float16)
    a, b = _descs(x, x, [32, 64])
    out = np.zeros(1, np.int32)
    block_type_kernel[(1,)](a, b, out)
    assert out[0] == 32 + 32 * 64
    c = _descs(x, x, [64, 64])[0]
    with pytest.raises(Exception, match="static_assert"):
        block_type_kernel[(1,)](a, c, out)


@gluon.jit
def descriptor_dims_kernel(desc, out_ptr):
    # Upstream kernels loop over `desc.shape[1]` instead of passing K.
    for i in gl.static_range(2):
        gl.store(out_ptr + i, desc.shape[i])
        gl.store(out_ptr + 2 + i, desc.strides[i].to(gl.int32))


def test_descriptor_shape_and_strides_are_runtime_values_in_the_interpreter():
    x = np.zeros((100, 200), np.float16)
    d = TensorDescriptor.from_tensor(x[:, :160], [64, 64],
                                     gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16))
    out = np.zeros(4, np.int32)
    descriptor_dims_kernel[(1,)](d, out)
    np.testing.assert_array_equal(out, [100, 160, 200, 1])


def test_descriptor_shape_in_a_compiled_kernel_reads_the_parameter_fields():
    x = np.zeros((64, 64), np.float16)
    k = gluon.compile(descriptor_dims_kernel, {"desc": _descs(x, x, [64, 64])[0],
                                               "out_ptr": "*i32"})
    # shape[i] and strides[i] are the i64 fields at 136 + 8 i and 152 + 8 i of the parameter.
    for offset in (136, 144, 152, 160):
        assert f"descriptor_dims_kernel_param_0+{offset}]" in k.asm["ptx"], offset


@gluon.jit
def wgmma_m64_kernel(a_ptr, b_ptr, out_ptr, A_IN_REGS: gl.constexpr, num_warps: gl.constexpr):
    # M = 64 on 8 warps: the second warpgroup computes a copy of the first one's tile.
    mma: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [num_warps, 1], [16, 32, 16])
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    rm = gl.arange(0, 64, layout=gl.SliceLayout(1, blocked))
    rk = gl.arange(0, 32, layout=gl.SliceLayout(0, blocked))
    rkb = gl.arange(0, 32, layout=gl.SliceLayout(1, blocked))
    a = gl.load(a_ptr + rm[:, None] * 32 + rk[None, :])
    b = gl.load(b_ptr + rkb[:, None] * 32 + rk[None, :])
    a_s = gl.allocate_shared_memory(gl.float16, [64, 32],
                                    gl.NVMMASharedLayout.get_default_for([64, 32], gl.float16), a)
    b_s = gl.allocate_shared_memory(gl.float16, [32, 32],
                                    gl.NVMMASharedLayout.get_default_for([32, 32], gl.float16), b)
    fence_async_shared()
    if A_IN_REGS:
        a_op = a_s.load(gl.DotOperandLayout(0, mma, 2))
    else:
        a_op = a_s
    acc = warpgroup_mma(a_op, b_s, gl.zeros([64, 32], gl.float32, mma))
    gl.store(out_ptr + rm[:, None] * 32 + rk[None, :], gl.convert_layout(acc, blocked))


@pytest.mark.parametrize("a_in_regs", [False, True])
def test_wgmma_with_m64_on_8_warps(a_in_regs):
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (64, 32)).astype(np.float16)
    b = rng.uniform(-1, 1, (32, 32)).astype(np.float16)
    out = np.zeros((64, 32), np.float32)
    wgmma_m64_kernel[(1,)](a, b, out, a_in_regs, num_warps=8)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)
    ptx = gluon.compile(wgmma_m64_kernel, {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16",
                                           "out_ptr": "*fp32:16"},
                        {"A_IN_REGS": a_in_regs}, num_warps=8).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16" in ptx


@gluon.jit
def store_wait_kernel(out_desc, READ_ONLY: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    smem = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_shape, out_desc.layout,
                                     gl.full(out_desc.block_shape, 3.0, gl.float16, layout))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], smem)
    tma.store_wait(0, read_only=READ_ONLY)


@pytest.mark.parametrize("read_only", [True, False])
def test_store_wait_read_only_chooses_the_wait(read_only):
    out = np.zeros((64, 64), np.float16)
    d = _descs(out, out, [64, 64])[1]
    store_wait_kernel[(1,)](d, read_only)
    assert (out == 3).all()
    ptx = gluon.compile(store_wait_kernel, {"out_desc": d}, {"READ_ONLY": read_only}).asm["ptx"]
    wait = "cp.async.bulk.wait_group.read 0" if read_only else "cp.async.bulk.wait_group 0"
    assert wait in ptx


@gluon.jit
def wrapped_index_kernel(out_ptr, i, USE: gl.constexpr):
    bars = mbarrier.allocate_mbarrier(batch=2)
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    # (i - 1) % 2 is -1 for i = 0 (a remainder, as on the GPU): harmless under a false pred.
    mbarrier.arrive(bars.index((i - 1) % 2), pred=(i >= 1) | USE)
    gl.store(out_ptr, 1)


def test_an_out_of_range_index_is_an_error_only_where_the_view_is_used():
    out = np.zeros(1, np.int32)
    wrapped_index_kernel[(1,)](out, 0, False)
    assert out[0] == 1
    with pytest.raises(Exception, match=r"memdesc_index at .*test_newer_names.py:\d+: index -1 "
                                        r"is outside \[0, 2\) \(program id \(0, 0, 0\)\) is used"):
        wrapped_index_kernel[(1,)](out, 0, True)
