"""LLVM IR -> PTX -> cubin on the CPU for every target we ship, and (marker gpu) the same cubin
loaded and launched through the runtime."""

import time

import numpy as np
import pytest
from llvmlite import ir

from shared_codegen.lowering import backend
from shared_codegen.lowering.backend import BackendError
from shared_codegen.runtime import driver


def add_kernel_ir(name: str = "add_kernel") -> str:
    """out[i] = x[i] + y[i] for i = blockIdx.x * blockDim.x + threadIdx.x < n, as llvmlite IR."""
    module = ir.Module(name="test_add")
    f32, i32 = ir.FloatType(), ir.IntType(32)
    global_ptr = ir.PointerType(addrspace=1)
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), [global_ptr] * 3 + [i32]), name)
    kernel.calling_convention = "ptx_kernel"

    def special_register(register):
        declaration = ir.Function(module, ir.FunctionType(i32, []),
                                  f"llvm.nvvm.read.ptx.sreg.{register}")
        return builder.call(declaration, [])

    builder = ir.IRBuilder(kernel.append_basic_block("entry"))
    x, y, out, n = kernel.args
    index = builder.add(builder.mul(special_register("ctaid.x"), special_register("ntid.x")),
                        special_register("tid.x"))
    with builder.if_then(builder.icmp_signed("<", index, n)):
        total = builder.fadd(builder.load(builder.gep(x, [index], source_etype=f32), typ=f32),
                             builder.load(builder.gep(y, [index], source_etype=f32), typ=f32))
        builder.store(total, builder.gep(out, [index], source_etype=f32))
    builder.ret_void()
    return str(module)


@pytest.mark.parametrize("target, version", [("sm_90a", "8.0"), ("sm_100a", "8.6"),
                                             ("sm_80", "7.0")])
def test_small_kernel_compiles_to_ptx_and_cubin(target, version):
    ptx = backend.llvm_to_ptx(add_kernel_ir(), target)
    assert f".target {target}" in ptx
    assert f".version {version}" in ptx
    assert ".visible .entry add_kernel(" in ptx
    cubin, info_log = backend.ptx_to_cubin(ptx, target)
    assert cubin[:4] == b"\x7fELF"
    resources = backend.parse_resource_usage(info_log)["add_kernel"]
    assert 0 < resources.registers < 64
    assert resources.spill_stores == resources.spill_loads == 0


def test_o3_pipeline_runs_before_codegen():
    # At O0 the IR reaches codegen as written (separate 32-bit index math and three getelementptr
    # chains); the O3 pipeline folds it, so its PTX is shorter.
    optimized = backend.llvm_to_ptx(add_kernel_ir(), "sm_90a")
    unoptimized = backend.llvm_to_ptx(add_kernel_ir(), "sm_90a", opt_level=0)
    assert optimized.count("\n") < unoptimized.count("\n")


def test_cold_compile_of_a_small_kernel_is_fast():
    text = add_kernel_ir("timed_kernel")
    start = time.perf_counter()
    ptx = backend.llvm_to_ptx(text, "sm_90a")
    middle = time.perf_counter()
    backend.ptx_to_cubin(ptx, "sm_90a")
    end = time.perf_counter()
    print(f"llvm_to_ptx {1e3 * (middle - start):.1f} ms, ptx_to_cubin {1e3 * (end - middle):.1f} ms")
    assert end - start < 0.5


def test_ptx_feature_is_the_lowest_version_naming_the_target():
    assert backend.ptx_feature("sm_80") == "+ptx70"
    assert backend.ptx_feature("sm_90") == "+ptx78"
    assert backend.ptx_feature("sm_90a") == "+ptx80"
    assert backend.ptx_feature("sm_100a") == "+ptx86"
    assert backend.ptx_feature("sm_120") == "+ptx87"
    assert backend.ptx_feature("sm_90a", ptx_version=(8, 5)) == "+ptx85"


def test_ptx_newer_than_the_driver_is_refused():
    with pytest.raises(BackendError, match="newer than"):
        backend.ptx_feature("sm_90a", ptx_version=(9, 1))


def test_unknown_target_names_the_known_ones():
    with pytest.raises(BackendError, match="sm_90"):
        backend.llvm_to_ptx(add_kernel_ir(), "sm_91")


def test_invalid_llvm_ir_raises_backend_error():
    with pytest.raises(BackendError, match="invalid LLVM IR"):
        backend.llvm_to_ptx("define void @f( {", "sm_90a")


