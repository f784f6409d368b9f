"""Hand-built explicit-layout kernels for the mma_v2 / dot_fma / cp.async tests, and helpers
to interpret them on numpy arrays and compile them to PTX and cubin."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gluon.layouts import SliceLayout
from shared_codegen.interpreter.memory import Memory
from shared_codegen.interpreter.run import run_kernel
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Function, Location, Module
from shared_codegen.ops.arith.definition import AddPtrOp, BinaryOp, ConstantOp
from shared_codegen.ops.control.definition import YieldOp
from shared_codegen.ops.memory.definition import LoadOp, StoreOp
from shared_codegen.ops.tensor.definition import BroadcastOp, ExpandDimsOp, MakeRangeOp, SplatOp
from shared_codegen.ir.types import TensorType, int32, pointer_type
from shared_codegen.ir.verifier import verify_module
from shared_codegen.lowering.backend import llvm_to_ptx, ptx_to_cubin
from shared_codegen.stages import plan_and_lower as lower_module


class Kernel:
    """A module with one kernel of pointer arguments; build its body through `self.b`."""

    def __init__(self, name, elems, num_warps=4, target="sm_90a"):
        self.module = Module({"num_warps": num_warps, "threads_per_warp": 32,
                              "target": target})
        names = [f"p{i}" for i in range(len(elems))]
        self.fn = self.module.add(Function(
            name, [pointer_type(e) for e in elems], names,
            attrs={"kernel": True, "arg_divisibility": {i: 16 for i in range(len(elems))}}))
        self.b = Builder(self.fn.body.block)
        self.args = self.fn.args

    def at_line(self, line, text=""):
        self.b.loc = Location("kernel.py", line, 0, text, self.fn.name)

    def offsets_2d(self, shape, layout, row_stride):
        """The i32 tensor row * row_stride + col of `shape` in `layout`."""
        rows = MakeRangeOp.build(self.b, 0, shape[0], SliceLayout(1, layout))
        cols = MakeRangeOp.build(self.b, 0, shape[1], SliceLayout(0, layout))
        rows = ExpandDimsOp.build(self.b, rows, 1, layout)
        cols = ExpandDimsOp.build(self.b, cols, 0, layout)
        stride = SplatOp.build(self.b, ConstantOp.build(self.b, row_stride, int32),
                               (shape[0], 1), layout)
        rows = BinaryOp.build(self.b, "arith.muli", rows, stride)
        rows = BroadcastOp.build(self.b, rows, shape)
        cols = BroadcastOp.build(self.b, cols, shape)
        return BinaryOp.build(self.b, "arith.addi", rows, cols)

    def ptrs_2d(self, base, shape, layout, row_stride=None):
        offs = self.offsets_2d(shape, layout, shape[1] if row_stride is None else row_stride)
        return AddPtrOp.build(self.b, SplatOp.build(self.b, base, shape, layout), offs)

    def load_2d(self, base, shape, layout):
        return LoadOp.build(self.b, self.ptrs_2d(base, shape, layout))

    def store_2d(self, base, value):
        StoreOp.build(self.b, self.ptrs_2d(base, value.type.shape, value.type.layout), value)

    def finish(self):
        YieldOp.build(self.b, [], "tt.return")
        verify_module(self.module)
        return self.module


def matmul_kernel(op_build, a_elem, acc_elem, mnk, a_layout, b_layout, acc_layout,
                  num_warps=4, **attrs):
    """out = acc + a @ b with one product op, operands loaded in their own layouts."""
    m, n, k = mnk
    kb = Kernel("matmul", [a_elem, a_elem, acc_elem, acc_elem], num_warps)
    a = kb.load_2d(kb.args[0], (m, k), a_layout)
    b = kb.load_2d(kb.args[1], (k, n), b_layout)
    acc = kb.load_2d(kb.args[2], (m, n), acc_layout)
    out = op_build(kb.b, a, b, acc, **attrs)
    kb.store_2d(kb.args[3], out)
    return kb.finish()


def interpret(module, *arrays, grid=(1, 1, 1)):
    memory = Memory()
    addrs = [memory.map(f"p{i}", arr) for i, arr in enumerate(arrays)]
    run_kernel(module, addrs, grid, memory)


@lru_cache(maxsize=None)
def _ptx(llvm_ir, target):
    return llvm_to_ptx(llvm_ir, target)


def compile_ptx(module, targets=("sm_90a", "sm_80")):
    """Lower once, emit PTX per target and assemble each to a cubin: {target: ptx}."""
    kernel = lower_module(module)
    out = {}
    for target in targets:
        out[target] = _ptx(kernel.llvm_ir, target)
        cubin, _ = ptx_to_cubin(out[target], target)
        assert cubin
    return out


def random_matrix(rng, shape, np_dtype):
    if np.issubdtype(np_dtype, np.integer):
        return rng.integers(-100, 100, size=shape).astype(np_dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(np_dtype)


def tensor_type(shape, elem, layout):
    return TensorType(tuple(shape), elem, layout)
