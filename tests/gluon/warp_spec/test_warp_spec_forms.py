"""`gl.warp_specialize` in the forms upstream kernels use: Triton 3.8's omitted
`worker_num_regs`, and more than one warp-specialized region in a kernel (the workers run
them in turn from a dispatch loop, ops/warp_specialize/lowering.py)."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language._warp_spec import even_register_share


@gluon.jit
def _default_fill(out_ptr, value):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, 32 * gl.num_warps(), layout)
    gl.store(out_ptr + offs, offs * 0 + value)


@gluon.jit
def _worker_fill(out_ptr, value):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    offs = gl.arange(0, 32, layout)
    gl.store(out_ptr + offs, offs + value)


@gluon.jit
def two_regions_kernel(out_ptr):
    # Triton 3.8: worker_num_regs may be left out.
    gl.warp_specialize([(_default_fill, (out_ptr, 1)), (_worker_fill, (out_ptr + 128, 100))],
                       [1])
    # A second region after the first one joined.
    gl.warp_specialize([(_default_fill, (out_ptr + 160, 2)),
                        (_worker_fill, (out_ptr + 288, 200))], [1], [24])


def test_two_regions_run_in_the_interpreter():
    out = np.zeros(320, np.int32)
    two_regions_kernel[(1,)](out)
    np.testing.assert_array_equal(out[:128], 1)
    np.testing.assert_array_equal(out[128:160], 100 + np.arange(32))
    np.testing.assert_array_equal(out[160:288], 2)
    np.testing.assert_array_equal(out[288:], 200 + np.arange(32))


def test_two_regions_compile_to_a_worker_dispatch_loop():
    import re
    compiled = gluon.compile(two_regions_kernel, {"out_ptr": "*i32:16"})
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    # Thread 0 names each call for the waiting workers, then -1 to let them return.
    stores = re.findall(r"st\.shared\.b32\s+\[global_smem\+(\d+)\],\s*(-?\d+);", ptx)
    assert sorted(v for _, v in stores) == ["-1", "0", "1"]
    assert len({slot for slot, _ in stores}) == 1
    # The second call gives its worker warpgroup 24 registers and takes them back after.
    assert "setmaxnreg.dec.sync.aligned.u32 \t24;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32" in ptx


@gluon.jit
def _two_worker_fill(out_ptr, value):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, 128, layout)
    gl.store(out_ptr + offs, offs + value)


@gluon.jit
def uneven_regions_kernel(out_ptr):
    gl.warp_specialize([(_default_fill, (out_ptr, 1)), (_worker_fill, (out_ptr + 128, 100))],
                       [1], [24])
    # More workers than the first call: both calls are planned for this one's launch size.
    gl.warp_specialize([(_default_fill, (out_ptr + 160, 2)),
                        (_two_worker_fill, (out_ptr + 288, 300)),
                        (_worker_fill, (out_ptr + 416, 400))], [4, 1], [40, 24])


def test_calls_with_different_workers_share_one_launch():
    out = np.zeros(448, np.int32)
    uneven_regions_kernel[(1,)](out)
    np.testing.assert_array_equal(out[:128], 1)
    np.testing.assert_array_equal(out[128:160], 100 + np.arange(32))
    np.testing.assert_array_equal(out[160:288], 2)
    np.testing.assert_array_equal(out[288:416], 300 + np.arange(128))
    np.testing.assert_array_equal(out[416:], 400 + np.arange(32))
    compiled = gluon.compile(uneven_regions_kernel, {"out_ptr": "*i32:16"})
    assert compiled.asm["cubin"]
    ptx = compiled.asm["ptx"]
    assert ".maxntid 384" in ptx  # 4 default + 4 + 1 workers, padded to warpgroups: 12 warps
    assert "setmaxnreg.dec.sync.aligned.u32 \t40;" in ptx


@gluon.jit
def omitted_regs_kernel(out_ptr):
    gl.warp_specialize([(_default_fill, (out_ptr, 1)), (_worker_fill, (out_ptr + 128, 100))],
                       [1])


def test_an_omitted_register_count_compiles():
    out = np.zeros(160, np.int32)
    omitted_regs_kernel[(1,)](out)
    np.testing.assert_array_equal(out[128:], 100 + np.arange(32))
    ptx = gluon.compile(omitted_regs_kernel, {"out_ptr": "*i32:16"}).asm["ptx"]
    assert "st.global" in ptx


def test_the_default_register_share_is_what_every_warp_starts_with():
    # 4 + 1 warps pad to 8: 65536 / 256 threads = 256 registers each.
    assert even_register_share(4, [1]) == [256]
    assert even_register_share(8, [4, 4]) == [128, 128]


@gluon.aggregate
class Target:
    ptr: gl.tensor
    value: gl.tensor
    COUNT: gl.constexpr


@gluon.jit
def _default_fill_target(t):
    _default_fill(t.ptr, t.value)


@gluon.jit
def _worker_fill_target(t):
    _worker_fill(t.ptr + t.COUNT, t.value)


@gluon.jit
def aggregate_args_kernel(out_ptr, value):
    gl.warp_specialize([(_default_fill_target, (Target(out_ptr, value, 0),)),
                        (_worker_fill_target, (Target(out_ptr, value + 100, 128),))], [1], [24])


def test_partitions_take_aggregates_as_arguments():
    out = np.zeros(160, np.int32)
    aggregate_args_kernel[(1,)](out, 5)
    np.testing.assert_array_equal(out[:128], 5)
    np.testing.assert_array_equal(out[128:], 105 + np.arange(32))
    gluon.compile(aggregate_args_kernel, {"out_ptr": "*i32:16", "value": "i32"})
