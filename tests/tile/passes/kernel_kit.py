"""Build small layout-free kernels with the op builders, the way the tile frontend would.

    k = Kernel([("x_ptr", ptr(fp32)), ("n", i32)], arg_divisibility={0: 16, 1: 16})
    offs = k.add(k.splat(k.mul(k.pid(), k.const(1024)), [1024]), k.arange(1024))
"""

from __future__ import annotations

from shared_codegen.ir import Builder, Function, Module
from shared_codegen.ops.arith.definition import (AddPtrOp, BinaryOp, CastOp, CompareOp, ConstantOp,
                                         SelectOp)
from shared_codegen.ops.control.definition import ForOp, IfOp, YieldOp
from shared_codegen.ops.memory.definition import LoadOp, StoreOp
from shared_codegen.ops.program.definition import ProgramIdOp
from shared_codegen.ops.reduction.definition import ReduceOp
from shared_codegen.ops.tensor.definition import (BroadcastOp, ExpandDimsOp, HintOp, MakeRangeOp,
                                          ReshapeOp, SplatOp, TransOp)
from shared_codegen.ir.types import PointerType, TensorType, float32, int1, int32


def ptr(elem):
    return PointerType(elem)


class Kernel:
    def __init__(self, args, arg_divisibility=None, num_warps=4, name="kernel"):
        self.module = Module({"num_warps": num_warps, "threads_per_warp": 32,
                              "target": "sm_90a"})
        self.fn = Function(name, [t for _, t in args], [n for n, _ in args],
                           attrs={"kernel": True,
                                  "arg_divisibility": dict(arg_divisibility or {})})
        self.module.add(self.fn)
        self.b = Builder(self.fn.body.block)
        self.b.module = self.module
        self.args = {n: v for (n, _), v in zip(args, self.fn.args)}

    def __getitem__(self, name):
        return self.args[name]

    @staticmethod
    def named(v, name):
        v.name_hint = name
        return v

    # ---- scalars and ranges ----------------------------------------------------------------
    def pid(self, axis=0):
        return self.named(ProgramIdOp.build(self.b, "tt.get_program_id", axis), "pid")

    def const(self, value, ty=int32, shape=None):
        t = TensorType(tuple(shape), ty) if shape else ty
        return ConstantOp.build(self.b, value, t)

    def arange(self, n, start=0):
        return MakeRangeOp.build(self.b, start, start + n)

    # ---- elementwise with implicit splat/broadcast (like the tile semantic layer) ----------
    def _shape(self, v):
        return v.type.shape if isinstance(v.type, TensorType) else None

    def _match(self, a, b):
        sa, sb = self._shape(a), self._shape(b)
        if sa is None and sb is None:
            return a, b
        if sa is None:
            return self.splat(a, sb), b
        if sb is None:
            return a, self.splat(b, sa)
        if sa != sb:
            shape = tuple(max(x, y) for x, y in zip(sa, sb))
            if sa != shape:
                a = BroadcastOp.build(self.b, a, shape)
            if sb != shape:
                b = BroadcastOp.build(self.b, b, shape)
        return a, b

    def binop(self, name, a, b):
        a, b = self._match(a, b)
        return BinaryOp.build(self.b, name, a, b)

    def add(self, a, b):
        return self.binop("arith.addi", a, b)

    def mul(self, a, b):
        return self.binop("arith.muli", a, b)

    def addf(self, a, b):
        return self.binop("arith.addf", a, b)

    def cmp(self, pred, a, b):
        a, b = self._match(a, b)
        return CompareOp.build(self.b, "arith.cmpi", pred, a, b)

    def and_(self, a, b):
        return self.binop("arith.andi", a, b)

    def select(self, c, x, y):
        return SelectOp.build(self.b, c, x, y)

    def cast(self, name, x, ty):
        return CastOp.build(self.b, name, x, ty)

    def splat(self, x, shape):
        return SplatOp.build(self.b, x, shape)

    def expand(self, x, axis):
        return ExpandDimsOp.build(self.b, x, axis)

    def broadcast(self, x, shape):
        return BroadcastOp.build(self.b, x, shape)

    def trans(self, x, order):
        return TransOp.build(self.b, x, order)

    def reshape(self, x, shape):
        return ReshapeOp.build(self.b, x, shape)

    def hint(self, x, **hints):
        return HintOp.build(self.b, x, **hints)

    # ---- memory ----------------------------------------------------------------------------
    def addptr(self, p, off):
        if self._shape(p) is None and self._shape(off) is not None:
            p = self.splat(p, self._shape(off))
        elif self._shape(p) != self._shape(off):
            p, off = self._match(p, off)
        return AddPtrOp.build(self.b, p, off)

    def load(self, p, mask=None, other=None):
        return LoadOp.build(self.b, p, mask, other)

    def store(self, p, v, mask=None):
        return StoreOp.build(self.b, p, v, mask)

    # ---- reductions and control flow -------------------------------------------------------
    def reduce_sum(self, x, axis):
        op = ReduceOp.build(self.b, [x], axis)
        blk = op.regions[0].block
        with self.b.at_end_of(blk):
            name = "arith.addf" if x.type.element.is_floating() else "arith.addi"
            s = BinaryOp.build(self.b, name, blk.args[0], blk.args[1])
            YieldOp.build(self.b, [s], "tt.reduce.return")
        return op.result

    def for_(self, lb, ub, step, inits, body):
        """`body(iv, *iters) -> list of yielded values`, built inside the loop."""
        op = ForOp.build(self.b, lb, ub, step, inits, "k")
        blk = op.regions[0].block
        with self.b.at_end_of(blk):
            outs = body(*blk.args)
            YieldOp.build(self.b, outs)
        return op.results

    def if_(self, cond, result_types, then_body, else_body):
        op = IfOp.build(self.b, cond, result_types)
        for region, body in zip(op.regions, (then_body, else_body)):
            with self.b.at_end_of(region.block):
                YieldOp.build(self.b, body())
        return op.results

    def ret(self):
        YieldOp.build(self.b, [], "tt.return")


def vector_add(block=1024, elem=float32, aligned=True, num_warps=4):
    """The tutorial vector add: out[i] = x[i] + y[i] for i < n."""
    div = {0: 16, 1: 16, 2: 16, 3: 16} if aligned else {}
    k = Kernel([("x_ptr", ptr(elem)), ("y_ptr", ptr(elem)), ("out_ptr", ptr(elem)),
                ("n", int32)], div, num_warps)
    start = k.named(k.mul(k.pid(), k.const(block)), "block_start")
    offs = k.named(k.add(start, k.arange(block)), "offsets")
    mask = k.named(k.cmp("slt", offs, k["n"]), "mask")
    x = k.named(k.load(k.addptr(k["x_ptr"], offs), mask), "x")
    y = k.named(k.load(k.addptr(k["y_ptr"], offs), mask), "y")
    add = "arith.addf" if elem.is_floating() else "arith.addi"
    out = k.named(k.binop(add, x, y), "output")
    k.store(k.addptr(k["out_ptr"], offs), out, mask)
    k.ret()
    return k


__all__ = ["Kernel", "ptr", "vector_add", "float32", "int32", "int1"]
