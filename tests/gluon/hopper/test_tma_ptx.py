"""mbarrier / TMA / fence lowering: the PTX instructions (PTX ISA 9.7.13.15, 9.7.9.27), the
grid-constant tensor-map parameters, and cubins for sm_90a built on the CPU."""

import re

import numpy as np
import pytest
from hopper_kernels import (arange2d, arrivals_kernel, desc, tma_ring_kernel,
                            tma_round_trip_kernel, tma_store_kernel, tma_two_waits_kernel)

import gluon


def _compile(kernel, signature, constexprs=None):
    compiled = gluon.compile(kernel, signature, constexprs or {}, target="sm_90a")
    assert len(compiled.asm["cubin"]) > 0  # nvJitLink assembled it for sm_90a
    return compiled


@pytest.fixture(scope="module")
def round_trip():
    d = desc(arange2d(128, 128), [64, 64])
    return _compile(tma_round_trip_kernel, {"in_desc": d, "out_ptr": "*fp16:16",
                                            "out_stride": "i32"},
                    {"EXPECT": 8192, "READ_EARLY": False})


def test_descriptors_are_grid_constant_parameters_map_first(round_trip):
    ptx = round_trip.asm["ptx"]
    # The 128-byte map, then base, shape, strides and fill (8 bytes each; rank 2).
    assert re.search(r"\.param \.align 64 \.b8 tma_round_trip_kernel_param_0\[176\]", ptx)
    # grid_constant: TMA reads the parameter in place through a generic address.
    assert "cvta.param.u64" in ptx
    assert round_trip.param_kinds == ("tensordesc2", "ptr", "i32")


def test_the_load_path_uses_mbarriers_and_a_bulk_tensor_copy(round_trip):
    ptx = round_trip.asm["ptx"]
    for text in ("mbarrier.init.shared::cta.b64", "fence.proxy.async.shared::cta",
                 "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%rd", "], 8192;",
                 "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                 "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.inval.shared::cta.b64"):
        assert text in ptx, text
    # One thread issues; the copy names two coordinates, innermost first.
    assert re.search(r"@%p\d+ cp\.async\.bulk\.tensor\.2d\S* \[%rd\d+\], \[%rd\d+, "
                     r"\{%r\d+, %r\d+\}\], \[%rd\d+\];", ptx)


def test_init_is_ordered_before_other_threads_wait_by_a_barrier(round_trip):
    ptx = round_trip.asm["ptx"]
    init = ptx.index("mbarrier.init")
    assert "bar.sync" in ptx[init:ptx.index("mbarrier.try_wait")]


def test_two_wait_loops_in_one_kernel_assemble():
    d = desc(arange2d(64, 64), [64, 64])
    ptx = _compile(tma_two_waits_kernel, {"a_desc": d, "b_desc": d, "out_desc": d}).asm["ptx"]
    assert ptx.count("mbarrier.try_wait.parity") == 2
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    assert "cp.async.bulk.commit_group" in ptx and "cp.async.bulk.wait_group.read 0" in ptx


def test_a_wide_block_issues_one_copy_per_swizzle_width():
    d = desc(arange2d(64, 256), [32, 256])
    ptx = _compile(tma_round_trip_kernel, {"in_desc": d, "out_ptr": "*fp16:16",
                                           "out_stride": "i32"},
                   {"EXPECT": 32 * 256 * 2, "READ_EARLY": False}).asm["ptx"]
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster") == 4


def test_the_ring_pipeline_compiles_with_runtime_phases():
    d = desc(arange2d(64 * 4, 64), [64, 64])
    ptx = _compile(tma_ring_kernel, {"in_desc": d, "out_desc": d},
                   {"NUM_TILES": 4, "STAGES": 2}).asm["ptx"]
    assert "mbarrier.try_wait.parity" in ptx and "fence.proxy.async.shared::cta" in ptx


def test_the_store_kernel_and_an_arrive_compile():
    d = desc(np.zeros((64, 64), np.float16), [64, 64])
    _compile(tma_store_kernel, {"out_desc": d, "M0": "i32", "N0": "i32"},
             {"OVERWRITE_EARLY": False})
    ptx = _compile(arrivals_kernel, {"out_ptr": "*i32"},
                   {"COUNT": 2, "ARRIVALS": 2, "PHASE": 0}).asm["ptx"]
    assert ptx.count("mbarrier.arrive.shared::cta.b64 _, [%rd") == 2
