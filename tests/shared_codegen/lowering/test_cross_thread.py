"""Cross-thread lowering (reduce, scan, convert_layout, shape ops) compiled to PTX and cubin
for sm_90a: the PTX must show the data movement the layouts call for, and nothing more."""

import re

import pytest

from gluon.layouts import BlockedLayout, SliceLayout
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Function, Module
from shared_codegen.ir.types import (TensorType, bfloat16, float16, float32, float64, int8, int32,
                                     int64, pointer_type)
from shared_codegen.lowering.backend import llvm_to_ptx, ptx_to_cubin
from shared_codegen.ops.arith import definition as arith
from shared_codegen.ops.control.definition import YieldOp
from shared_codegen.ops.memory import definition as memory
from shared_codegen.ops.reduction import definition as reduction
from shared_codegen.ops.tensor import definition as tensor
from shared_codegen.stages import plan_and_lower as lower_module

TARGET = "sm_90a"


def blocked(spt, tpw, wpc, order):
    return BlockedLayout(list(spt), list(tpw), list(wpc), list(order))


class Kernel:
    """A kernel `k(x_ptr, out_ptr)` under construction, with 2-D load/store helpers."""

    def __init__(self, num_warps=4, dtype=float32):
        self.module = Module({"num_warps": num_warps, "threads_per_warp": 32,
                              "target": TARGET})
        ptr = pointer_type(dtype)
        self.fn = self.module.add(Function("k", [ptr, ptr], ["x_ptr", "out_ptr"],
                                           attrs={"kernel": True}))
        self.b = Builder(self.fn.body.block)
        self.x_ptr, self.out_ptr = self.fn.args

    def offsets(self, shape, layout):
        """Row-major element offsets of a 1-D or 2-D tensor in `layout`."""
        b = self.b
        if len(shape) == 1:
            return tensor.MakeRangeOp.build(b, 0, shape[0], layout)
        rows = tensor.MakeRangeOp.build(b, 0, shape[0], SliceLayout(1, layout))
        cols = tensor.MakeRangeOp.build(b, 0, shape[1], SliceLayout(0, layout))
        rows = tensor.ExpandDimsOp.build(b, rows, 1, layout)
        cols = tensor.ExpandDimsOp.build(b, cols, 0, layout)
        stride = tensor.SplatOp.build(b, arith.ConstantOp.build(b, shape[1], int32),
                                      (shape[0], 1), layout)
        rows = arith.BinaryOp.build(b, "arith.muli", rows, stride)
        rows = tensor.BroadcastOp.build(b, rows, shape)
        cols = tensor.BroadcastOp.build(b, cols, shape)
        return arith.BinaryOp.build(b, "arith.addi", rows, cols)

    def ptrs(self, base, shape, layout):
        b = self.b
        p = tensor.SplatOp.build(b, base, shape, layout)
        return arith.AddPtrOp.build(b, p, self.offsets(shape, layout))

    def load(self, shape, layout):
        return memory.LoadOp.build(self.b, self.ptrs(self.x_ptr, shape, layout))

    def store(self, value):
        ty = value.type
        if not isinstance(ty, TensorType):
            memory.StoreOp.build(self.b, self.out_ptr, value)
            return
        memory.StoreOp.build(self.b, self.ptrs(self.out_ptr, ty.shape, ty.layout), value)

    def reduce_sum(self, x, axis, result_layout, combine="arith.addf"):
        op = reduction.ReduceOp.build(self.b, [x], axis, result_layout)
        self._add_region(op, combine)
        return op.results[0]

    def scan_sum(self, x, axis, reverse=False):
        op = reduction.ScanOp.build(self.b, [x], axis, reverse)
        self._add_region(op)
        return op.results[0]

    def _add_region(self, op, combine="arith.addf"):
        block = op.regions[0].block
        with self.b.at_end_of(block):
            s = arith.BinaryOp.build(self.b, combine, block.args[0], block.args[1])
            YieldOp.build(self.b, [s], "tt.reduce.return")

    def compile(self):
        YieldOp.build(self.b, [], "tt.return")
        lowered = lower_module(self.module)
        ptx = llvm_to_ptx(lowered.llvm_ir, TARGET)
        ptx_to_cubin(ptx, TARGET)  # ptxas must accept it
        return lowered, ptx


def count(ptx, pattern):
    return len(re.findall(pattern, ptx))


ROW = blocked([1, 4], [1, 32], [1, 4], [1, 0])


def test_row_reduction_across_four_warps_uses_shuffles_then_shared_memory():
    k = Kernel()
    x = k.load((1, 1024), ROW)
    k.store(k.reduce_sum(x, 1, SliceLayout(1, ROW)))
    lowered, ptx = k.compile()
    assert count(ptx, r"shfl\.sync\.bfly") == 5          # 32 lanes along the row
    assert count(ptx, r"bar\.sync") == 2                 # scratch reuse + store->load
    assert "st.shared" in ptx and "ld.shared" in ptx
    assert lowered.shared_bytes >= 4 * 4


