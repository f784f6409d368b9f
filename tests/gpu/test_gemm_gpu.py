"""The hand-scheduled persistent GEMM (examples/gemm) on the GPU against a float32 product:
edge tiles on every side, several tiles per program, fp16 / bf16 / fp8, B in either major
order, and the register budgets that setmaxnreg must really move."""

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _check(torch, m, n, k, dtype, b_kmajor=False, **kw):
    from gemm import gemm, tolerance

    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn((m, k), device="cuda", generator=gen).to(dtype)
    b = torch.randn((n, k) if b_kmajor else (k, n), device="cuda", generator=gen).to(dtype)
    out_dtype = torch.float16 if dtype.itemsize == 1 else dtype
    c = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype)
    gemm(a, b, c, b_kmajor=b_kmajor, **kw)
    ref = a.float() @ (b.float().t() if b_kmajor else b.float())
    err = float((c.float() - ref).abs().max() / ref.abs().max())
    assert err <= tolerance(str(out_dtype).split(".")[-1], k, fp8_inputs=dtype.itemsize == 1), \
        err


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_gemm_with_edge_tiles_matches_float32(torch, dtype_name):
    # 1000 / 1224 / 520 leave partial tiles in M, N and K; 6 programs walk 8 x 5 tiles each.
    _check(torch, 1000, 1224, 520, getattr(torch, dtype_name), num_programs=6)


def test_gemm_with_k_major_b_matches_float32(torch):
    _check(torch, 512, 768, 1024, torch.float16, b_kmajor=True)


def test_gemm_launched_in_clusters_matches_float32(torch):
    _check(torch, 1024, 1024, 512, torch.float16, cluster=2, num_programs=8)


def test_a_clustered_launch_runs_every_program_and_bad_shapes_are_refused(torch):
    import gluon
    from gluon import language as gl
    from shared_codegen.frontend.errors import ArgumentError

    @gluon.jit
    def ids(x_ptr):
        pid = gl.program_id(0) + gl.program_id(1) * gl.num_programs(0)
        gl.store(x_ptr + pid, pid * 2)

    x = torch.full((24,), -1, device="cuda", dtype=torch.int32)
    ids[(8, 3)](x, cluster_dims=(4, 1, 1))
    assert x.tolist() == [2 * i for i in range(24)]
    with pytest.raises(ArgumentError, match=r"ids: grid \(6, 1, 1\) is not a multiple of "
                                            r"cluster_dims \(4, 1, 1\)"):
        ids[(6,)](x, cluster_dims=(4, 1, 1))


def test_fp8_gemm_matches_float32(torch):
    _check(torch, 768, 512, 1024, torch.float8_e4m3fn, b_kmajor=True)


def test_gemm_at_4096_matches_float32_and_keeps_setmaxnreg(torch):
    from gemm import gemm_kernel

    _check(torch, 4096, 4096, 4096, torch.float16)
    # The code that runs kept setmaxnreg: a kernel with setmaxnreg always loads through the
    # driver JIT (whole program), whatever nvJitLink's log says.
    kernels = [v.kernel for v in gemm_kernel._variants.values()]
    assert kernels
    for kernel in kernels:
        assert "setmaxnreg.dec.sync.aligned.u32 \t24" in kernel.asm["ptx"]
        assert kernel.metadata["driver_jit"]
        assert "C7504" not in kernel.metadata["driver_jit_log"]


def test_the_driver_jit_fallback_keeps_setmaxnreg_and_reports_ptx_errors(torch):
    # What the launcher does when nvJitLink's ptxas drops setmaxnreg (C7504).
    from gemm import gemm_kernel

    from shared_codegen.runtime import driver

    _check(torch, 256, 256, 128, torch.float16)
    kernel = next(iter(gemm_kernel._variants.values())).kernel
    module, log = driver.load_ptx_module(kernel.asm["ptx"], cache=False)
    try:
        assert driver.get_function(module, "gemm_kernel") is not None
        # The driver's info log carries ptxas' warnings only (it is empty here): no C7504.
        assert "C7504" not in log, log
    finally:
        driver.unload_module(module)
    bad = kernel.asm["ptx"].replace("setmaxnreg.dec", "setmaxnreg.bogus")
    with pytest.raises(driver.CudaError, match=r"Unknown modifier '\.bogus'"):
        driver.load_ptx_module(bad, cache=False)

