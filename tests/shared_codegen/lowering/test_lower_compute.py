"""Lowering of arithmetic, math, casts, control flow and program ops (PTX read back)."""

import os
import re

import pytest
from lowering_kernels import KernelBuilder, blocked_1d, compile_all, count, ptr

from shared_codegen.ir.core import Location, OpDef, Operation
from shared_codegen.ir.types import (bfloat16, float8e4nv, float8e5, float16, float32, float64,
                                     int1, int8, int32, int64, uint8, uint32)
from shared_codegen.lowering.context import LoweringError
from shared_codegen.lowering.libdevice import candidate_paths
from shared_codegen.ops.arith.definition import (BINARY_RULES, FLOAT_BINARY, BinaryOp, CastOp,
                                                 CompareOp, SelectOp, cast_op_name)
from shared_codegen.ops.control.definition import ForOp, IfOp, WhileOp, YieldOp
from shared_codegen.ops.math.definition import UNARY_FLOAT_RULES, AbsIntOp, FmaOp, UnaryFloatOp
from shared_codegen.ops.memory.definition import LoadOp, StoreOp
from shared_codegen.ops.program.definition import AssertOp, BarrierOp, ProgramIdOp
from shared_codegen.stages import plan_and_lower as lower_module

BLOCK = 256
LAYOUT = blocked_1d(2)


def unary_kernel(elem, build, out_elem=None):
    """out[i] = build(k, x[i]) for x of `elem`."""
    out_elem = out_elem or elem
    k = KernelBuilder("unary", [ptr(elem), ptr(out_elem)], ["x", "out"], {0: 16, 1: 16})
    offs = k.offsets(BLOCK, LAYOUT)
    x = LoadOp.build(k.b, k.ptrs(k.args[0], offs, BLOCK, LAYOUT))
    StoreOp.build(k.b, k.ptrs(k.args[1], offs, BLOCK, LAYOUT), build(k, x))
    return k.finish()


@pytest.mark.parametrize("elem", [float32, float16, bfloat16])
def test_every_unary_math_op_lowers_without_libdevice(elem):
    def build(k, x):
        for name in UNARY_FLOAT_RULES:
            x = UnaryFloatOp.build(k.b, name, x)
        return FmaOp.build(k.b, x, x, x)

    _, ptx = compile_all(unary_kernel(elem, build))
    text = ptx["sm_90a"]
    for instr in ("ex2.approx.ftz.f32", "lg2.approx.f32", "sin.approx.f32", "cos.approx.f32",
                  "sqrt.approx.f32", "sqrt.rn.f32", "rsqrt.approx.f32", "cvt.rmi"):  # ceil(floor) folds
        assert instr in text, instr
    assert "call" not in text  # no libdevice calls left


def test_fp64_sqrt_inline_and_fp64_transcendentals_through_libdevice():
    _, ptx = compile_all(unary_kernel(float64, lambda k, x: UnaryFloatOp.build(
        k.b, "math.sqrt", x)))
    assert "sqrt.rn.f64" in ptx["sm_90a"]

    if not any(os.path.isfile(p) for p in candidate_paths()):
        pytest.skip("no libdevice.10.bc installed (pip install nvidia-nvvm)")

    def chain(k, x):
        for name in ("math.exp", "math.log", "math.sin", "math.cos", "math.erf"):
            x = UnaryFloatOp.build(k.b, name, x)
        return x

    _, ptx = compile_all(unary_kernel(float64, chain))
    text = ptx["sm_90a"]
    # libdevice's bodies are inlined (double-precision fma polynomials); the only calls left
    # go to helpers libdevice marks noinline (sin/cos's slow argument reduction), defined here.
    assert "__nv_" not in text
    called = set(re.findall(r"call\.uni[^,]*, (\w+),", text))
    assert called <= set(re.findall(r"\.func .*?(\w+)\($", text, re.M))
    assert count(r"fma\.rn\.f64", text) > 20


