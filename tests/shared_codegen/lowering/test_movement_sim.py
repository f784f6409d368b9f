"""The lowering of join, split, gather and histogram executed on the CPU by `xthread_sim`
(every thread of the CTA in lock step, shared memory race-checked) and compared with numpy,
for layouts that make them register renames and layouts that move data between threads."""

import numpy as np
import pytest
from xthread_sim import SimContext

from gluon.layouts import BlockedLayout, DistributedLinearLayout
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block
from shared_codegen.ir.types import TensorType, float16, float32, int1, int8, int32
from shared_codegen.layouts.relations import joined_layout, split_layout
from shared_codegen.ops.movement import definition as movement
from shared_codegen.ops.movement import lowering as rules


def _arg(ty):
    return Block([ty]).args[0]


def _data(shape, seed=0):
    return np.random.default_rng(seed).integers(-99, 99, size=shape).astype(np.float64)


B2 = BlockedLayout([1, 2], [4, 8], [2, 2], [1, 0])
B2T = BlockedLayout([2, 1], [8, 4], [2, 2], [0, 1])
B1 = BlockedLayout([1], [32], [4], [0])
# [64, 2] with the size-2 dim over lanes: join/split must move data or select per thread.
LANES_LAST = BlockedLayout([1, 1], [16, 2], [4, 1], [1, 0])


@pytest.mark.parametrize("dtype", [float32, int1, float16])
@pytest.mark.parametrize("layout,result_layout,shape,renames", [
    (B2, None, (16, 32), True),           # the inferred layout: a register rename
    (B2T, None, (16, 32), True),
    (B1, None, (64,), True),              # warps replicate the operands
    (B1, LANES_LAST, (64,), False),       # lanes walk the new dim: a select per thread
    (B2, BlockedLayout([1, 1, 2], [4, 8, 1], [1, 4, 1], [2, 1, 0]), (16, 32), False),
])
def test_join(layout, result_layout, shape, renames, dtype):
    b = Builder(Block())
    x, y = _arg(TensorType(shape, dtype, layout)), _arg(TensorType(shape, dtype, layout))
    result_layout = result_layout or joined_layout(layout, shape)
    op_result = movement.JoinOp.build(b, x, y, result_layout)
    sim = SimContext(4)
    dx, dy = _data(shape, 1), _data(shape, 2)
    if dtype == int1:
        dx, dy = dx > 0, dy > 0
    sim.bind(x, dx)
    sim.bind(y, dy)
    (out,) = rules.lower_join(op_result.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, op_result.type), np.stack([dx, dy], -1))
    assert (sim.barriers == 0) == renames


@pytest.mark.parametrize("layout,shape,renames", [
    (joined_layout(B2, (16, 32)), (16, 32, 2), True),
    (BlockedLayout([2, 2], [32, 1], [4, 1], [1, 0]), (256, 2), True),
    (LANES_LAST, (64, 2), False),
    (BlockedLayout([1, 2], [32, 1], [1, 4], [1, 0]), (32, 2), True),  # warps replicate
])
def test_split(layout, shape, renames):
    b = Builder(Block())
    x = _arg(TensorType(shape, float32, layout))
    half = split_layout(layout, shape) if renames else BlockedLayout([1], [32], [4], [0])
    lo, hi = movement.SplitOp.build(b, x, half)
    sim = SimContext(4)
    data = _data(shape, 3)
    sim.bind(x, data)
    out_lo, out_hi = rules.lower_split(lo.owner, sim)
    np.testing.assert_array_equal(sim.gather(out_lo, lo.type), data[..., 0])
    np.testing.assert_array_equal(sim.gather(out_hi, hi.type), data[..., 1])
    assert (sim.barriers == 0) == renames


