"""TMA blocks larger than one box (256 per dim, or one swizzle width along the contiguous
dim) are moved as several boxes, as in Triton: the interpreter moves the same bytes, the
lowering issues one message per box at the box's coordinates and shared offset."""

import re

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluon.nvidia.hopper import TensorDescriptor

SWIZZLED = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
UNSWIZZLED = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)


@gluon.jit
def tma_copy_kernel(in_desc, out_desc):
    """One block per program: TMA load, wait, TMA store of the same shared buffer."""
    BM: gl.constexpr = in_desc.block_type.shape[0]
    BN: gl.constexpr = in_desc.block_type.shape[1]
    m = gl.program_id(0) * BM
    n = gl.program_id(1) * BN
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [m, n], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    fence_async_shared()
    tma.async_copy_shared_to_global(out_desc, [m, n], smem)
    tma.store_wait(0)


# (shape, block, dtype, layout, boxes per copy)
CASES = {
    "rows": ((600, 64), [512, 64], np.float16, SWIZZLED, 2),  # 512 rows: 2 boxes of 256
    "cols": ((40, 1000), [8, 512], np.float32, UNSWIZZLED, 2),  # 512 unswizzled cols
    "both": ((300, 200), [512, 128], np.float16, SWIZZLED, 4),  # 2 row boxes x 2 swizzle rows
}


def _descs(x, out, block, layout):
    return (TensorDescriptor.from_tensor(x, block, layout),
            TensorDescriptor.from_tensor(out, block, layout))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_block_above_256_copies_exactly_in_the_interpreter(case):
    shape, block, dtype, layout, _ = CASES[case]
    x = (np.arange(np.prod(shape)) % 1999).reshape(shape).astype(dtype)
    out = np.full(shape, -1, dtype)
    grid = (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
    tma_copy_kernel[grid](*_descs(x, out, block, layout))
    np.testing.assert_array_equal(out, x)  # partial blocks: stores clipped, loads padded


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_block_above_256_is_one_message_per_box(case):
    shape, block, dtype, layout, boxes = CASES[case]
    x = np.zeros(shape, dtype)
    in_desc, out_desc = _descs(x, x.copy(), block, layout)
    ptx = gluon.compile(tma_copy_kernel, {"in_desc": in_desc, "out_desc": out_desc},
                        target="sm_90a").asm["ptx"]
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == boxes
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == boxes
    assert ptx.count("cp.async.bulk.commit_group") == 1  # one bulk group per store op
    # The map encodes one box; the second row box is 256 rows further down (the row
    # coordinate is a multiple of 512 there, so LLVM may OR the 256 in) and starts 256
    # rows into the buffer; with 128-byte swizzling the second 64-column box follows all
    # 512 rows of the first (NVMMA stacks swizzle-width column tiles).
    row_box, col_box = 256 * 64 * 2, 512 * 64 * 2
    offsets = {"rows": [row_box], "both": [row_box, col_box, row_box + col_box], "cols": []}
    if case != "cols":
        assert re.search(r"(add\.s32|or\.b32)\s+%r\d+, %r\d+, 256;", ptx)
    for offset in offsets[case]:
        assert re.search(rf"add\.s64\s+%rd\d+, %rd\d+, {offset};", ptx), offset
    # The whole block's bytes complete the barrier's transaction count.
    assert f"], {int(np.prod(block)) * np.dtype(dtype).itemsize};" in ptx


def test_the_host_map_encodes_one_box():
    from shared_codegen.ops.tma.definition import box_shape

    for shape, block, dtype, layout, boxes in CASES.values():
        d = TensorDescriptor.from_tensor(np.zeros(shape, dtype), block, layout)
        box = box_shape(d.type)
        assert all(b <= 256 for b in box)
        assert int(np.prod([s // b for s, b in zip(block, box)])) == boxes


@gluon.jit
def tma_copy_1d_kernel(in_desc, out_desc, XBLOCK: gl.constexpr):
    """A rank-1 descriptor round trip (tutorial 04's memcpy_1d_tma)."""
    smem = gl.allocate_shared_memory(in_desc.dtype, [XBLOCK], in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [gl.program_id(0) * XBLOCK], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    tma.async_copy_shared_to_global(out_desc, [gl.program_id(0) * XBLOCK], smem)
    tma.store_wait(0)


def copy_1d(x, out, block):
    layout = gl.NVMMASharedLayout.get_default_for([block], gl.float32)
    n = x.shape[0]
    tma_copy_1d_kernel[(-(-n // block),)](TensorDescriptor(x, [n], [1], [block], layout),
                                          TensorDescriptor(out, [n], [1], [block], layout),
                                          block, num_warps=1)


@pytest.mark.parametrize("block", [64, 512])
def test_a_rank_1_descriptor_copies_exactly(block):
    x = np.arange(500, dtype=np.float32)
    out = np.full(500, -1, np.float32)
    copy_1d(x, out, block)
    np.testing.assert_array_equal(out, x)
