"""Hand-built explicit-layout kernels that move tensors through shared memory, and helpers to
interpret them on numpy arrays and compile them to PTX / cubin."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gluon.layouts import BlockedLayout, SliceLayout
from shared_codegen.interpreter.memory import Memory
from shared_codegen.interpreter.run import run_kernel
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Function, Location, Module
from shared_codegen.ir.types import SharedMemoryType, int32, pointer_type
from shared_codegen.ir.verifier import verify_module
from shared_codegen.lowering.backend import llvm_to_ptx, ptx_to_cubin
from shared_codegen.ops.arith.definition import AddPtrOp, BinaryOp, ConstantOp
from shared_codegen.ops.control.definition import YieldOp
from shared_codegen.ops.memory.definition import LoadOp, StoreOp
from shared_codegen.ops.shared_memory.definition import LocalAllocOp
from shared_codegen.ops.tensor.definition import BroadcastOp, ExpandDimsOp, MakeRangeOp, SplatOp
from shared_codegen.stages import plan_and_lower as lower_module


def blocked(shape, per_thread=None, num_warps=4, order=None):
    """A blocked layout for `shape`: `per_thread` contiguous elements along the last dim,
    lanes then warps filling the dims from the last one."""
    rank = len(shape)
    order = tuple(range(rank - 1, -1, -1)) if order is None else tuple(order)
    spt = [1] * rank
    spt[order[0]] = per_thread or 1
    tpw, left = [1] * rank, 32
    for d in order:
        room = max(1, shape[d] // spt[d])
        tpw[d] = min(room, left)
        left //= tpw[d]
    tpw[order[-1]] *= left
    wpc, left = [1] * rank, num_warps
    for d in reversed(order):
        room = max(1, shape[d] // (spt[d] * tpw[d]))
        wpc[d] = min(room, left)
        left //= wpc[d]
    wpc[order[-1]] *= left
    return BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), order)


class Kernel:
    """A module with one kernel of pointer arguments; build its body through `self.b`."""

    def __init__(self, name, elems, num_warps=4):
        self.num_warps = num_warps
        self.module = Module({"num_warps": num_warps, "threads_per_warp": 32,
                              "target": "sm_90a"})
        self.fn = self.module.add(Function(
            name, [pointer_type(e) for e in elems], [f"p{i}" for i in range(len(elems))],
            attrs={"kernel": True, "arg_divisibility": {i: 16 for i in range(len(elems))}}))
        self.b = Builder(self.fn.body.block)
        self.args = self.fn.args

    def at_line(self, line, text=""):
        self.b.loc = Location("kernel.py", line, 0, text, self.fn.name)

    def i32(self, value):
        return ConstantOp.build(self.b, value, int32)

    def offsets(self, shape, layout):
        """The row-major element index of every coordinate of `shape`, in `layout`."""
        rank = len(shape)
        strides = [int(np.prod(shape[d + 1:])) for d in range(rank)]
        total = None
        for d in range(rank):
            others = sorted((i for i in range(rank) if i != d), reverse=True)
            chain = [layout]
            for o in others:
                chain.append(SliceLayout(o, chain[-1]))
            x = MakeRangeOp.build(self.b, 0, shape[d], chain[-1])
            for step, o in enumerate(sorted(others)):
                x = ExpandDimsOp.build(self.b, x, o, chain[-2 - step])
            if strides[d] != 1:
                one = [1] * rank
                one[d] = shape[d]
                x = BinaryOp.build(self.b, "arith.muli", x,
                                   SplatOp.build(self.b, self.i32(strides[d]), one, layout))
            x = BroadcastOp.build(self.b, x, shape)
            total = x if total is None else BinaryOp.build(self.b, "arith.addi", total, x)
        return total

    def ptrs(self, base, shape, layout):
        return AddPtrOp.build(self.b, SplatOp.build(self.b, base, shape, layout),
                              self.offsets(shape, layout))

    def load(self, arg, shape, layout):
        return LoadOp.build(self.b, self.ptrs(self.args[arg], shape, layout))

    def store(self, arg, value):
        StoreOp.build(self.b, self.ptrs(self.args[arg], value.type.shape, value.type.layout),
                      value)

    def alloc(self, elem, shape, layout, init=None):
        shape = tuple(shape)
        return LocalAllocOp.build(self.b, SharedMemoryType(shape, elem, layout, shape), init)

    def finish(self):
        YieldOp.build(self.b, [], "tt.return")
        verify_module(self.module)
        return self.module


def interpret(module, *arrays, grid=(1, 1, 1)):
    memory = Memory()
    addrs = [memory.map(f"p{i}", arr) for i, arr in enumerate(arrays)]
    run_kernel(module, addrs, grid, memory)


@lru_cache(maxsize=None)
def _ptx(llvm_ir, target):
    return llvm_to_ptx(llvm_ir, target)


def compile_ptx(module, targets=("sm_90a",)):
    """Lower once, emit PTX per target and assemble each to a cubin: (kernel, {target: ptx})."""
    kernel = lower_module(module)
    out = {}
    for target in targets:
        out[target] = _ptx(kernel.llvm_ir, target)
        cubin, _ = ptx_to_cubin(out[target], target)
        assert cubin
    return kernel, out
