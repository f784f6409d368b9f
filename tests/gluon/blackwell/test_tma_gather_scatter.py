"""Blackwell's TMA row gathers (Gluon 3.6 `tma.async_gather` / `tma.async_scatter`): exact
in the interpreter, one gather4 / scatter4 message per four rows and box column chunk in
sm_100a PTX, and errors in the user's terms."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import fence_async_shared, mbarrier, tma
from gluon.nvidia.blackwell import TensorDescriptor

LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)


@gluon.jit
def gather_scatter_kernel(src_desc, dst_desc, idx_ptr, out_idx_ptr, y_offset,
                          N: gl.constexpr, M: gl.constexpr):
    """Gather rows idx[i] of src (columns y_offset..) into smem, then scatter smem row i to
    row out_idx[i] of dst (same columns)."""
    rows_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    idx = gl.load(idx_ptr + gl.arange(0, N, rows_layout))
    out_idx = gl.load(out_idx_ptr + gl.arange(0, N, rows_layout))
    smem = gl.allocate_shared_memory(src_desc.dtype, [N, M], src_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, N * M * 2)
    tma.async_gather(src_desc, idx, y_offset, bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    fence_async_shared()
    tma.async_scatter(dst_desc, out_idx, y_offset, smem)
    tma.store_wait(0)


def _descs(src, dst, M):
    return (TensorDescriptor.from_tensor(src, [1, M], LAYOUT),
            TensorDescriptor.from_tensor(dst, [1, M], LAYOUT))


def test_gather_then_scatter_moves_the_chosen_rows():
    rng = np.random.default_rng(0)
    src = rng.standard_normal((50, 160)).astype(np.float16)
    dst = np.zeros((40, 160), np.float16)
    idx = rng.permutation(50)[:16].astype(np.int32)
    idx[3] = 70  # outside the tensor: the gathered row reads zeros
    out_idx = rng.permutation(40)[:16].astype(np.int32)
    out_idx[5] = -2  # outside: that row is not written
    gather_scatter_kernel[(1,)](*_descs(src, dst, 128), idx, out_idx, 40, N=16, M=128)
    expected = np.zeros_like(dst)
    for i in range(16):
        if 0 <= out_idx[i] < 40:
            row = src[idx[i]] if idx[i] < 50 else np.zeros(160, np.float16)
            # columns 40..167 of the gathered row; 160.. are out of bounds (zero, not written)
            expected[out_idx[i], 40:160] = row[40:160]
    np.testing.assert_array_equal(dst, expected)


def _ptx():
    src = np.zeros((64, 256), np.float16)
    compiled = gluon.compile(gather_scatter_kernel,
                             {"src_desc": _descs(src, src, 128)[0],
                              "dst_desc": _descs(src, src, 128)[1], "idx_ptr": "*i32",
                              "out_idx_ptr": "*i32", "y_offset": "i32"},
                             {"N": 16, "M": 128}, target="sm_100a")
    return compiled


def test_one_message_per_four_rows_and_swizzle_chunk():
    compiled = _ptx()
    ptx = compiled.asm["ptx"]
    # 16 rows / 4 x 128 columns / 64 (one 128-byte swizzle row of fp16) = 8 of each
    gather = ("cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4."
              "mbarrier::complete_tx::bytes")
    scatter = "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group"
    assert ptx.count(gather) == 8 and ptx.count(scatter) == 8
    assert ptx.count("cp.async.bulk.commit_group") == 1
    assert ".version 8.6" in ptx or ".version 8.7" in ptx or ".version 8.8" in ptx
    assert len(compiled.asm["cubin"]) > 0


def test_errors_name_the_rule():
    src = np.zeros((64, 256), np.float16)
    with pytest.raises(gluon.CompilationError, match=r"tma\.async_gather: TMA gather4/scatter4 "
                       r"needs sm_100a \(Blackwell\), not sm_90a"):
        gluon.compile(gather_scatter_kernel,
                      {"src_desc": _descs(src, src, 128)[0], "dst_desc": _descs(src, src, 128)[1],
                       "idx_ptr": "*i32", "out_idx_ptr": "*i32", "y_offset": "i32"},
                      {"N": 16, "M": 128}, target="sm_90a")
    idx = np.zeros(6, np.int32)
    with pytest.raises(gluon.CompilationError, match=r"tma\.async_gather: the descriptor's "
                       r"block must be one row, \[1, M\], got \[2, 64\]"):
        gather_scatter_kernel[(1,)](TensorDescriptor.from_tensor(src, [2, 64], LAYOUT),
                                    TensorDescriptor.from_tensor(src, [2, 64], LAYOUT),
                                    idx, idx, 0, N=8, M=64)
