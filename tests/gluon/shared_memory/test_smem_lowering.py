"""Lowering of shared-memory descriptors: the emitted loads and stores executed for every
thread by `xthread_sim` (race-checked, compared with numpy and with the interpreter's byte
placement), PTX that must use vector accesses and barriers, and the shared-memory size."""

import re

import numpy as np
import pytest
from llvmlite import ir
from smem_kernels import Kernel, blocked, compile_ptx, interpret
from xthread_sim import SimContext, SimError

from gluon.layouts import BlockedLayout, NVMMASharedLayout, SwizzledSharedLayout
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block
from shared_codegen.ir.types import SharedMemoryType, TensorType, float16, float32, int8, int32
from shared_codegen.ops.shared_memory import lowering as rules
from shared_codegen.ops.shared_memory.definition import (LocalLoadOp, LocalStoreOp, MemDescIndexOp,
                                                         MemDescSubsliceOp, MemDescTransOp,
                                                         offset_map)


class SmemSim(SimContext):
    """SimContext plus what the shared-memory rules read from a LoweringContext."""

    def __init__(self, num_warps, offsets, nbytes):
        super().__init__(num_warps)
        self.builder.block = "body"
        self.entry_builder = self.builder
        self.shared_offsets = offsets
        self.shared_aliases = {}
        self.static_shared_bytes = self.shared_bytes = nbytes
        self.barrier_count, self.barrier_block = 0, None
        self.shared_access_state, self.mbarrier_words_settled = None, False

    def i32(self, v):
        return ir.Constant(ir.IntType(32), v)

    def barrier(self):
        super().barrier()
        self.barrier_count += 1
        self.barrier_block = self.builder.block


def _value(ty):
    return Block([ty]).args[0]


def _sim_round_trip(layout, shape, src, dst, elem=float16, view=None):
    """Store data (registers in `src`) into an allocation, optionally take a view, load it in
    `dst`; returns (data, loaded, sim, alloc op)."""
    b = Builder(Block())
    mem_ty = SharedMemoryType(tuple(shape), elem, layout, tuple(shape))
    alloc = b.create("ttg.local_alloc", [], [mem_ty])
    x = _value(TensorType(tuple(shape), elem, src))
    store = LocalStoreOp.build(b, x, alloc.result)
    target = alloc.result if view is None else view(b, alloc.result)
    load = LocalLoadOp.build(b, target, dst).owner
    nbytes = offset_map(mem_ty).alloc_elems * elem.itemsize
    sim = SmemSim(4, {alloc: 0}, nbytes)
    data = np.random.default_rng(1).integers(-100, 100, size=shape).astype(np.float64)
    sim.bind(x, data)
    sim.set(alloc.result, rules.lower_local_alloc(alloc, sim)[0])
    rules.lower_local_store(store, sim)
    for op in b.block.ops[2:-1]:  # the view ops between the store and the load
        if op.name == "arith.constant":
            sim.set(op.result, sim.i32(op.attrs["value"]))
        elif op.name == "ttg.memdesc_trans":
            sim.set(op.result, sim.get(op.operands[0]))
        else:
            sim.set(op.result, op.opdef.lower(op, sim)[0])
    loaded = sim.gather(rules.lower_local_load(load, sim)[0], load.result.type)
    return data, loaded, sim, alloc


SRC = BlockedLayout((1, 8), (4, 8), (4, 1), (1, 0))
DST = BlockedLayout((1, 1), (32, 1), (1, 4), (0, 1))
LAYOUTS = [NVMMASharedLayout(128, 16), NVMMASharedLayout(64, 16), NVMMASharedLayout(0, 16),
           NVMMASharedLayout(128, 16, transposed=True), SwizzledSharedLayout(8, 1, 8, (1, 0)),
           SwizzledSharedLayout(1, 1, 1, (0, 1))]


@pytest.mark.parametrize("layout", LAYOUTS, ids=repr)
def test_lowered_round_trip_matches_numpy_and_the_interpreters_bytes(layout):
    data, loaded, sim, alloc = _sim_round_trip(layout, (64, 64), SRC, DST)
    np.testing.assert_array_equal(loaded, data)
    assert sim.barriers == 1  # store -> load of one buffer in straight-line code
    offsets = 2 * offset_map(alloc.result.type).element_offsets()
    for (r, c), off in np.ndenumerate(offsets):
        assert sim._smem[int(off)][0] == data[r, c]


