"""`desc.shape` / `desc.strides` of descriptors a Gluon kernel builds with
`tma.make_tensor_descriptor` (the values it was made from, in the interpreter and compiled),
NaN padding seen through TMA loads, and the refusal for loop-carried ones in compiled code.
(test_tma_make_descriptor.py covers the copies, errors and PTX of the builtin itself.)"""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)


@gluon.jit
def device_desc_copy_kernel(x_ptr, y_ptr, M, N, stride_x, stride_y, out_shape_ptr,
                            BM: gl.constexpr, BN: gl.constexpr, PADDING: gl.constexpr):
    """Copy x into y one [BM, BN] block per program through two kernel-built descriptors;
    program 0 also writes back the descriptors' shape and strides as the kernel sees them,
    and with PADDING="nan" every program counts the NaNs it read into out_shape_ptr[4]."""
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BM, BN], gl.float16)
    x_desc = tma.make_tensor_descriptor(x_ptr, [M, N], [stride_x, 1], [BM, BN], layout,
                                        padding_option=PADDING)
    y_desc = tma.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[stride_y, 1],
                                        block_shape=[BM, BN], layout=layout)
    m = gl.program_id(0) * BM
    n = gl.program_id(1) * BN
    smem = gl.allocate_shared_memory(gl.float16, [BM, BN], layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, x_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(x_desc, [m, n], bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    if PADDING == "nan":  # out-of-bounds elements read NaN: count them
        blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        x = smem.load(blocked)
        gl.atomic_add(out_shape_ptr + 4, gl.sum(gl.sum((x != x).to(gl.int64), 1), 0))
    fence_async_shared()
    tma.async_copy_shared_to_global(y_desc, [m, n], smem)
    tma.store_wait(0)
    if gl.program_id(0) + gl.program_id(1) == 0:
        gl.store(out_shape_ptr + 0, x_desc.shape[0].to(gl.int64))
        gl.store(out_shape_ptr + 1, x_desc.shape[1].to(gl.int64))
        gl.store(out_shape_ptr + 2, x_desc.strides[0])
        gl.store(out_shape_ptr + 3, x_desc.strides[1])


def _run(M, N, padding="zero", BM=64, BN=64):
    x = (np.arange(M * 72) % 1013).reshape(M, 72).astype(np.float16)[:, :N]
    y = np.full((M, 64 * 2), 7, np.float16)[:, :N]
    dims = np.zeros(5, np.int64)
    grid = (-(-M // BM), -(-N // BN))
    device_desc_copy_kernel[grid](x, y, M, N, x.strides[0] // 2, y.strides[0] // 2, dims,
                                  BM=BM, BN=BN, PADDING=padding)
    return x, y, dims


def test_a_kernel_built_descriptor_copies_like_a_host_one_in_the_interpreter():
    x, y, dims = _run(100, 72)
    np.testing.assert_array_equal(y, x)  # the partial blocks' stores are clipped
    assert dims.tolist() == [100, 72, 72, 1, 0]


def test_padding_nan_reads_nan_outside_the_tensor():
    x, y, dims = _run(100, 72, padding="nan")
    np.testing.assert_array_equal(y, x)
    assert dims[4] == 4 * 64 * 64 - 100 * 72  # every out-of-bounds element of the 4 blocks


def _compile(target="sm_90a"):
    return gluon.compile(device_desc_copy_kernel,
                         {"x_ptr": "*fp16:16", "y_ptr": "*fp16:16", "M": "i32", "N": "i32",
                          "stride_x": "i64", "stride_y": "i64", "out_shape_ptr": "*i64"},
                         {"BM": 64, "BN": 64, "PADDING": "zero"}, target=target)


def test_the_map_is_written_in_global_scratch_and_fenced_for_tma():
    compiled = _compile()
    ptx = compiled.asm["ptx"]
    assert ptx.count("tensormap.replace.tile.global_address") == 2  # one map per descriptor
    assert "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%rd" in ptx
    assert "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu" in ptx
    assert "fence.proxy.tensormap::generic.acquire.gpu" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    assert compiled.metadata["global_scratch_bytes"] == 256  # two 128-byte maps
    assert len(compiled.asm["cubin"]) > 0


def test_shape_of_a_loop_carried_kernel_built_descriptor_is_refused_when_compiled():
    @gluon.jit
    def carried(x_ptr, out_ptr, M, n):
        desc = tma.make_tensor_descriptor(x_ptr, [M, 64], [64, 1], [64, 64], LAYOUT)
        for i in range(n):
            gl.store(out_ptr + i, desc.shape[0])  # the loop-carried value
            desc = tma.make_tensor_descriptor(x_ptr, [M - 1, 64], [64, 1], [64, 64], LAYOUT)

    with pytest.raises(gluon.CompilationError, match=r"desc\.shape / desc\.strides of a "
                       r"descriptor carried through a loop or branch is not supported in a "
                       r"kernel that also builds descriptors"):
        gluon.compile(carried, {"x_ptr": "*fp16:16", "out_ptr": "*i32", "M": "i32", "n": "i32"})
    out = np.zeros(2, np.int32)
    carried[(1,)](np.zeros((8, 64), np.float16), out, 8, 2)  # the interpreter knows the map
    assert out.tolist() == [8, 7]
