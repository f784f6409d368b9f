"""Blackwell-style kernels whose partitions share tensor memory, with and without the
mbarrier edge that orders them (test_tmem_happens_before.py finds lines by their comments)."""

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout, mbarrier, tcgen05_commit,
                                             tcgen05_mma)

BM, BN, BK = 128, 32, 16


@gluon.jit
def _load2d(ptr, R: gl.constexpr, C: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, R, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    return gl.load(ptr + rows[:, None] * C + cols[None, :])


@gluon.jit
def _store_acc(acc, out_ptr):
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(128, 32), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, 32], tmem_layout, gl.num_warps())
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, reg))
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, reg))
    x = acc.load(reg)  # the epilogue's accumulator read
    gl.store(out_ptr + rows[:, None] * 32 + cols[None, :], x)


@gluon.jit
def _mma_partition(a_smem, b_smem, acc, done, issued, ARRIVE_ONLY: gl.constexpr):
    tcgen05_mma(a_smem, b_smem, acc, use_acc=False)  # the accumulator write
    if ARRIVE_ONLY:
        mbarrier.arrive(issued, count=1)  # says issued, not complete
    else:
        tcgen05_commit(done)  # commits the accumulator write


@gluon.jit
def _epilogue_partition(acc, done, issued, out_ptr, WAIT: gl.constexpr,
                        ARRIVE_ONLY: gl.constexpr):
    if ARRIVE_ONLY:
        mbarrier.wait(issued, 0)
    elif WAIT:
        mbarrier.wait(done, 0)
    _store_acc(acc, out_ptr)


@gluon.jit
def mma_epilogue_kernel(a_ptr, b_ptr, out_ptr, WAIT: gl.constexpr, ARRIVE_ONLY: gl.constexpr):
    """The MMA partition writes the accumulator; the epilogue loads it after waiting on the
    commit (WAIT), on nothing, or on a plain arrive that says the MMA was issued."""
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    a_smem = gl.allocate_shared_memory(gl.float16, [128, 16], gl.NVMMASharedLayout(32, 16),
                                       _load2d(a_ptr, 128, 16, blocked))
    b_smem = gl.allocate_shared_memory(gl.float16, [16, 32], gl.NVMMASharedLayout(64, 16),
                                       _load2d(b_ptr, 16, 32, blocked))
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # done bar
    issued = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # issued bar
    mbarrier.init(done, count=1)
    mbarrier.init(issued, count=1)
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(128, 32), col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [128, 32], tmem_layout)
    gl.warp_specialize([(_epilogue_partition, (acc, done, issued, out_ptr, WAIT, ARRIVE_ONLY)),
                        (_mma_partition, (a_smem, b_smem, acc, done, issued, ARRIVE_ONLY))],
                       [1], [24])
