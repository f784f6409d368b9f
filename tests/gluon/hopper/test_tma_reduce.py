"""`tma.async_atomic_add` / `_min` / `_max` / `_and` / `_or` / `_xor` (newer Gluon's names for
`cp.reduce.async.bulk.tensor`): several programs combining into one block in the interpreter,
against numpy; the PTX for sm_90a; and the errors for element types a reduction does not
take."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, tma
from gluon.nvidia.hopper import TensorDescriptor


@gluon.jit
def reduce_rows_kernel(x_ptr, out_desc, KIND: gl.constexpr, M0=0):
    """Program p combines rows [p * BM, p * BM + BM) of x into out's block at (M0, 0)."""
    BM: gl.constexpr = out_desc.block_type.shape[0]
    BN: gl.constexpr = out_desc.block_type.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.program_id(0) * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    x = gl.load(x_ptr + gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0))
    smem = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_shape, out_desc.layout)
    smem.store(x)
    fence_async_shared()
    if KIND == "add":
        tma.async_atomic_add(out_desc, [M0, 0], smem)
    elif KIND == "min":
        tma.async_atomic_min(out_desc, [M0, 0], smem)
    elif KIND == "max":
        tma.async_atomic_max(out_desc, [M0, 0], smem)
    elif KIND == "and":
        tma.async_atomic_and(out_desc, [M0, 0], smem)
    elif KIND == "or":
        tma.async_atomic_or(out_desc, [M0, 0], smem)
    else:
        tma.async_atomic_xor(out_desc, [M0, 0], smem)
    tma.store_wait(0)


def _desc(out, block, bits):
    return TensorDescriptor.from_tensor(out, block, gl.NVMMASharedLayout(0, bits, rank=2))


@pytest.mark.parametrize("kind, dtype", [("add", np.float32), ("min", np.int32),
                                         ("max", np.float16), ("and", np.int32),
                                         ("or", np.int32), ("xor", np.int32)])
def test_programs_combine_into_one_block(kind, dtype):
    rng = np.random.default_rng(3)
    n_prog, bm, bn = 3, 16, 32
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(0, 1 << 20, size=(n_prog * bm, bn)).astype(dtype)
        start = rng.integers(0, 1 << 20, size=(bm, bn)).astype(dtype)
    else:
        x = (rng.integers(-64, 64, size=(n_prog * bm, bn)) / 4).astype(dtype)
        start = (rng.integers(-64, 64, size=(bm, bn)) / 4).astype(dtype)
    out = start.copy()
    bits = np.dtype(dtype).itemsize * 8
    reduce_rows_kernel[(n_prog,)](x, _desc(out, [bm, bn], bits), kind, num_warps=4)
    combine = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
               "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
    want = start.copy()
    for p in range(n_prog):
        want = combine(want, x[p * bm:(p + 1) * bm])
    np.testing.assert_array_equal(out, want)


def test_a_reduction_before_row_zero_is_reported():
    # cp.reduce.async.bulk.tensor at a negative row: an illegal instruction on the H100
    # (benchmarks/tma_negative_probe.py, 2026-12-07), as a store there is.
    out = np.zeros((16, 32), np.float32)
    with pytest.raises(Exception, match=r"TMA reduction at coordinates \[-8, 0\]: coordinate 0 "
                                        r"is negative; the GPU raises an illegal instruction"):
        reduce_rows_kernel[(1,)](np.ones((16, 32), np.float32), _desc(out, [16, 32], 32),
                                 "add", -8, num_warps=4)
    assert not out.any()


def test_the_add_compiles_to_one_bulk_reduce_per_box():
    out = np.zeros((16, 64), np.float32)
    ptx = gluon.compile(reduce_rows_kernel,
                        {"x_ptr": "*fp32:16", "M0": "i32",
                         "out_desc": TensorDescriptor.from_tensor(
                             out, [16, 64], gl.NVMMASharedLayout(32, 32, rank=2))},
                        {"KIND": "add"}, target="sm_90a", num_warps=4).asm["ptx"]
    # 32-byte swizzle: boxes of 8 fp32 columns, one reduce each, one bulk group.
    assert ptx.count("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile."
                     "bulk_group") == 8
    assert ptx.count("cp.async.bulk.commit_group") == 1
    assert "cp.async.bulk.wait_group.read 0" in ptx
    assert "fence.proxy.async.shared::cta" in ptx


def test_a_reduction_the_element_type_lacks_is_refused():
    out = np.zeros((16, 32), np.float32)
    with pytest.raises(Exception, match=r"tma\.async_atomic_and: the descriptor's element "
                                        r"type is fp32; cp\.reduce\.async\.bulk\.tensor "
                                        r"\.and takes u32, i32, u64, i64"):
        reduce_rows_kernel[(1,)](np.zeros((16, 32), np.float32), _desc(out, [16, 32], 32),
                                 "and", num_warps=4)
