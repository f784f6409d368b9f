"""Lowering cases that Triton 3.6's Blackwell attention example reaches: shared-memory views
carried by loops as tcgen05 operands (their XOR part stays a known zero), and one-column
tensor-memory loads (a single tcgen05.ld register)."""

import numpy as np

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             fence_async_shared, get_tmem_reg_layout,
                                             mbarrier, tcgen05_mma)


@gluon.jit
def carried_operand_kernel(a_ptr, out_ptr, STEPS: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16,
                                              rank=3)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(128, 64), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, 64], tmem_layout, gl.num_warps())
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, blocked))
    a = gl.load(a_ptr + rows[:, None] * 64 + cols[None, :])
    ring = gl.allocate_shared_memory(gl.float16, [2, 128, 64], smem)
    ring.index(0).store(a)
    ring.index(1).store(a)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc = allocate_tensor_memory(gl.float32, [128, 64], tmem_layout)
    view = ring.index(0)
    for i in range(STEPS):  # `view` is carried by the loop (a phi of whole buffers)
        tcgen05_mma(view, ring.index(1).slice(0, 64, dim=0), acc, use_acc=i > 0,
                    mbarriers=[bar])
        mbarrier.wait(bar, i & 1)
        view = ring.index((i + 1) % 2)
    gl.store(out_ptr + rows[:, None] * 64 + cols[None, :],
             gl.convert_layout(acc.load(reg), blocked))


def test_a_loop_carried_view_is_a_tcgen05_operand():
    a = (np.random.default_rng(1).standard_normal((128, 64)) / 8).astype(np.float16)
    out = np.zeros((128, 64), np.float32)
    carried_operand_kernel[(1,)](a, out, STEPS=3)
    want = 3 * (a.astype(np.float32) @ a[:64].astype(np.float32))
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    comp = gluon.compile(carried_operand_kernel, {"a_ptr": "*fp16:16", "out_ptr": "*fp32:16"},
                         {"STEPS": 3}, target="sm_100a", num_warps=4)
    assert "tcgen05.mma.cta_group::1.kind::f16" in comp.asm["ptx"]


@gluon.jit
def column_kernel(x_ptr, out_ptr):
    layout: gl.constexpr = TensorMemoryLayout(block=(128, 1), col_stride=1)
    reg: gl.constexpr = gl.BlockedLayout([1, 1], [32, 1], [gl.num_warps(), 1], [0, 1])
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, reg))
    offs = rows[:, None] + gl.arange(0, 1, layout=gl.SliceLayout(0, reg))[None, :]
    column = allocate_tensor_memory(gl.float32, [128, 1], layout)
    column.store(gl.load(x_ptr + offs))
    gl.store(out_ptr + offs, column.load(reg) + 1.0)


def test_a_one_column_tensor_memory_load():
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    column_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, x + 1)
    ptx = gluon.compile(column_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"}, {},
                        target="sm_100a", num_warps=4).asm["ptx"]
    assert "tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r" in ptx
