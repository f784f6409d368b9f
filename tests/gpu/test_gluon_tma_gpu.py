"""Gluon TMA additions on the H100: blocks above 256 per dim (several boxes per copy), rank-1
descriptors, descriptors built in the kernel (`tma.make_tensor_descriptor`), and a
`_reinterpret` that reaches into the next ring slot (tutorial 07's B-buffer steal), each
against the interpreter's result on the same inputs."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "hopper"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gluon", "shared_memory"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("case", ["rows", "cols", "both"])
def test_blocks_above_256_copy_exactly_on_the_gpu(torch, case):
    from test_tma_large_blocks import CASES, _descs, tma_copy_kernel

    shape, block, dtype, layout, _ = CASES[case]
    x = (np.arange(np.prod(shape)) % 1999).reshape(shape).astype(dtype)
    xg = torch.from_numpy(x).cuda()
    out = torch.full(shape, -1, dtype=xg.dtype, device="cuda")
    grid = (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
    tma_copy_kernel[grid](*_descs(xg, out, block, layout))
    np.testing.assert_array_equal(out.cpu().numpy(), x)


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_kernel_built_descriptors_on_the_gpu(torch, padding):
    import tile
    from test_tma_device_descriptor_dims import _run, device_desc_copy_kernel

    x, y, dims = _run(100, 72, padding)  # the interpreter's result
    sizes = []

    def alloc(size, alignment, stream):
        sizes.append((size, alignment))
        return torch.empty(size, dtype=torch.int8, device="cuda")

    tile.set_allocator(alloc)
    xg = torch.from_numpy(np.ascontiguousarray(x)).cuda()
    yg = torch.full((100, 72), 7, dtype=torch.float16, device="cuda")
    dg = torch.zeros(5, dtype=torch.int64, device="cuda")
    device_desc_copy_kernel[(2, 2)](xg, yg, 100, 72, 72, 72, dg, BM=64, BN=64,
                                    PADDING=padding)
    torch.cuda.synchronize()
    assert sizes == [(4 * 256, 128)]  # two 128-byte maps per program
    np.testing.assert_array_equal(yg.cpu().numpy(), y)
    assert dg.cpu().numpy().tolist() == dims.tolist()


@pytest.mark.parametrize("block", [64, 512])
def test_rank_1_descriptors_on_the_gpu(torch, block):
    # The driver rejected a rank-1 map before its stride array became non-empty.
    from test_tma_large_blocks import copy_1d

    x = torch.randn(500, device="cuda")
    out = torch.full((500,), -1.0, device="cuda")
    copy_1d(x, out, block)
    torch.testing.assert_close(out, x, rtol=0, atol=0)


def test_reinterpret_reaching_the_next_slot_on_the_gpu(torch):
    from test_reinterpret_reach import steal_kernel

    expected = np.zeros((32, 64), np.float16)
    steal_kernel[(1,)](expected, 1)  # the interpreter
    out = torch.zeros((32, 64), dtype=torch.float16, device="cuda")
    steal_kernel[(1,)](out, 1)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


def test_fresh_descriptors_reuse_the_map_until_the_storage_changes(torch, monkeypatch):
    """Fresh Gluon descriptors over the same tensor reuse its encoded map; a new tensor of the
    same shape gets its own (a stale map would copy the old tensor), and one allocated where a
    freed one lived may reuse the map, which is exact there."""
    from test_tma_large_blocks import SWIZZLED, tma_copy_kernel

    from gluon.nvidia.hopper import TensorDescriptor
    from shared_codegen.runtime import tensor_descriptor as shared

    encoded = []
    real_encode = shared.TensorDescriptor._encode

    def counting_encode(desc):
        encoded.append(desc.base.data_ptr())
        return real_encode(desc)

    monkeypatch.setattr(shared.TensorDescriptor, "_encode", counting_encode)
    monkeypatch.setattr(shared, "_ENCODED", {})
    block, grid = [64, 64], (4, 2)

    def copy(x, out):
        out.fill_(-1)
        tma_copy_kernel[grid](TensorDescriptor.from_tensor(x, block, SWIZZLED),
                              TensorDescriptor.from_tensor(out, block, SWIZZLED))
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x, rtol=0, atol=0)

    x = torch.randn((256, 128), device="cuda", dtype=torch.float16)
    out = torch.empty_like(x)
    for _ in range(3):
        copy(x, out)
    assert encoded == [x.data_ptr(), out.data_ptr()]
    y, out_y = torch.randn_like(x), torch.empty_like(x)  # new storage, same shape
    copy(y, out_y)
    assert encoded[2:] == [y.data_ptr(), out_y.data_ptr()]
    addresses = {x.data_ptr(), out.data_ptr(), y.data_ptr(), out_y.data_ptr()}
    del x, out
    z, out_z = torch.randn_like(y), torch.empty_like(y)  # likely at x's and out's addresses
    copy(z, out_z)
    addresses |= {z.data_ptr(), out_z.data_ptr()}
    assert sorted(encoded) == sorted(addresses)  # each address encoded once
    copy(y, out_y)  # the older maps still serve
    assert len(encoded) == len(addresses)
