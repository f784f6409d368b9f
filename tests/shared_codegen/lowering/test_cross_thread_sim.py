"""Data movement of the cross-thread rules, executed on the CPU by `xthread_sim` (every thread
of the CTA in lock step, shared memory race-checked) and compared with numpy."""

import numpy as np
import pytest
from xthread_sim import SimContext, SimError

from gluon.layouts import BlockedLayout, SliceLayout
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block
from shared_codegen.ir.types import TensorType, float32, int32
from shared_codegen.lowering import cross_thread as xt
from shared_codegen.ops.reduction import definition as reduction
from shared_codegen.ops.reduction import lowering as reduce_rules
from shared_codegen.ops.reduction.scan_lowering import lower_scan
from shared_codegen.ops.tensor import definition as tensor  # noqa: F401 - registers the ops
from shared_codegen.ops.tensor import lowering as tensor_rules


def _add(a, b):
    return [x + y for x, y in zip(a, b)]


def _argmax(a, b):
    """(value, index) pairs: the larger value, the smaller index on ties (commutative)."""
    av, ai = a
    bv, bi = b
    take_b = (bv > av) | ((bv == av) & (bi < ai))
    return [np.where(take_b, bv, av), np.where(take_b, bi, ai)]


def _builder():
    return Builder(Block())


def _arg(ty):
    return Block([ty]).args[0]


def _data(shape, seed=0):
    return np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float64)


def _blocked(spt, tpw, wpc, order):
    return BlockedLayout(list(spt), list(tpw), list(wpc), list(order))


REDUCE_CASES = [
    # shape, layout, axis, num_warps
    ((1, 1024), _blocked([1, 4], [1, 32], [1, 4], [1, 0]), 1, 4),     # lanes + warps on axis
    ((16, 8), _blocked([1, 1], [4, 8], [4, 1], [1, 0]), 1, 4),        # inside one warp
    ((16, 8), _blocked([1, 1], [4, 8], [4, 1], [1, 0]), 0, 4),        # across warps
    ((64, 64), _blocked([2, 2], [8, 4], [2, 2], [0, 1]), 0, 4),
    ((64, 64), _blocked([2, 2], [8, 4], [2, 2], [0, 1]), 1, 4),
    ((4, 4), _blocked([1, 1], [8, 4], [2, 2], [1, 0]), 0, 4),         # lanes/warps broadcast
    ((256,), _blocked([2], [32], [4], [0]), 0, 4),                    # scalar result
    ((32,), _blocked([1], [32], [4], [0]), 0, 4),                     # warps replicate
]


@pytest.mark.parametrize("shape,layout,axis,num_warps", REDUCE_CASES)
def test_reduce_matches_numpy(shape, layout, axis, num_warps):
    b = _builder()
    x = _arg(TensorType(shape, float32, layout))
    res_layout = SliceLayout(axis, layout) if len(shape) > 1 else None
    op = reduction.ReduceOp.build(b, [x], axis, res_layout)
    sim = SimContext(num_warps, combine=_add)
    data = _data(shape)
    sim.bind(x, data)
    (out,) = reduce_rules.lower_reduce(op, sim)
    got = sim.gather(out, op.results[0].type)
    np.testing.assert_array_equal(got, data.sum(axis=axis))


def test_reduce_two_operands_argmax():
    layout = _blocked([1, 2], [2, 16], [1, 4], [1, 0])
    shape = (4, 256)
    b = _builder()
    x = _arg(TensorType(shape, float32, layout))
    i = _arg(TensorType(shape, int32, layout))
    op = reduction.ReduceOp.build(b, [x, i], 1, SliceLayout(1, layout))
    sim = SimContext(4, combine=_argmax)
    data = _data(shape, seed=3)
    sim.bind(x, data)
    sim.bind(i, np.broadcast_to(np.arange(256), shape))
    vals, idxs = reduce_rules.lower_reduce(op, sim)
    np.testing.assert_array_equal(sim.gather(vals, op.results[0].type), data.max(axis=1))
    np.testing.assert_array_equal(sim.gather(idxs, op.results[1].type), data.argmax(axis=1))


def test_reduce_inside_a_warp_touches_no_shared_memory():
    layout = _blocked([1, 1], [4, 8], [4, 1], [1, 0])
    b = _builder()
    x = _arg(TensorType((16, 8), float32, layout))
    op = reduction.ReduceOp.build(b, [x], 1, SliceLayout(1, layout))
    sim = SimContext(4, combine=_add)
    sim.bind(x, _data((16, 8)))
    reduce_rules.lower_reduce(op, sim)
    assert sim.barriers == 0 and sim.shared_bytes == 0 and sim.shuffles == 3


SCAN_CASES = [
    ((256,), _blocked([2], [32], [4], [0]), 0),
    ((1024,), _blocked([2], [32], [4], [0]), 0),                      # repetitions
    ((16, 64), _blocked([1, 4], [4, 8], [2, 2], [1, 0]), 1),
    ((64, 16), _blocked([1, 4], [4, 8], [2, 2], [1, 0]), 0),
    ((8, 16), _blocked([2, 1], [2, 16], [4, 1], [0, 1]), 0),          # lane bits not lowest
    ((4, 4), _blocked([1, 1], [8, 4], [2, 2], [1, 0]), 1),            # broadcast lanes/warps
]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,layout,axis", SCAN_CASES)
def test_scan_matches_numpy(shape, layout, axis, reverse):
    b = _builder()
    x = _arg(TensorType(shape, float32, layout))
    op = reduction.ScanOp.build(b, [x], axis, reverse)
    sim = SimContext(4, combine=_add)
    data = _data(shape, seed=1)
    sim.bind(x, data)
    (out,) = lower_scan(op, sim)
    if reverse:
        want = np.flip(np.cumsum(np.flip(data, axis), axis=axis), axis)
    else:
        want = np.cumsum(data, axis=axis)
    np.testing.assert_array_equal(sim.gather(out, op.results[0].type), want)