def test_lowered_views_index_subslice_and_transpose():
    layout = NVMMASharedLayout(128, 16)

    def index_then_columns(b, mem):
        one = MemDescIndexOp.build(b, mem, b.create("arith.constant", [], [int32],
                                                    {"value": 1}).result)
        return MemDescSubsliceOp.build(b, one, [0, 32], [32, 32])

    dst = BlockedLayout((1, 4), (8, 4), (4, 1), (1, 0))
    data, loaded, _, _ = _sim_round_trip(layout, (2, 32, 64),
                                         BlockedLayout((1, 1, 8), (1, 4, 8), (2, 2, 1),
                                                       (2, 1, 0)), dst, view=index_then_columns)
    np.testing.assert_array_equal(loaded, data[1, :, 32:])

    def transposed(b, mem):
        return MemDescTransOp.build(b, mem, [1, 0])

    data, loaded, _, _ = _sim_round_trip(layout, (64, 64), SRC, SRC, view=transposed)
    np.testing.assert_array_equal(loaded, data.T)


def test_missing_barrier_would_be_a_race():
    # The simulator's race check is what makes the barrier test meaningful.
    b = Builder(Block())
    ty = SharedMemoryType((64, 64), float16, NVMMASharedLayout(128, 16), (64, 64))
    alloc = b.create("ttg.local_alloc", [], [ty])
    x = _value(TensorType((64, 64), float16, SRC))
    store = LocalStoreOp.build(b, x, alloc.result)
    load = LocalLoadOp.build(b, alloc.result, DST).owner
    sim = SmemSim(4, {alloc: 0}, 8192)
    sim.bind(x, np.ones((64, 64)))
    sim.set(alloc.result, rules.lower_local_alloc(alloc, sim)[0])
    rules.lower_local_store(store, sim)
    sim.barrier_block = sim.builder.block  # pretend a barrier was emitted: none is added
    sim.barrier_count += 1
    with pytest.raises(SimError, match="without a barrier"):
        rules.lower_local_load(load, sim)


# ---- PTX ---------------------------------------------------------------------------------

def _round_trip_module(layout, shape=(64, 64), elem=float16, src=None, dst=None):
    k = Kernel("round_trip", [elem, elem])
    x = k.load(0, shape, src or blocked(shape, 8))
    mem = k.alloc(elem, shape, layout)
    LocalStoreOp.build(k.b, x, mem)
    k.store(1, LocalLoadOp.build(k.b, mem, dst or blocked(shape, 8)))
    return k.finish()


@pytest.mark.parametrize("layout", [SwizzledSharedLayout(1, 1, 1, (1, 0)),
                                    NVMMASharedLayout(128, 16)], ids=repr)
def test_contiguous_registers_use_16_byte_shared_accesses(layout):
    kernel, ptx = compile_ptx(_round_trip_module(layout), targets=("sm_90a", "sm_100a"))
    for text in ptx.values():
        assert re.search(r"st\.shared\.v4\.b32", text)
        assert re.search(r"ld\.shared\.v4\.b32", text)
        assert not re.search(r"st\.shared\.(b16|u16)", text)
        store_at = text.index("st.shared.v4")
        load_at = text.index("ld.shared.v4")
        assert "bar.sync" in text[store_at:load_at]
    assert kernel.shared_bytes == 64 * 64 * 2


def test_kernels_over_48_kb_report_their_shared_memory():
    shape = (128, 128)
    module = _round_trip_module(NVMMASharedLayout(128, 32), shape, float32,
                                blocked(shape, 4), blocked(shape, 4))
    kernel, _ = compile_ptx(module)
    assert kernel.shared_bytes >= 65536


def test_swizzled_round_trip_compiles_and_interprets():
    module = _round_trip_module(NVMMASharedLayout(64, 16), dst=blocked((64, 64), 1,
                                                                       order=(0, 1)))
    a = np.arange(64 * 64, dtype=np.float16).reshape(64, 64)
    out = np.zeros_like(a)
    interpret(module, a, out)
    np.testing.assert_array_equal(out, a)
    compile_ptx(module, targets=("sm_90a", "sm_100a"))


def test_int8_three_stage_buffer_compiles():
    k = Kernel("stages", [int8, int8])
    mem = k.alloc(int8, (3, 64, 64), NVMMASharedLayout(64, 8))
    x = k.load(0, (64, 64), blocked((64, 64), 16))
    for i in range(3):
        LocalStoreOp.build(k.b, x, MemDescIndexOp.build(k.b, mem, k.i32(i)))
    k.store(1, LocalLoadOp.build(k.b, MemDescIndexOp.build(k.b, mem, k.i32(2)),
                                 blocked((64, 64), 16)))
    module = k.finish()
    kernel, ptx = compile_ptx(module)
    assert kernel.shared_bytes == 3 * 64 * 64
    assert re.search(r"st\.shared\.v4\.b32", ptx["sm_90a"])
    a = np.arange(64 * 64).astype(np.int8).reshape(64, 64)
    out = np.zeros_like(a)
    interpret(module, a, out)
    np.testing.assert_array_equal(out, a)
