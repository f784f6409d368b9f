"""Gluon's layout rules: each broken rule is a CompilationError naming the kernel line, with
the layouts (and, for mismatches, their linear forms) in the message."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.layouts import to_linear_layout
from gl_test_util import L2, L2T, compile_error, offsets_2d

A = gl.BlockedLayout([1], [32], [4], [0])
B = gl.BlockedLayout([2], [32], [4], [0])
X = np.zeros(256, dtype=np.float32)


def indented(layout, shape):
    return "\n".join("    " + line for line in str(to_linear_layout(layout, shape)).strip(
        "\n").splitlines())


@gluon.jit
def add_kernel(x_ptr, a: gl.constexpr, b: gl.constexpr):
    x = gl.arange(0, 64, layout=a)
    y = gl.arange(0, 64, layout=b)
    z = x + y


def test_binary_op_on_different_layouts_shows_both_layouts_and_linear_forms():
    message = compile_error(add_kernel, X, a=A, b=B)
    expected = (f"operands of `+` have different layouts:\n"
                f"  lhs: {A!r}\n{indented(A, [64])}\n"
                f"  rhs: {B!r}\n{indented(B, [64])}\n"
                f"  use gl.convert_layout(x, layout) to move one of them")
    assert expected in message
    assert message.startswith(f"{__file__}:")
    assert "z = x + y" in message


def test_equivalent_but_different_layouts_are_still_a_mismatch_and_say_it_is_free():
    same = gl.DistributedLinearLayout([], [[1], [2], [4], [8], [16]], [[32], [0]], [], [64])
    message = compile_error(add_kernel, X, a=A, b=same)
    assert "operands of `+` have different layouts" in message
    assert "they place every element identically, so the conversion is free" in message


@gluon.jit
def compare_where_kernel(x_ptr, OP: gl.constexpr, a: gl.constexpr, b: gl.constexpr):
    x = gl.arange(0, 64, layout=a)
    y = gl.arange(0, 64, layout=b)
    if OP == "lt":
        z = x < y
    elif OP == "where":
        z = gl.where(x > 0, x, y)
    elif OP == "maximum":
        z = gl.maximum(x, y)
    elif OP == "and":
        z = x & y


@pytest.mark.parametrize("op,what", [("lt", "operands of `<`"), ("where", "operands of gl.where"),
                                     ("maximum", "operands of gl.maximum"),
                                     ("and", "operands of `&`")])
def test_other_operators_name_themselves(op, what):
    assert f"{what} have different layouts:" in compile_error(compare_where_kernel, X, OP=op,
                                                               a=A, b=B)


@gluon.jit
def memory_kernel(x_ptr, OP: gl.constexpr, a: gl.constexpr, b: gl.constexpr):
    offs = gl.arange(0, 64, layout=a)
    other = gl.arange(0, 64, layout=b)
    if OP == "mask":
        gl.load(x_ptr + offs, mask=other < 10)
    elif OP == "other":
        gl.load(x_ptr + offs, mask=offs < 10, other=other.to(gl.float32))
    elif OP == "value":
        gl.store(x_ptr + offs, other.to(gl.float32))


@pytest.mark.parametrize("op,what", [("mask", "`pointer` and `mask` of gl.load"),
                                     ("other", "`pointer` and `other` of gl.load"),
                                     ("value", "`pointer` and `value` of gl.store")])
def test_memory_operands_need_the_pointer_layout(op, what):
    message = compile_error(memory_kernel, X, OP=op, a=A, b=B)
    assert f"{what} have different layouts:\n  pointer: {A!r}" in message


@gluon.jit
def expand_kernel(x_ptr, layout: gl.constexpr, AXIS: gl.constexpr):
    x = gl.arange(0, 64, layout=layout)
    y = gl.expand_dims(x, AXIS)


def test_expand_dims_needs_the_matching_slice_layout():
    message = compile_error(expand_kernel, X, layout=A, AXIS=0)
    assert (f"gl.expand_dims(x, 0) needs x to have a SliceLayout(dim=0, parent) (the result "
            f"then has `parent`), but x has {A!r}") in message
    wrong_axis = gl.SliceLayout(1, L2)
    message = compile_error(expand_kernel, X, layout=wrong_axis, AXIS=0)
    assert f"but x has {wrong_axis!r}" in message


@gluon.jit
def warps_kernel(x_ptr, OP: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [8], [0])
    if OP == "arange":
        x = gl.arange(0, 256, layout=layout)
    elif OP == "full":
        x = gl.full([256], 0, gl.int32, layout)
    elif OP == "convert":
        x = gl.convert_layout(gl.arange(0, 256, layout=gl.BlockedLayout([1], [32], [4], [0])),
                              layout)


@pytest.mark.parametrize("op", ["arange", "full", "convert"])
def test_layout_warps_must_match_num_warps(op):
    message = compile_error(warps_kernel, X, OP=op)
    assert "layout has 8 warps but the kernel runs with num_warps=4" in message


def test_num_warps_of_the_launch_is_what_counts():
    message = compile_error(add_kernel, X, a=A, b=A, num_warps=2)
    assert "layout has 4 warps but the kernel runs with num_warps=2" in message


@gluon.jit
def coverage_kernel(x_ptr, OP: gl.constexpr):
    if OP == "rank":
        x = gl.arange(0, 128, layout=gl.BlockedLayout([1, 1], [4, 8], [2, 2], [1, 0]))
    elif OP == "fixed_shape":
        fixed: gl.constexpr = gl.DistributedLinearLayout(
            [[1]], [[2], [4], [8], [16], [32]], [[0], [0]], [], [64])
        x = gl.arange(0, 128, layout=fixed)


def test_a_layout_must_cover_the_shape():
    assert "has rank 2 but the tensor has shape [128] (rank 1)" in compile_error(
        coverage_kernel, X, OP="rank")
    message = compile_error(coverage_kernel, X, OP="fixed_shape")
    assert "cannot describe a tensor of shape [128]" in message


@gluon.jit
def trivial_kernel(x_ptr, dst: gl.constexpr):
    x = gl.load(x_ptr + offsets_2d(16, 32, gl.BlockedLayout([1, 2], [4, 8], [2, 2], [1, 0])))
    y = gl.convert_layout(x, dst, assert_trivial=True)


def test_assert_trivial_rejects_conversions_that_cross_threads():
    message = compile_error(trivial_kernel, np.zeros(512, np.float32), dst=L2T)
    assert f"layout conversion from {L2!r} to {L2T!r} is not trivial: it needs a shared " \
           "memory" in message
    assert "The linear layouts are:" in message


def test_assert_trivial_accepts_a_register_permutation():
    ll = to_linear_layout(L2, [16, 32])
    regs = list(reversed(ll.bases["register"]))  # same threads, registers renumbered
    permuted = gl.DistributedLinearLayout(regs, ll.bases["lane"], ll.bases["warp"], [], [16, 32])
    trivial_kernel[(1,)](np.zeros(512, np.float32), dst=permuted)


@gluon.jit
def scalar_expand_kernel(x_ptr):
    y = gl.expand_dims(gl.program_id(0), 0)


def test_expand_dims_of_a_scalar_points_to_full():
    assert "gl.expand_dims needs a tensor with a layout, got a scalar" in compile_error(
        scalar_expand_kernel, X)


def test_verify_pass_rejects_a_tensor_without_a_layout():
    from gluon.passes import verify_layouts
    from shared_codegen.frontend.errors import CompilationError
    from shared_codegen.ir.builder import Builder
    from shared_codegen.ir.core import Function, Module
    from shared_codegen.ops.tensor.definition import MakeRangeOp

    module = Module({"num_warps": 4})
    fn = module.add(Function("k", [], [], attrs={"kernel": True}))
    MakeRangeOp.build(Builder(fn.body.block), 0, 64)
    with pytest.raises(CompilationError, match=r"tensor<64xi32> has no layout: every Gluon "
                                               r"tensor needs a layout"):
        verify_layouts(module)
