"""Gluon kernels compiled for sm_90a without a GPU: the IR keeps the written layouts, the PTX
shows exactly the data movement the conversion planner chose, and nvJitLink makes a cubin."""

import os
import re
import sys

import gluon
from gluon import language as gl
from gluon.layouts import to_linear_layout
from shared_codegen.layouts.planner import plan_conversion
from gl_test_util import L2

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples",
                                "gluon"))

SIG2 = {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"}


def register_permuted(layout, shape):
    """`layout` with its registers renumbered: same threads hold the same elements."""
    ll = to_linear_layout(layout, shape)
    return gl.DistributedLinearLayout(list(reversed(ll.bases["register"])), ll.bases["lane"],
                                      ll.bases["warp"], [], list(shape))


@gluon.jit
def convert_store_kernel(x_ptr, out_ptr, src: gl.constexpr, dst: gl.constexpr):
    rows = gl.arange(0, 16, layout=gl.SliceLayout(1, src))
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, src))
    offs = rows[:, None] * 32 + cols[None, :]
    x = gl.load(x_ptr + offs)
    y = gl.convert_layout(x, dst)
    gl.store(gl.convert_layout(out_ptr + offs, dst), y + 1.0)


def compile_convert(dst):
    return gluon.compile(convert_store_kernel, SIG2, {"src": L2, "dst": dst})


def test_register_permutation_moves_nothing_between_threads():
    dst = register_permuted(L2, [16, 32])
    assert plan_conversion(L2, dst, [16, 32], 32).kind == "register_permutation"
    ptx = compile_convert(dst).asm["ptx"]
    baseline = compile_convert(L2).asm["ptx"]  # the same kernel without a conversion
    assert ".shared" not in ptx and "bar.sync" not in ptx
    assert ptx.count("shfl.sync") == baseline.count("shfl.sync")


def test_shared_memory_conversion_uses_the_planned_vector_width():
    from transpose_kernel import transpose_kernel

    load = gl.BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0])   # what the kernel builds, fp32
    store = gl.BlockedLayout([4, 1], [16, 2], [1, 4], [0, 1])
    plan = plan_conversion(load, store, [64, 64], 32)
    assert plan.kind == "shared_memory"
    assert (plan.shared.store_vector, plan.shared.load_vector) == (4, 1)
    kernel = gluon.compile(transpose_kernel, {
        "x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "M": "i32:16", "N": "i32:16",
        "stride_x": "i32:16", "stride_y": "i32:16"}, {"BLOCK_M": 64, "BLOCK_N": 64, "VEC": 4})
    ptx = kernel.asm["ptx"]
    shared_ops = set(re.findall(r"\b(?:st|ld)\.shared[.\w]*", ptx))
    assert shared_ops == {plan.shared.store_instruction, plan.shared.load_instruction}
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx
    assert kernel.shared >= plan.cost.smem_bytes
    assert isinstance(kernel.asm["cubin"], bytes) and len(kernel.asm["cubin"]) > 0


@gluon.jit
def copy_kernel(x_ptr, out_ptr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offs = gl.arange(0, 512, layout=layout)
    gl.store(out_ptr + offs, gl.load(x_ptr + offs))


EXPECTED_COPY_IR = """\
#blocked0 = BlockedLayout(size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[4], order=[0])
tt.func @copy_kernel(%x_ptr: !ptr<fp32>, %out_ptr: !ptr<fp32>) attributes {kernel} {
  %offs = tt.make_range {end = 512, start = 0} : tensor<512xi32, #blocked0>
  %0 = tt.splat %out_ptr : tensor<512x!ptr<fp32>, #blocked0>
  %1 = tt.addptr %0, %offs : tensor<512x!ptr<fp32>, #blocked0>
  %2 = tt.splat %x_ptr : tensor<512x!ptr<fp32>, #blocked0>
  %3 = tt.addptr %2, %offs : tensor<512x!ptr<fp32>, #blocked0>
  %4 = tt.load %3 : tensor<512xfp32, #blocked0>
  tt.store %1, %4
  tt.return
}"""


def test_copy_kernel_ir_and_vectorized_ptx():
    kernel = gluon.compile(copy_kernel, SIG2)
    assert EXPECTED_COPY_IR in kernel.asm["ttgir"]
    ptx = kernel.asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == 1 and ptx.count("st.global.v4.b32") == 1
    assert ".shared" not in ptx


@gluon.jit
def row_sum_kernel(x_ptr, out_ptr, layout: gl.constexpr):
    rows = gl.arange(0, 16, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, layout))
    x = gl.load(x_ptr + rows[:, None] * 32 + cols[None, :])
    gl.store(out_ptr + rows, gl.sum(x, axis=1))


def test_reduction_across_lanes_compiles_to_butterfly_shuffles():
    kernel = gluon.compile(row_sum_kernel, SIG2, {"layout": L2}, target="sm_90a")
    assert "shfl.sync.bfly" in kernel.asm["ptx"]
    assert len(kernel.asm["cubin"]) > 0