CONVERT_CASES = [
    (_blocked([1, 4], [1, 32], [4, 1], [1, 0]), _blocked([4, 1], [32, 1], [1, 4], [0, 1])),
    (_blocked([1, 1], [4, 8], [4, 1], [1, 0]), _blocked([1, 1], [8, 4], [2, 2], [0, 1])),
    (_blocked([2, 2], [8, 4], [2, 2], [0, 1]), _blocked([1, 1], [1, 32], [4, 1], [1, 0])),
]


@pytest.mark.parametrize("src,dst", CONVERT_CASES)
@pytest.mark.parametrize("shape", [(32, 32), (64, 16), (4, 8)])
def test_convert_layout_moves_every_element(src, dst, shape):
    b = _builder()
    x = _arg(TensorType(shape, float32, src))
    y = tensor.ConvertLayoutOp.build(b, x, dst)
    sim = SimContext(4)
    data = _data(shape, seed=2)
    sim.bind(x, data)
    (out,) = tensor_rules.lower_convert_layout(y.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, y.type), data)


def test_convert_to_same_layout_emits_nothing():
    layout = _blocked([1, 4], [1, 32], [4, 1], [1, 0])
    b = _builder()
    x = _arg(TensorType((32, 32), float32, layout))
    y = tensor.ConvertLayoutOp.build(b, x, layout)
    sim = SimContext(4)
    regs = sim.bind(x, _data((32, 32)))
    (out,) = tensor_rules.lower_convert_layout(y.owner, sim)
    assert out == regs and sim.barriers == 0 and sim.shuffles == 0


def test_missing_barrier_is_reported():
    sim = SimContext(1)
    base = sim.request_shared(128)
    lane = sim.lane_id()
    b = sim.builder
    b.store(lane, b.gep(base, [lane], source_etype=xt.I32))
    with pytest.raises(SimError, match="without a barrier"):
        b.load(b.gep(base, [b.xor(lane, xt._i32(1))], source_etype=xt.I32), typ=xt.I32)


def _shape_op_case(name):
    blk = _blocked([1, 4], [4, 8], [2, 2], [1, 0])
    b = _builder()
    if name == "broadcast":
        x = _arg(TensorType((16, 1), float32, blk))
        y = tensor.BroadcastOp.build(b, x, (16, 32))
        return x, y, lambda d: np.broadcast_to(d, (16, 32))
    if name == "broadcast_other_layout":
        x = _arg(TensorType((1, 32), float32, _blocked([1, 1], [1, 32], [4, 1], [1, 0])))
        y = b.create("tt.broadcast", [x], [TensorType((16, 32), float32, blk)]).result
        return x, y, lambda d: np.broadcast_to(d, (16, 32))
    if name == "expand_dims":
        x = _arg(TensorType((32,), float32, SliceLayout(0, blk)))
        y = tensor.ExpandDimsOp.build(b, x, 0, blk)
        return x, y, lambda d: d[None, :]
    if name == "trans":
        x = _arg(TensorType((16, 32), float32, blk))
        t_layout = _blocked([4, 1], [8, 4], [2, 2], [0, 1])
        y = tensor.TransOp.build(b, x, (1, 0), t_layout)
        return x, y, lambda d: d.T
    if name == "trans_through_smem":
        x = _arg(TensorType((16, 32), float32, blk))
        y = tensor.TransOp.build(b, x, (1, 0), blk)
        return x, y, lambda d: d.T
    if name == "reshape":
        x = _arg(TensorType((16, 32), float32, blk))
        y = tensor.ReshapeOp.build(b, x, (8, 64), layout=blk)
        return x, y, lambda d: d.reshape(8, 64)
    raise KeyError(name)


SHAPE_RULES = {"broadcast": tensor_rules.lower_broadcast, "broadcast_other_layout": tensor_rules.lower_broadcast,
               "expand_dims": tensor_rules.lower_expand_dims, "trans": tensor_rules.lower_trans,
               "trans_through_smem": tensor_rules.lower_trans, "reshape": tensor_rules.lower_reshape}


@pytest.mark.parametrize("name", sorted(SHAPE_RULES))
def test_shape_ops(name):
    x, y, ref = _shape_op_case(name)
    sim = SimContext(4)
    data = _data(x.type.shape, seed=4)
    sim.bind(x, data)
    (out,) = SHAPE_RULES[name](y.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, y.type), ref(data))
    in_registers = name in ("broadcast", "expand_dims", "trans")
    assert (sim.barriers == 0) == in_registers


def test_make_range():
    layout = SliceLayout(0, _blocked([1, 4], [4, 8], [2, 2], [1, 0]))
    b = _builder()
    r = tensor.MakeRangeOp.build(b, 16, 80, layout)
    sim = SimContext(4)
    (out,) = tensor_rules.lower_make_range(r.owner, sim)
    np.testing.assert_array_equal(sim.gather(out, r.type), np.arange(16, 80))