@pytest.mark.parametrize("elem", [int32, uint32, int64, int8])
def test_every_integer_binary_op_and_compare(elem):
    def build(k, x):
        acc = x
        for name in sorted(set(BINARY_RULES) - FLOAT_BINARY):
            acc = BinaryOp.build(k.b, name, acc, x)
        preds = ("eq", "ne", "slt", "ult", "sge", "uge")
        c = CompareOp.build(k.b, "arith.cmpi", preds[0], acc, x)
        for p in preds[1:]:
            c2 = CompareOp.build(k.b, "arith.cmpi", p, acc, x)
            c = BinaryOp.build(k.b, "arith.xori", c, c2)
        return SelectOp.build(k.b, c, acc, AbsIntOp.build(k.b, x))

    _, ptx = compile_all(unary_kernel(elem, build))
    text = ptx["sm_90a"]
    signed = "s" if elem.is_int_signed() else "u"
    if elem.bits >= 32:
        assert f"max.{signed}{elem.bits}" in text and "max.u" in text


@pytest.mark.parametrize("elem", [float32, float16, bfloat16, float64])
def test_every_float_binary_op_and_compare(elem):
    def build(k, x):
        acc = x
        for name in sorted(FLOAT_BINARY):
            acc = BinaryOp.build(k.b, name, acc, x)
        c = CompareOp.build(k.b, "arith.cmpf", "une", acc, x)
        c = BinaryOp.build(k.b, "arith.andi", c, CompareOp.build(k.b, "arith.cmpf", "olt", acc, x))
        return SelectOp.build(k.b, c, acc, x)

    _, ptx = compile_all(unary_kernel(elem, build))
    if elem == float32:
        assert "max.NaN.f32" in ptx["sm_90a"]  # arith.maximumf propagates NaN


def cast_chain(k, x, chain):
    src = x.type.element
    for dst in chain:
        name = cast_op_name(src, dst)
        if name == "arith.cmpf":
            x = CompareOp.build(k.b, "arith.cmpf", "une", x, k.splat(k.const(0.0, src), BLOCK,
                                                                      LAYOUT))
        elif name == "arith.cmpi":
            x = CompareOp.build(k.b, "arith.cmpi", "ne", x, k.splat(k.const(0, src), BLOCK,
                                                                     LAYOUT))
        elif name:
            x = CastOp.build(k.b, name, x, dst)
        src = dst
    return x


@pytest.mark.parametrize("chain", [
    [float8e4nv, float16, bfloat16, float8e5, float32, float8e4nv],
    [float16, float64, int32, uint8, float32, bfloat16, int64, float16],
    [float32, int1, float32, uint32, int8, int64, float16],
])
def test_cast_chains_including_fp8(chain):
    src = chain[0] if chain[0] != float8e4nv else float32
    _, ptx = compile_all(unary_kernel(src, lambda k, x: cast_chain(k, x, chain[1:] if src is
                                                                   chain[0] else chain),
                                      out_elem=chain[-1]))
    text = ptx["sm_90a"]
    if float8e4nv in chain:
        assert "cvt.rn.satfinite.e4m3x2.f32" in text
        assert "cvt.rn.f16x2.e5m2x2" in text or "cvt.rn.f16x2.e4m3x2" in text


def test_for_loop_carries_a_tensor_through_phis_and_is_a_ptx_loop():
    k = KernelBuilder("loop", [ptr(float32), ptr(float32), int32], ["x", "out", "n"],
                      {0: 16, 1: 16})
    offs = k.offsets(BLOCK, LAYOUT, times_pid=False)
    init = k.splat(k.const(0.0, float32), BLOCK, LAYOUT)
    ptrs = k.ptrs(k.args[0], offs, BLOCK, LAYOUT)
    loop = ForOp.build(k.b, k.const(0), k.args[2], k.const(1), [init, ptrs])
    body = loop.regions[0].block
    iv, acc, p = body.args
    with k.b.at_end_of(body):
        x = LoadOp.build(k.b, p)
        acc2 = BinaryOp.build(k.b, "arith.addf", acc, x)
        step = k.splat(k.const(BLOCK), BLOCK, LAYOUT)
        from shared_codegen.ops.arith.definition import AddPtrOp
        p2 = AddPtrOp.build(k.b, p, step)
        YieldOp.build(k.b, [acc2, p2])
    StoreOp.build(k.b, k.ptrs(k.args[1], offs, BLOCK, LAYOUT), loop.results[0])
    _, ptx = compile_all(k.finish())
    text = ptx["sm_90a"]
    assert count(r"@%p\d+ bra", text) >= 1 and count(r"\$L__BB\d+_\d+:", text) >= 2
    assert "ld.global.v2.b32" in text  # the loop-carried pointer keeps its alignment facts


