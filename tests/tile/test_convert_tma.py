"""The converter on tensor-descriptor kernels (tutorial 09's structure, our kernels): TMA
rings become mbarriers and `tma.async_copy_global_to_shared` in readable Gluon, stores
`tma.async_copy_shared_to_global`, and descriptors the kernel builds
`tma.make_tensor_descriptor`; the converted kernel compiles for sm_90a and computes, in the
interpreter, bit for bit what the tile kernel computes."""

import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from tile.convert import to_gluon
from tile.tools.tensor_descriptor import TensorDescriptor

M, N, K, BLOCK = 192, 160, 144, 64  # partial tiles in N and K: TMA pads and clips


@tile.jit
def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr):
    # Tutorial 09's matmul_kernel_tma: host descriptors, B given as N x K.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([pid_n * BN, k * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@tile.jit
def matmul_descriptor_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                                 BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr,
                                 SUBTILE: tl.constexpr):
    # Tutorial 09's matmul_kernel_descriptor_persistent: descriptors built in the kernel,
    # persistent tiles, and the split epilogue.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN // 2 if SUBTILE else BN])
    tiles_n = tl.cdiv(N, BN)
    for tile_id in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, NUM_SMS):
        off_m = (tile_id // tiles_n) * BM
        off_n = (tile_id % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(tl.cdiv(K, BK)):
            acc = tl.dot(a_desc.load([off_m, k * BK]), b_desc.load([off_n, k * BK]).T, acc)
        if SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([off_m, off_n], left.to(tl.float16))
            c_desc.store([off_m, off_n + BN // 2], right.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], acc.to(tl.float16))


def _operands():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


def _descriptors(a, b, c):
    return [TensorDescriptor.from_tensor(x, [BLOCK, BLOCK]) for x in (a, b, c)]


def test_host_descriptor_matmul_converts_to_a_tma_ring(load_source, monkeypatch):
    a, b, want = _operands()
    c = np.zeros((M, N), np.float16)
    text = to_gluon(matmul_tma, *_descriptors(a, b, c), M, N, K, BM=BLOCK, BN=BLOCK,
                    BK=BLOCK)
    for form in ("from gluon.language.nvidia.hopper import mbarrier, tma",
                 "MBARRIER0 = gl.constexpr(mbarrier.MBarrierLayout())",
                 "= gl.allocate_shared_memory(gl.float16, [3, 64, 64], NVMMA_SHARED0)",
                 "= gl.allocate_shared_memory(gl.int64, [3, 1], MBARRIER0)",
                 "mbarrier.init(", "mbarrier.expect(", "mbarrier.wait(",
                 "tma.async_copy_global_to_shared(a_desc, [",
                 "warpgroup_mma_wait(num_outstanding=1", "tma.async_copy_shared_to_global(c_desc",
                 "tma.store_wait(0)",
                 "- a_desc: a TensorDescriptor of float16 with block_shape [64, 64] and layout "
                 "NVMMA_SHARED0"):
        assert form in text, form
    assert "tensormap" not in text and "local_dealloc" not in text
    converted = load_source("converted_matmul_tma", text)

    monkeypatch.setenv("SC_TARGET", "sm_90a")
    grid = (M // BLOCK, -(-N // BLOCK))
    matmul_tma[grid](*_descriptors(a, b, c), M, N, K, BM=BLOCK, BN=BLOCK, BK=BLOCK)
    got = np.zeros((M, N), np.float16)
    converted.matmul_tma[grid](*_descriptors(a, b, got), M, N, K)
    np.testing.assert_array_equal(got, c)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-2)

    sig = {"a_desc": _descriptors(a, b, c)[0], "b_desc": _descriptors(a, b, c)[1],
           "c_desc": _descriptors(a, b, c)[2], "M": "i32", "N": "i32", "K": "i32"}
    ptx = gluon.compile(converted.matmul_tma, sig, target="sm_90a").asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert "mbarrier.try_wait.parity" in ptx and "wgmma.mma_async" in ptx


@pytest.mark.parametrize("subtile", [False, True])
def test_kernel_built_descriptors_convert_to_make_tensor_descriptor(load_source, monkeypatch,
                                                                     subtile):
    consts = dict(BM=BLOCK, BN=BLOCK, BK=BLOCK, NUM_SMS=3, SUBTILE=subtile)
    a, b, want = _operands()
    c = np.zeros((M, N), np.float16)
    text = to_gluon(matmul_descriptor_persistent, a, b, c, M, N, K, **consts)
    block_c = "[64, 32]" if subtile else "[64, 64]"
    for form in ("a_desc = tma.make_tensor_descriptor(a_ptr, [M, K], [",
                 ", 1], [64, 64], NVMMA_SHARED0)",
                 f"c_desc = tma.make_tensor_descriptor(c_ptr, [M, N], [",
                 f", 1], {block_c}, NVMMA_SHARED",
                 "tma.async_copy_global_to_shared(a_desc, [", "tma.async_copy_shared_to_global("):
        assert form in text, form
    assert "tensormap" not in text and "global_scratch" not in text
    assert text.count("tma.async_copy_shared_to_global(c_desc") == (2 if subtile else 1)
    converted = load_source(f"converted_descriptor_persistent_{subtile}", text)

    monkeypatch.setenv("SC_TARGET", "sm_90a")
    matmul_descriptor_persistent[(3,)](a, b, c, M, N, K, **consts)
    got = np.zeros((M, N), np.float16)
    converted.matmul_descriptor_persistent[(3,)](a, b, got, M, N, K)
    np.testing.assert_array_equal(got, c)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-2)

    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32",
           "N": "i32", "K": "i32"}
    kernel = gluon.compile(converted.matmul_descriptor_persistent, sig, target="sm_90a")
    assert kernel.asm["ptx"].count("tensormap.replace.tile.global_address") == 3
    assert kernel.metadata["global_scratch_bytes"] == 3 * 128


@tile.jit
def accumulate(desc, x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    desc.atomic_add([tl.program_id(0) % 2 * BLOCK], tl.load(x_ptr + offs))


def test_tma_reductions_convert_to_async_atomic_add(load_source, monkeypatch):
    x = np.arange(64, dtype=np.float32)
    out = np.ones(128, np.float32)
    text = to_gluon(accumulate, TensorDescriptor.from_tensor(out, [64]), x, BLOCK=64)
    assert "tma.async_atomic_add(desc, [" in text and "tma.store_wait(0)" in text
    converted = load_source("converted_accumulate", text)
    converted.accumulate[(3,)](TensorDescriptor.from_tensor(out, [64]), x)
    np.testing.assert_array_equal(out, np.concatenate([1 + 2 * x, 1 + x]))


@tile.jit
def owner_of_each_slot(out_ptr, sizes_ptr, n_groups, STEP: tl.constexpr):
    # Tutorial 08's scheduling: a while loop whose condition reads the enclosing loop's values.
    idx = tl.program_id(0)
    end = 0
    for g in range(n_groups):
        count = tl.load(sizes_ptr + g)
        while idx >= end and idx < end + count:
            tl.store(out_ptr + idx, g)
            idx += STEP
        end += count


def test_while_conditions_receive_the_enclosing_loops_values(load_source):
    sizes = np.array([3, 5, 2], np.int32)
    out = np.full(10, -1, np.int32)
    text = to_gluon(owner_of_each_slot, out, sizes, 3, STEP=4)
    assert "def _while_condition_0(idx, end, count):" in text
    converted = load_source("converted_owner_of_each_slot", text)
    converted.owner_of_each_slot[(4,)](out, sizes, 3)
    np.testing.assert_array_equal(out, np.repeat(np.arange(3, dtype=np.int32), sizes))