def test_ptxas_error_log_is_in_the_exception():
    bad_ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus; }\n"
    with pytest.raises(BackendError, match=r"(?s)nvJitLink failed for sm_90a.*bogus|syntax"):
        backend.ptx_to_cubin(bad_ptx, "sm_90a")


def test_ptxas_options_from_the_environment(monkeypatch):
    monkeypatch.setenv("SC_PTXAS_OPTS", "-warn-spills --maxrregcount=32")
    options = backend.nvjitlink_options("sm_90a", ["-lineinfo"])
    assert options[:3] == ["-arch=sm_90a", "-O3", "-verbose"]
    assert "-Xptxas=-warn-spills" in options and "-Xptxas=--maxrregcount=32" in options
    assert options[-1] == "-lineinfo"
    ptx = backend.llvm_to_ptx(add_kernel_ir(), "sm_90a")
    assert backend.ptx_to_cubin(ptx, "sm_90a")[0][:4] == b"\x7fELF"


def test_resource_usage_parses_both_log_sections():
    log = ("ptxas info    : Function properties for k\n"
           "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers\n"
           "info    : Function properties for 'k':\n"
           "info    : used 40 registers, used 1 barriers, 16 stack, 1024 bytes smem, "
           "556 bytes cmem[0], 8 bytes lmem\n")
    assert backend.parse_resource_usage(log)["k"] == backend.KernelResources(
        registers=40, spill_stores=8, spill_loads=4, stack_frame=16, shared_memory=1024,
        local_memory=8)


@pytest.mark.parametrize("capability, target", [((9, 0), "sm_90a"), ((10, 0), "sm_100a"),
                                                ((8, 0), "sm_80"), ((8, 6), "sm_80"),
                                                ((8, 9), "sm_89"), ((12, 0), "sm_120")])
def test_target_from_capability(capability, target):
    assert backend.target_from_capability(*capability) == target


def test_default_target_honours_sc_target(monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_100a")
    assert driver.default_target() == "sm_100a"


# ---- on the GPU: the cubin loads and runs ----------------------------------------------------


def _compiled_add_kernel():
    from shared_codegen.runtime import driver

    target = driver.target_from_device(driver.current_device_index())
    ptx = backend.llvm_to_ptx(add_kernel_ir(), target)
    cubin, _ = backend.ptx_to_cubin(ptx, target)
    module = driver.load_module(cubin)
    return driver.get_function(module, "add_kernel")


@pytest.mark.gpu
def test_target_from_device_matches_the_device():
    from shared_codegen.runtime import driver

    device = driver.get_device(0)
    assert driver.target_from_device(0) == device.target
    assert device.sm_count > 0 and device.max_shared_memory_per_block_optin >= 48 * 1024


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [None, (2, 1, 1)])
def test_compiled_kernel_runs_without_torch(cluster):
    from shared_codegen.runtime import driver
    from shared_codegen.runtime.launcher import get_binder

    if cluster is not None and driver.get_device(0).compute_capability < (9, 0):
        pytest.skip("thread-block clusters need sm_90+")
    function = _compiled_add_kernel()
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, dtype=np.float32)
    arrays = [driver.DeviceArray.from_numpy(x), driver.DeviceArray.from_numpy(y),
              driver.DeviceArray((n,), np.float32)]
    try:
        binder = get_binder(("ptr", "ptr", "ptr", "i32"))
        grid = ((n + 127) // 128 + 1) // 2 * 2  # even, so a 2-block cluster divides it
        if cluster is None:
            binder.launch(function, (grid,), 4, 0, 0, (*arrays, n))
        else:
            binder.launch_cluster(function, (grid,), cluster, 4, 0, 0, (*arrays, n))
        driver.synchronize()
        np.testing.assert_array_equal(arrays[2].to_numpy(), x + y)
    finally:
        for array in arrays:
            array.free()


@pytest.mark.gpu
def test_compiled_kernel_runs_on_torch_tensors_and_stream():
    torch = pytest.importorskip("torch")
    from shared_codegen.runtime.launcher import current_stream, get_binder

    x = torch.randn(5000, device="cuda")
    y = torch.randn(5000, device="cuda")
    out = torch.empty_like(x)
    function = _compiled_add_kernel()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        assert current_stream() == stream.cuda_stream
        get_binder(("ptr", "ptr", "ptr", "i32")).launch(
            function, (40,), 4, 0, current_stream(), (x, y, out, x.numel()))
    stream.synchronize()
    torch.testing.assert_close(out, x + y)
