"""Hand-built explicit-layout kernels for the lowering tests, and PTX/cubin helpers."""

from __future__ import annotations

import re
from functools import lru_cache

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Function, Module
from shared_codegen.ir.types import TensorType, int32, pointer_type
from shared_codegen.layouts.distributed import BlockedLayout
from shared_codegen.lowering.backend import llvm_to_ptx, ptx_to_cubin
from shared_codegen.ops.arith.definition import AddPtrOp, BinaryOp, CompareOp, ConstantOp
from shared_codegen.ops.control.definition import YieldOp
from shared_codegen.ops.program.definition import ProgramIdOp
from shared_codegen.ops.tensor.definition import MakeRangeOp, SplatOp
from shared_codegen.stages import plan_and_lower as lower_module

TARGETS = ("sm_90a", "sm_100a")


def blocked_1d(per_thread: int, num_warps: int = 4) -> BlockedLayout:
    return BlockedLayout((per_thread,), (32,), (num_warps,), (0,))


class KernelBuilder:
    """A module with one kernel whose body is built through `self.b`."""

    def __init__(self, name, arg_types, arg_names=None, divisibility=None, num_warps=4):
        self.module = Module({"num_warps": num_warps, "threads_per_warp": 32,
                              "target": "sm_90a"})
        names = arg_names or [f"a{i}" for i in range(len(arg_types))]
        self.fn = self.module.add(Function(
            name, list(arg_types), names,
            attrs={"kernel": True, "arg_divisibility": dict(divisibility or {})}))
        self.b = Builder(self.fn.body.block)
        self.args = self.fn.args

    def const(self, value, ty=int32):
        return ConstantOp.build(self.b, value, ty)

    def splat(self, x, block, layout):
        return SplatOp.build(self.b, x, (block,), layout)

    def offsets(self, block, layout, times_pid=True):
        """pid * block + arange(block) as an i32 tensor."""
        rng = MakeRangeOp.build(self.b, 0, block, layout)
        if not times_pid:
            return rng
        pid = ProgramIdOp.build(self.b, "tt.get_program_id", 0)
        start = BinaryOp.build(self.b, "arith.muli", pid, self.const(block))
        return BinaryOp.build(self.b, "arith.addi", self.splat(start, block, layout), rng)

    def ptrs(self, base, offs, block, layout):
        return AddPtrOp.build(self.b, self.splat(base, block, layout), offs)

    def mask_lt(self, offs, n, block, layout):
        return CompareOp.build(self.b, "arith.cmpi", "slt", offs, self.splat(n, block, layout))

    def finish(self):
        YieldOp.build(self.b, [], "tt.return")
        return self.module


def tensor(shape, elem, layout):
    return TensorType(tuple(shape), elem, layout)


def ptr(elem):
    return pointer_type(elem)


@lru_cache(maxsize=None)
def _ptx_cached(llvm_ir: str, target: str) -> str:
    return llvm_to_ptx(llvm_ir, target)


def compile_all(module):
    """Lower, emit PTX for every target and assemble each to a cubin; returns
    (kernel, {target: ptx})."""
    kernel = lower_module(module)
    ptx = {}
    for target in TARGETS:
        ptx[target] = _ptx_cached(kernel.llvm_ir, target)
        cubin, _ = ptx_to_cubin(ptx[target], target)
        assert cubin
    return kernel, ptx


def count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))