@pytest.mark.parametrize("src_layout,idx_layout,src_shape,idx_shape,axis", [
    (B2, B2, (16, 32), (16, 32), 1),
    (B2, B2T, (16, 32), (64, 32), 0),
    (B2T, B2, (8, 32), (16, 32), 0),
    (B1, B1, (128,), (32,), 0),           # the index is replicated over warps
    (DistributedLinearLayout([[0, 1]], [[1, 0], [2, 0], [4, 0], [8, 0], [0, 2]],
                             [[0, 4], [0, 8]], [], [16, 16]), B2, (16, 16), (16, 64), 1),
])
def test_gather(src_layout, idx_layout, src_shape, idx_shape, axis):
    b = Builder(Block())
    src = _arg(TensorType(src_shape, float32, src_layout))
    index = _arg(TensorType(idx_shape, int32, idx_layout))
    res = movement.GatherOp.build(b, src, index, axis, idx_layout)
    sim = SimContext(4)
    data = _data(src_shape, 4)
    idx = np.random.default_rng(5).integers(0, src_shape[axis], idx_shape)
    sim.bind(src, data)
    sim.bind(index, idx.astype(np.float64))
    (out,) = rules.lower_gather(res.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, res.type), np.take_along_axis(data, idx, axis))


@pytest.mark.parametrize("layout,n,bins,bins_layout,masked,dtype", [
    (B1, 128, 16, B1, False, int32),
    (B1, 128, 256, B1, False, int8),      # every int8 value below num_bins: no upper test
    (B1, 128, 64, B1, True, int8),
    (BlockedLayout([4], [32], [4], [0]), 512, 64, BlockedLayout([2], [32], [4], [0]), True,
     int32),
    (B1, 32, 8, B1, True, int32),         # input and bins replicated over lanes and warps
    (BlockedLayout([2], [32], [4], [0]), 64, 256, B1, False, int32),
])
def test_histogram(layout, n, bins, bins_layout, masked, dtype):
    b = Builder(Block())
    x = _arg(TensorType((n,), dtype, layout))
    mask = _arg(TensorType((n,), int1, layout)) if masked else None
    res = movement.HistogramOp.build(b, x, bins, mask, bins_layout)
    sim = SimContext(4)
    values = np.random.default_rng(6).integers(-3, min(bins + 3, 128 if dtype == int8 else 1e9), n)
    keep = np.random.default_rng(7).random(n) < 0.7 if masked else np.ones(n, bool)
    sim.bind(x, values.astype(np.float64))
    if masked:
        sim.bind(mask, keep)
    (out,) = rules.lower_histogram(res.owner, sim)
    valid = keep & (values >= 0) & (values < bins)
    np.testing.assert_array_equal(sim.gather(out, res.type),
                                  np.bincount(values[valid], minlength=bins))


ROWS_IN_WARPS = BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])


@pytest.mark.parametrize("src_layout,src_shape,idx_layout,idx_shape,axis,shuffles", [
    # The axis in lanes: one shuffle per result element.
    (ROWS_IN_WARPS, (4, 32), BlockedLayout([1, 2], [1, 32], [4, 1], [1, 0]), (4, 64), 1, True),
    # The axis also in registers: 2 and 4 candidate registers, picked by the index bits.
    (BlockedLayout([1, 2], [1, 32], [4, 1], [1, 0]), (4, 64), ROWS_IN_WARPS, (4, 16), 1, True),
    (BlockedLayout([1, 4], [1, 32], [4, 1], [1, 0]), (4, 128), ROWS_IN_WARPS, (4, 32), 1, True),
    # The result's warps hold rows the source keeps in other warps.
    (BlockedLayout([2, 1], [1, 32], [2, 1], [1, 0]), (8, 32), ROWS_IN_WARPS, (8, 64), 1, False),
    # 8 candidates: shared memory is cheaper.
    (BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0]), (4, 256), ROWS_IN_WARPS, (4, 32), 1, False),
    # The axis crosses warps.
    (BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1]), (128, 4), ROWS_IN_WARPS, (4, 4), 0, False),
])
def test_warp_local_gather_uses_shuffles(src_layout, src_shape, idx_layout, idx_shape, axis,
                                         shuffles):
    b = Builder(Block())
    src = _arg(TensorType(src_shape, float32, src_layout))
    index = _arg(TensorType(idx_shape, int32, idx_layout))
    res = movement.GatherOp.build(b, src, index, axis, idx_layout)
    sim = SimContext(4)
    data = _data(src_shape, 8)
    idx = np.random.default_rng(9).integers(0, src_shape[axis], idx_shape)
    sim.bind(src, data)
    sim.bind(index, idx.astype(np.float64))
    (out,) = rules.lower_gather(res.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, res.type), np.take_along_axis(data, idx, axis))
    assert (sim.shuffles > 0 and sim.barriers == 0) == shuffles