def test_reduction_inside_one_warp_uses_no_shared_memory():
    layout = blocked([1, 1], [4, 8], [4, 1], [1, 0])
    k = Kernel()
    x = k.load((16, 8), layout)
    k.store(k.reduce_sum(x, 1, SliceLayout(1, layout)))
    lowered, ptx = k.compile()
    assert count(ptx, r"shfl\.sync\.bfly") == 3
    assert not re.search(r"\b(st|ld)\.shared|bar\.sync", ptx)
    assert lowered.shared_bytes == 0


def test_scalar_reduction_of_1d_tensor():
    layout = blocked([4], [32], [4], [0])
    k = Kernel()
    x = k.load((2048,), layout)
    k.store(k.reduce_sum(x, 0, None))
    _, ptx = k.compile()
    # 5 butterflies across lanes, then each lane reads one warp's partial and 2 more
    # butterflies (4 warps) combine them: one shared load, no second round trip.
    assert count(ptx, r"shfl\.sync\.bfly") == 5 + 2 and "bar.sync" in ptx
    assert count(ptx, r"ld\.shared") == 1


def _convert_kernel(src, dst, shape=(32, 32)):
    k = Kernel()
    x = k.load(shape, src)
    k.store(tensor.ConvertLayoutOp.build(k.b, x, dst))
    return k.compile()


def test_convert_to_the_same_layout_emits_nothing():
    layout = blocked([1, 4], [2, 16], [4, 1], [1, 0])
    k = Kernel()
    k.store(k.load((32, 32), layout))
    _, plain = k.compile()
    _, converted = _convert_kernel(layout, layout)
    assert converted == plain


def test_transposing_convert_goes_through_shared_memory():
    src = blocked([1, 4], [1, 32], [4, 1], [1, 0])
    dst = blocked([4, 1], [32, 1], [1, 4], [0, 1])
    lowered, ptx = _convert_kernel(src, dst)
    assert "ld.shared" in ptx and count(ptx, r"bar\.sync") == 2
    # The planner's swizzle lets each thread store 4 consecutive elements at once.
    assert count(ptx, r"st\.shared\.v4\.b32") == 8
    assert lowered.shared_bytes == 32 * 32 * 4


def test_scan_uses_index_shuffles_and_shared_memory_across_warps():
    layout = blocked([2], [32], [4], [0])
    for reverse in (False, True):
        k = Kernel()
        x = k.load((256,), layout)
        k.store(k.scan_sum(x, 0, reverse))
        _, ptx = k.compile()
        assert "shfl.sync.idx" in ptx and "bar.sync" in ptx and "st.shared" in ptx


def test_scan_inside_a_warp_uses_no_shared_memory():
    layout = blocked([1, 4], [4, 8], [4, 1], [1, 0])
    k = Kernel()
    x = k.load((16, 32), layout)
    k.store(k.scan_sum(x, 1))
    _, ptx = k.compile()
    assert "shfl.sync.idx" in ptx
    assert not re.search(r"\b(st|ld)\.shared|bar\.sync", ptx)


@pytest.mark.parametrize("order,layout_t,smem", [
    ((1, 0), blocked([4, 1], [8, 4], [2, 2], [0, 1]), False),
    ((1, 0), blocked([1, 4], [4, 8], [2, 2], [1, 0]), True),
])
def test_trans_is_a_register_reindex_when_layouts_match(order, layout_t, smem):
    layout = blocked([1, 4], [4, 8], [2, 2], [1, 0])
    k = Kernel()
    x = k.load((32, 32), layout)
    k.store(tensor.TransOp.build(k.b, x, order, layout_t))
    _, ptx = k.compile()
    assert bool(re.search(r"\b(st|ld)\.shared", ptx)) == smem


@pytest.mark.parametrize("dtype,combine", [
    (float16, "arith.maxnumf"), (bfloat16, "arith.maxnumf"), (float64, "arith.addf"),
    (int64, "arith.addi"), (int8, "arith.maxsi"),
])
def test_other_element_types_shuffle_and_round_trip(dtype, combine):
    """Narrow types are widened for shfl.sync, 64-bit ones split in two; all go through
    shared memory at their own width."""
    src = blocked([1, 4], [1, 32], [4, 1], [1, 0])
    dst = blocked([4, 1], [32, 1], [1, 4], [0, 1])
    k = Kernel(dtype=dtype)
    x = k.load((32, 32), src)
    y = tensor.ConvertLayoutOp.build(k.b, x, dst)
    k.store(k.reduce_sum(y, 0, SliceLayout(0, dst), combine))
    _, ptx = k.compile()
    assert "shfl.sync.bfly" in ptx and "st.shared" in ptx and "ld.shared" in ptx
