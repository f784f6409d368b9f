"""Gluon's `tma.make_tensor_descriptor`: a descriptor the kernel writes into its global
scratch, used by the TMA copies; in the interpreter and compiled for sm_90a."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier, tma
from shared_codegen.errors import CompilationError, InterpreterError

LAYOUT = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2))
SIGNATURE = {"in_ptr": "*fp16:16", "out_ptr": "*fp16:16", "M": "i32", "N": "i32"}


@gluon.jit
def copy_doubled(in_ptr, out_ptr, M, N, PADDING: gl.constexpr):
    src = tma.make_tensor_descriptor(in_ptr, [M, N], [N, 1], [32, 32], LAYOUT,
                                     padding_option=PADDING)
    dst = tma.make_tensor_descriptor(out_ptr, [M, 2 * N], [2 * N, 1], [32, 32], LAYOUT)
    smem = gl.allocate_shared_memory(gl.float16, [32, 32], LAYOUT)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    m = gl.program_id(0) * 32
    mbarrier.expect(bar, 32 * 32 * 2)
    tma.async_copy_global_to_shared(src, [m, 0], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    tma.async_copy_shared_to_global(dst, [m, 0], smem)    # the block, padding included
    tma.async_copy_shared_to_global(dst, [m, 32], smem)
    tma.store_wait(0)


@pytest.mark.parametrize("padding,fill", [("zero", 0.0), ("nan", np.nan)])
def test_kernel_written_descriptors_copy_and_pad_in_the_interpreter(padding, fill):
    x = np.arange(50 * 24, dtype=np.float16).reshape(50, 24)  # rows of 48 bytes
    y = np.full((50, 48), -1.0, np.float16)
    copy_doubled[(2,)](x, y, 50, 24, PADDING=padding)
    np.testing.assert_array_equal(y[:, :24], x)
    np.testing.assert_array_equal(y[:, 32:], x[:, :16])  # clipped to the tensor's 48 columns
    np.testing.assert_array_equal(y[:, 24:32], np.full((50, 8), fill, np.float16))


def test_strides_tma_cannot_take_are_reported_in_the_interpreter():
    # 20 fp16 = 40 bytes per row: the GPU would round the stride down and copy wrong rows.
    x = np.zeros((50, 20), np.float16)
    with pytest.raises(InterpreterError, match=r"tensor descriptor: strides\[0\] = 20 "
                                               r"elements = 40 bytes is not a positive "
                                               r"multiple of 16 bytes"):
        copy_doubled[(1,)](x, np.zeros((50, 48), np.float16), 50, 20, PADDING="zero")


def test_kernel_written_descriptors_compile_to_tensormap_replace_for_sm_90a():
    kernel = gluon.compile(copy_doubled, signature=SIGNATURE, constexprs={"PADDING": "zero"},
                           target="sm_90a")
    ptx = kernel.asm["ptx"]
    assert ptx.count("tensormap.replace.tile.global_address") == 2
    assert "fence.proxy.tensormap::generic.acquire.gpu" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert kernel.metadata["global_scratch_bytes"] == 256  # two 128-byte maps


def test_kernel_written_descriptors_need_an_sm_90a_class_target():
    with pytest.raises(CompilationError, match=r"tma.make_tensor_descriptor: a kernel writes "
                                               r"tensor maps with tensormap.replace, which needs "
                                               r"an architecture- or family-specific target "
                                               r"from sm_90 \(sm_90a, sm_100a, ...\), not sm_90"):
        gluon.compile(copy_doubled, signature=SIGNATURE, constexprs={"PADDING": "zero"},
                      target="sm_90")


@gluon.jit
def bad_layout(in_ptr, N):
    tma.make_tensor_descriptor(in_ptr, [N], [1], [64],
                               gl.SwizzledSharedLayout(1, 1, 1, order=[0]))


@gluon.jit
def bad_stride(in_ptr, N):
    tma.make_tensor_descriptor(in_ptr, [N, N], [N, N], [16, 16], LAYOUT)


@pytest.mark.parametrize("kernel,message", [
    (bad_layout, r"tma.make_tensor_descriptor: layout must be a gl.NVMMASharedLayout, got "
                 r"SwizzledSharedLayout"),
    (bad_stride, r"tma.make_tensor_descriptor: the last stride must be the compile-time "
                 r"constant 1 \(the innermost dim is contiguous\), got"),
])
def test_make_tensor_descriptor_errors(kernel, message):
    with pytest.raises(CompilationError, match=message):
        kernel[(1,)](np.zeros(256, np.float16), 16)
