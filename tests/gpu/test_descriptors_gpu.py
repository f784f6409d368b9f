"""Tile-DSL tensor descriptors (host TMA and device-side), block pointers, autotuning with
reset_to_zero, and the driver's device properties on the GPU, against numpy."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor

pytestmark = pytest.mark.gpu


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


@tile.jit
def host_desc_scale(a_desc, b_desc, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    b_desc.store([m, n], a_desc.load([m, n]) * 2)


@pytest.mark.parametrize("dtype,block", [("float16", (64, 64)), ("float32", (32, 16)),
                                         ("bfloat16", (128, 64))])
def test_host_descriptor_tma_copy(dtype, block):
    torch = _torch()
    x = torch.randn(300, 200, device="cuda").to(getattr(torch, dtype))
    y = torch.full_like(x, -1)
    grid = (-(-300 // block[0]), -(-200 // block[1]))
    host_desc_scale[grid](TensorDescriptor.from_tensor(x, list(block)),
                          TensorDescriptor.from_tensor(y, list(block)), BM=block[0], BN=block[1])
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)


@tile.jit
def host_desc_accumulate(a_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    out_desc.atomic_add([0, 0], a_desc.load([m, n]))


def test_host_descriptor_nan_padding_and_tma_reduction():
    torch = _torch()
    x = torch.randn(100, 72, device="cuda")
    out = torch.zeros(32, 16, device="cuda")
    a = TensorDescriptor.from_tensor(x, [32, 16], padding="nan")
    host_desc_accumulate[(3, 4)](a, TensorDescriptor.from_tensor(out, [32, 16]), BM=32, BN=16)
    torch.cuda.synchronize()
    expected = x[:96, :64].reshape(3, 32, 4, 16).sum(dim=(0, 2))
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    out.zero_()
    # Programs on row 3 or column 4 read past the edge: NaN reaches their whole block.
    host_desc_accumulate[(4, 5)](a, TensorDescriptor.from_tensor(out, [32, 16]), BM=32, BN=16)
    torch.cuda.synchronize()
    assert torch.isnan(out[4:, :]).all() and torch.isnan(out[:, 8:]).all()


@tile.jit
def device_desc_sum(x, y, M, N, ys, BM: tl.constexpr, BN: tl.constexpr, PAD: tl.constexpr):
    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN],
                                    padding_option=PAD)
    dst = tl.make_tensor_descriptor(y, shape=[M, N], strides=[ys, 1], block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]) + src.load([m, n + BN]))
    dst.atomic_add([m, n], tl.full([BM, BN], 1.0, tl.float32))


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_device_descriptor_matches_the_interpreter(pad):
    torch = _torch()
    x = np.random.default_rng(0).standard_normal((100, 200)).astype(np.float32)
    y = np.full((100, 208), -1.0, np.float32)
    grid = (-(-100 // 32), -(-200 // 64))
    device_desc_sum[grid](x, y, 100, 200, 208, BM=32, BN=64, PAD=pad)
    xg, yg = torch.from_numpy(x).cuda(), torch.full((100, 208), -1.0, device="cuda")
    # On sm_90 the kernel writes its TMA descriptors into scratch from the allocator.
    sizes = []

    def alloc(size, alignment, stream):
        sizes.append((size, alignment))
        return torch.empty(size, dtype=torch.int8, device="cuda")

    tile.set_allocator(alloc)
    device_desc_sum[grid](xg, yg, 100, 200, 208, BM=32, BN=64, PAD=pad)
    torch.cuda.synchronize()
    major = torch.cuda.get_device_capability()[0]
    assert sizes == ([(grid[0] * grid[1] * 256, 128)] if major >= 9 else [])
    shifted = np.full_like(x, np.nan if pad == "nan" else 0.0)
    shifted[:, :136] = x[:, 64:]
    np.testing.assert_allclose(y[:, :200], x + shifted + 1, rtol=1e-6)
    np.testing.assert_array_equal(yg.cpu().numpy(), y)


def test_device_descriptor_without_an_allocator_says_so():
    torch = _torch()
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("descriptors need scratch only where they are TMA descriptors (sm_90+)")
    from shared_codegen.runtime.allocation import NullAllocator
    tile.set_allocator(NullAllocator())
    x = torch.zeros(64, 64, device="cuda")
    with pytest.raises(RuntimeError, match="Kernel requires a runtime memory allocation, but "
                                           "no allocator was set"):
        device_desc_sum[(1, 1)](x, x, 64, 64, 64, BM=32, BN=32, PAD="zero")


@tile.jit
def block_ptr_matvec(a, x, out, M, K, BM: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    a_ptr = tl.make_block_ptr(a, shape=(M, K), strides=(K, 1), offsets=(pid * BM, 0),
                              block_shape=(BM, BK), order=(1, 0))
    x_ptr = tl.make_block_ptr(x, shape=(K,), strides=(1,), offsets=(0,), block_shape=(BK,),
                              order=(0,))
    acc = tl.zeros([BM], tl.float32)
    for _ in range(0, K, BK):
        tile_a = tl.load(a_ptr, boundary_check=(0, 1), padding_option="zero")
        acc += tl.sum(tile_a * tl.load(x_ptr, boundary_check=(0,))[None, :], axis=1)
        a_ptr = tl.advance(a_ptr, (0, BK))
        x_ptr = tl.advance(x_ptr, (BK,))
    o_ptr = tl.make_block_ptr(out, shape=(M,), strides=(1,), offsets=(pid * BM,),
                              block_shape=(BM,), order=(0,))
    tl.store(o_ptr, acc, boundary_check=(0,))


def test_block_pointers_matvec():
    torch = _torch()
    a = torch.randn(333, 257, device="cuda")
    x = torch.randn(257, device="cuda")
    out = torch.zeros(333, device="cuda")
    block_ptr_matvec[(-(-333 // 64),)](a, x, out, 333, 257, BM=64, BK=64)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a @ x, rtol=1e-4, atol=1e-4)


def test_autotune_times_on_the_gpu_and_resets_outputs():
    torch = _torch()

    @tile.autotune(configs=[tile.Config({"BLOCK": 128}), tile.Config({"BLOCK": 256})],
                   key=["n"], reset_to_zero=["total"])
    @tile.jit
    def count(x, total, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(total, tl.sum(tl.where(offs < n, 1, 0)))

    x = torch.zeros(10000, device="cuda")
    total = torch.zeros(1, dtype=torch.int32, device="cuda")
    count[lambda meta: (tile.cdiv(10000, meta["BLOCK"]),)](x, total, 10000)
    torch.cuda.synchronize()
    assert total.item() == 10000
    assert len(count.bench_results[(10000, "torch.float32", "torch.int32")]) == 2


def test_device_properties_have_tritons_keys():
    torch = _torch()
    from tile.runtime import driver
    device = driver.active.get_active_torch_device()
    props = driver.active.utils.get_device_properties(device.index)
    expected = torch.cuda.get_device_properties(device.index)
    assert props["multiprocessor_count"] == expected.multi_processor_count
    assert props["warpSize"] == 32 and props["max_shared_mem"] >= 48 * 1024
    assert set(props) == {"max_shared_mem", "max_num_regs", "multiprocessor_count", "warpSize",
                          "sm_clock_rate", "mem_clock_rate", "mem_bus_width"}
    assert tile.testing.do_bench(lambda: torch.ones(1 << 20, device="cuda"), rep=5) > 0


@tile.jit
def host_desc_1d_scale(a_desc, b_desc, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    b_desc.store([start], a_desc.load([start]) * 3)


@pytest.mark.parametrize("dtype,block", [("float32", 64), ("float16", 128)])
def test_host_descriptor_of_rank_one(dtype, block):
    """A 1-D tensor's map: the driver refuses a null stride array even for rank 1."""
    torch = _torch()
    x = torch.randn(1000, device="cuda").to(getattr(torch, dtype))
    y = torch.full_like(x, -1)
    host_desc_1d_scale[(-(-1000 // block),)](TensorDescriptor.from_tensor(x, [block]),
                                             TensorDescriptor.from_tensor(y, [block]),
                                             BLOCK=block)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 3)