def test_if_with_results_and_while_loop():
    k = KernelBuilder("branches", [ptr(int32), int32], ["out", "n"], {0: 16})
    pid = ProgramIdOp.build(k.b, "tt.get_program_id", 1)
    cond = CompareOp.build(k.b, "arith.cmpi", "slt", pid, k.args[1])
    if_op = IfOp.build(k.b, cond, [int32])
    with k.b.at_end_of(if_op.regions[0].block):
        YieldOp.build(k.b, [BinaryOp.build(k.b, "arith.muli", pid, k.const(3))])
    with k.b.at_end_of(if_op.regions[1].block):
        YieldOp.build(k.b, [k.const(7)])
    w = WhileOp.build(k.b, [if_op.results[0]])
    with k.b.at_end_of(w.regions[0].block):
        v = w.regions[0].block.args[0]
        YieldOp.build(k.b, [CompareOp.build(k.b, "arith.cmpi", "slt", v, k.const(1000)), v],
                      name="scf.condition")
    with k.b.at_end_of(w.regions[1].block):
        v = w.regions[1].block.args[0]
        YieldOp.build(k.b, [BinaryOp.build(k.b, "arith.shli", v, k.const(1))])
    BarrierOp.build(k.b)
    AssertOp.build(k.b, CompareOp.build(k.b, "arith.cmpi", "ne", w.results[0], k.args[1]),
                   "positive")
    StoreOp.build(k.b, k.args[0], w.results[0])
    _, ptx = compile_all(k.finish())
    text = ptx["sm_90a"]
    assert "%ctaid.y" in text and "bar.sync" in text and "trap" in text
    assert count(r"@%p\d+ st\.global\.b32", text) == 1  # a scalar store: thread 0 only


class _NoLowering(OpDef):
    name = "test.no_lowering"


def test_missing_rule_names_the_op_and_its_line():
    k = KernelBuilder("bad", [int32], ["n"])
    op = Operation("test.no_lowering", [], [], loc=Location("kern.py", 12, 0, "  foo(n)"))
    k.b.insert(op)
    with pytest.raises(LoweringError, match=r"kern.py:12: test.no_lowering: no lowering rule"):
        lower_module(k.finish())


def test_scalar_parameters_of_every_kind():
    from shared_codegen.ir.types import uint32 as u32

    k = KernelBuilder("params", [ptr(float32), int1, float16, bfloat16, u32, int64, float64],
                      ["out", "flag", "h", "b", "u", "l", "d"], {0: 16})
    _, flag, h, bf, u, l, d = k.args
    hf = CastOp.build(k.b, "arith.extf", h, float32)
    bff = CastOp.build(k.b, "arith.extf", bf, float32)
    uf = CastOp.build(k.b, "arith.uitofp", u, float32)
    lf = CastOp.build(k.b, "arith.sitofp", l, float32)
    df = CastOp.build(k.b, "arith.truncf", d, float32)
    s = hf
    for v in (bff, uf, lf, df):
        s = BinaryOp.build(k.b, "arith.addf", s, v)
    s = SelectOp.build(k.b, flag, s, hf)
    StoreOp.build(k.b, k.args[0], s)
    kernel, ptx = compile_all(k.finish())
    assert kernel.param_kinds == ("ptr", "i1", "fp16", "bf16", "u32", "i64", "fp64")
    assert ".param .u8 params_param_1" in ptx["sm_90a"] or ".param .b8" in ptx["sm_90a"]
    assert "cvt.rn.f32.u32" in ptx["sm_90a"]
