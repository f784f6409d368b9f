"""`tma.async_prefetch` (`cp.async.bulk.prefetch.tensor`: a block into L2): a kernel that
prefetches the block it then loads gives the same result in the interpreter, the PTX for
sm_90a has one predicated prefetch per box (through ptxas when installed), and the errors
name the argument."""

import shutil

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import mbarrier, tma
from gluon.nvidia.hopper import TensorDescriptor
from tools import static_report


@gluon.jit
def prefetch_then_copy_kernel(in_desc, out_desc, PRED: gl.constexpr):
    """Program p prefetches block p + 1 of the input (past the end for the last: the TMA
    unit skips what lies outside the tensor), then copies block p through shared memory."""
    BM: gl.constexpr = in_desc.block_type.shape[0]
    p = gl.program_id(0)
    if PRED:
        tma.async_prefetch(in_desc, [(p + 1) * BM, 0], pred=p + 1 < gl.num_programs(0))
    else:
        tma.async_prefetch(in_desc, [(p + 1) * BM, 0])
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [p * BM, 0], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    tma.async_copy_shared_to_global(out_desc, [p * BM, 0], smem)
    tma.store_wait(0)


def _desc(x, block):
    return TensorDescriptor.from_tensor(x, block, gl.NVMMASharedLayout(128, 16, rank=2))


@pytest.mark.parametrize("pred", [False, True])
def test_a_prefetched_block_loads_unchanged(pred):
    x = np.random.default_rng(0).standard_normal((48, 64)).astype(np.float16)
    out = np.zeros_like(x)
    prefetch_then_copy_kernel[(3,)](_desc(x, [16, 64]), _desc(out, [16, 64]), pred,
                                    num_warps=4)
    np.testing.assert_array_equal(out, x)


def test_one_prefetch_per_box_issued_by_thread_zero():
    x = np.zeros((48, 128), np.float16)
    ptx = gluon.compile(prefetch_then_copy_kernel,
                        {"in_desc": _desc(x, [16, 128]), "out_desc": _desc(x, [16, 128])},
                        {"PRED": True}, target="sm_90a", num_warps=4).asm["ptx"]
    # 128-byte swizzle: a 128-column fp16 block is two boxes of 64 columns.
    prefetches = [line for line in ptx.splitlines()
                  if "cp.async.bulk.prefetch.tensor.2d.L2.global.tile" in line]
    assert len(prefetches) == 2, prefetches
    assert all(line.strip().startswith("@") for line in prefetches), prefetches
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas (CUDA toolkit) to assemble the prefetch")
    static_report.whole_program_cubin(ptx, "sm_90a")  # raises if ptxas refuses it


@gluon.jit
def bad_prefetch_kernel(in_desc, x_ptr):
    tma.async_prefetch(in_desc, [0])


@gluon.jit
def not_a_descriptor_kernel(in_desc, x_ptr):
    tma.async_prefetch(x_ptr, [0, 0])


def test_the_errors_name_the_argument():
    x = np.zeros((16, 64), np.float16)
    with pytest.raises(Exception, match=r"tma\.async_prefetch: the descriptor has rank 2 but "
                                        r"coord has 1 entries"):
        bad_prefetch_kernel[(1,)](_desc(x, [16, 64]), x, num_warps=4)
    with pytest.raises(Exception, match=r"tma\.async_prefetch: tensor_desc must be a tensor "
                                        r"descriptor kernel argument"):
        not_a_descriptor_kernel[(1,)](_desc(x, [16, 64]), x, num_warps=4)
