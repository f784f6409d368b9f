"""claim_scratch (shared_codegen/lowering/scratch.py): exchanges lowered one after another in
straight-line code take bytes past those an earlier exchange may still read instead of a
barrier, and the race-checking simulator (tests/xthread_sim.py) agrees that nothing races."""

import numpy as np
import pytest
from xthread_sim import SimContext, SimError

from gluon.layouts import BlockedLayout, SliceLayout
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block
from shared_codegen.ir.types import TensorType, float32
from shared_codegen.lowering import scratch
from shared_codegen.ops.reduction import definition as reduction
from shared_codegen.ops.reduction import lowering as reduce_rules
from shared_codegen.ops.tensor import definition as tensor
from shared_codegen.ops.tensor import lowering as tensor_rules

SHAPE = (16, 16)
ROWS = BlockedLayout([1, 1], [8, 4], [1, 4], [1, 0])  # warps split the columns
COLS = BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])  # warps split the rows


def _reduce_convert_reduce(sim):
    """Row sums across the warps, a conversion of the input, column sums of the result:
    three exchanges in a row, the way a loop body reduces and converts each tile."""
    x = Block([TensorType(SHAPE, float32, ROWS)]).args[0]
    b = Builder(Block())
    first = reduction.ReduceOp.build(b, [x], 1, SliceLayout(1, ROWS))
    y = tensor.ConvertLayoutOp.build(b, x, COLS)
    second = reduction.ReduceOp.build(b, [y], 0, SliceLayout(0, COLS))
    data = np.random.default_rng(3).integers(-8, 9, size=SHAPE).astype(np.float64)
    sim.bind(x, data)
    (row_sums,) = reduce_rules.lower_reduce(first, sim)
    sim.end_op()
    (converted,) = tensor_rules.lower_convert_layout(y.owner, sim)
    sim.end_op()
    sim.bind(y, sim.gather(converted, y.type))
    (col_sums,) = reduce_rules.lower_reduce(second, sim)
    sim.end_op()
    np.testing.assert_array_equal(sim.gather(row_sums, first.results[0].type), data.sum(1))
    np.testing.assert_array_equal(sim.gather(col_sums, second.results[0].type), data.sum(0))


def test_exchanges_in_a_row_need_only_their_own_barriers():
    sim = SimContext(4, combine=lambda a, b: [a[0] + b[0]])
    _reduce_convert_reduce(sim)
    # One barrier before the first exchange (nothing is known before it), then only the one
    # between each exchange's writes and reads: 4, where a barrier before each made 6.
    assert sim.barriers == 4
    # Each later exchange went past the bytes the one before it may still be reading.
    offsets = [lo for lo, _, _ in sim.scratch_claims.reads]
    assert offsets[0] > 0 and offsets[0] % scratch.ALIGN == 0


def test_no_room_past_the_reads_takes_a_barrier(monkeypatch):
    monkeypatch.setattr(scratch, "SPREAD_BYTES", 0)
    sim = SimContext(4, combine=lambda a, b: [a[0] + b[0]])
    _reduce_convert_reduce(sim)
    assert sim.barriers == 6 and all(lo == 0 for lo, _, _ in sim.scratch_claims.reads)


def test_the_simulator_sees_the_race_a_skipped_barrier_would_make(monkeypatch):
    # Same bytes, no barrier: the conversion's writes race with the row sums' reads.
    monkeypatch.setattr(scratch, "SPREAD_BYTES", 0)
    real_barrier = SimContext.barrier
    skipped = []

    def barrier_unless_leading(self):
        if self.barriers == 2 and not skipped:  # the conversion's leading barrier
            skipped.append(True)
            return
        real_barrier(self)

    monkeypatch.setattr(SimContext, "barrier", barrier_unless_leading)
    with pytest.raises(SimError, match="read since the last barrier"):
        _reduce_convert_reduce(SimContext(4, combine=lambda a, b: [a[0] + b[0]]))
