"""The converter on tl.dot kernels: a pipelined matmul becomes Gluon with shared-memory rings,
async copies and their waits, and warpgroup_mma (sm_90a) or mma_v2 (sm_80); the converted
kernel compiles and computes what the tile kernel computes."""

import os
import sys

import numpy as np
import pytest

import gluon
from tile.convert import to_gluon_for_signature

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "passes"))

from test_pipelining import SIG, _consts, mm_kernel  # noqa: E402


def _inputs():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 192)).astype(np.float16)
    b = rng.standard_normal((192, 64)).astype(np.float16)
    return a, b


@pytest.mark.parametrize("target,product,wait", [
    ("sm_90a", "warpgroup_mma(", "warpgroup_mma_wait(num_outstanding=1, deps=["),
    ("sm_80", "mma_v2(", "async_copy.wait_group(1)"),
])
def test_pipelined_matmul_converts_to_matching_gluon(load_source, monkeypatch, target, product,
                                                     wait):
    consts = _consts(bm=64, bn=64, bk=64)
    text = to_gluon_for_signature(mm_kernel, SIG, consts, target=target)
    assert "gl.allocate_shared_memory(gl.float16, [3, 64, 64], " in text
    assert "async_copy.async_copy_global_to_shared(" in text and "async_copy.commit_group()" \
        in text
    assert product in text and wait in text
    assert "async_copy.wait_group(0)" in text
    converted = load_source(f"converted_mm_{target}", text)

    a, b = _inputs()
    m, k = a.shape
    n = b.shape[1]
    want = np.zeros((m, n), np.float16)
    monkeypatch.setenv("SC_TARGET", target)
    mm_kernel[(2, 1)](a, b, want, m, n, k, k, 1, n, 1, n, 1, num_warps=4, **{
        key: v for key, v in consts.items() if key not in ("stride_ak", "stride_bn",
                                                           "stride_cn")})
    got = np.zeros((m, n), np.float16)
    converted.mm_kernel[(2, 1)](a, b, got, m, n, k, k, n, n, num_warps=4)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got.astype(np.float64),
                               a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3,
                               atol=2e-2)
    sig = {name: SIG[name] for name in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am",
                                        "stride_bk", "stride_cm")}
    ptx = gluon.compile(converted.mm_kernel, sig, target=target).asm["ptx"]
    assert "cp.async.wait_group 1;" in ptx
    assert ("wgmma.mma_async" if target == "sm_90a" else "mma.sync") in ptx


@pytest.mark.parametrize("target,bm,form", [
    ("sm_90a", 64, "gl.allocate_shared_memory(gl.float16, [64, 64], NVMMA_SHARED0, a)"),
    ("sm_80", 64, "mma_v2("),
    ("sm_90a", 8, "gl.dot_fma("),
])
def test_unpipelined_dots_convert(load_source, monkeypatch, target, bm, form):
    consts = _consts(bm=bm, bn=64, bk=64)
    text = to_gluon_for_signature(mm_kernel, SIG, consts, target=target, num_stages=1)
    assert form in text and "async_copy." not in text
    if target == "sm_90a" and bm == 64:
        assert "fence_async_shared()" in text and "warpgroup_mma(" in text
    converted = load_source(f"converted_mm1_{target}_{bm}", text)
    a, b = _inputs()
    m, k = a.shape
    n = b.shape[1]
    want = np.zeros((m, n), np.float16)
    monkeypatch.setenv("SC_TARGET", target)
    grid = (m // bm, 1)
    mm_kernel[grid](a, b, want, m, n, k, k, 1, n, 1, n, 1, num_warps=4, num_stages=1, **{
        key: v for key, v in consts.items() if key not in ("stride_ak", "stride_bn",
                                                           "stride_cn")})
    got = np.zeros((m, n), np.float16)
    converted.mm_kernel[grid](a, b, got, m, n, k, k, n, n, num_warps=4)
    np.testing.assert_array_equal(got, want)
