"""Triton's host-side names under `tile` (`import tile as triton`): next_power_of_2,
testing, runtime.driver, tools.tensor_descriptor, set_allocator."""

import sys

import numpy as np
import pytest

import tile as triton
from shared_codegen.runtime.driver import has_gpu


@pytest.mark.parametrize("n,expected", [(0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (1024, 1024),
                                        (1025, 2048), (-3, 0)])
def test_next_power_of_2(n, expected):
    assert triton.next_power_of_2(n) == expected


def test_submodules_resolve_as_attributes():
    assert callable(triton.testing.do_bench) and callable(triton.testing.perf_report)
    assert triton.runtime.driver.active.get_current_device() >= 0
    assert triton.language.float16.name == "fp16"
    from tile.runtime import driver
    assert driver is triton.runtime.driver
    assert triton.runtime.errors.OutOfResources is triton.OutOfResources


def test_current_target_follows_sc_target(monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_80")
    target = triton.runtime.driver.active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 80, 32)


def test_current_target_is_worked_out_once_per_device_and_setting(monkeypatch):
    """Tutorials ask on every call (tutorial 06's forward five times), so it must be cheap."""
    from shared_codegen.runtime import driver as cuda
    from tile.runtime import _driver

    asked = []
    real = cuda.default_target
    monkeypatch.setattr(cuda, "default_target", lambda: asked.append(1) or real())
    monkeypatch.setattr(_driver, "_TARGETS", {})
    active = triton.runtime.driver.active
    monkeypatch.setenv("SC_TARGET", "sm_80")
    assert [active.get_current_target().arch for _ in range(3)] == [80, 80, 80]
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    assert active.get_current_target().arch == 90
    monkeypatch.setenv("SC_TARGET", "sm_80")
    assert active.get_current_target().arch == 80
    assert len(asked) == 2


@pytest.mark.skipif(has_gpu(), reason="checks the answer without a GPU")
@pytest.mark.parametrize("target,sms,smem", [("sm_90a", 132, 232448), ("sm_80", 108, 166912),
                                              ("sm_100a", 148, 232448)])
def test_device_properties_without_a_gpu_describe_the_targets_reference_device(
        monkeypatch, target, sms, smem):
    # Tutorial 02 sizes its persistent grid from these; the interpreter runs it unchanged.
    monkeypatch.setenv("SC_TARGET", target)
    props = triton.runtime.driver.active.utils.get_device_properties(0)
    assert (props["multiprocessor_count"], props["max_shared_mem"]) == (sms, smem)
    assert (props["max_num_regs"], props["warpSize"]) == (65536, 32)


@pytest.mark.skipif(has_gpu(), reason="checks the answer without a GPU")
def test_device_properties_without_a_gpu_refuse_what_is_not_modeled(monkeypatch):
    utils = triton.runtime.driver.active.utils
    with pytest.raises(RuntimeError, match=r"get_device_properties: there is no CUDA GPU here; "
                                           r"the interpreter models one device \(index 0\), "
                                           r"got 1"):
        utils.get_device_properties(1)
    monkeypatch.setenv("SC_TARGET", "sm_120")
    with pytest.raises(RuntimeError, match=r"no reference device for target sm_120 to describe "
                                           r"\(known: sm_80, sm_90, sm_100; set SC_TARGET"):
        utils.get_device_properties(0)


def test_device_properties_reject_bad_devices():
    with pytest.raises(TypeError, match="get_device_properties: device must be a device index "
                                        r"\(int >= 0\) or a torch.device, got 'cuda'"):
        triton.runtime.driver.active.utils.get_device_properties("cuda")


def test_set_allocator_installs_a_callable():
    from tile.runtime import get_allocator
    before = get_allocator()
    with pytest.raises(RuntimeError, match="no allocator was set. Use tile.set_allocator"):
        type(before)()(128, 128, None)

    def alloc(size, alignment, stream):
        return np.empty(size, np.int8)

    try:
        triton.set_allocator(alloc)
        assert get_allocator() is alloc
        with pytest.raises(TypeError, match="set_allocator: allocator must be callable"):
            triton.set_allocator(42)
    finally:
        triton.set_allocator(before)


def test_assert_close_defaults_and_failure():
    triton.testing.assert_close(np.float32([1.0, 2.0]), np.float32([1.005, 2.0]))
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        triton.testing.assert_close(np.float32([1.0, 2.0]), np.float32([1.05, 2.0]))
    triton.testing.assert_close(np.float32([1.0]), np.float32([1.05]), atol=0, rtol=0.1)
    with pytest.raises(AssertionError):
        triton.testing.assert_close(np.array([True, False]), np.array([True, True]))


def test_benchmark_statistics():
    from tile.testing import summarize
    times = [4.0, 1.0, 3.0, 2.0]
    assert summarize(times, None, "mean") == 2.5
    assert summarize(times, None, "median") == 2.5
    assert summarize(times, None, "min") == 1.0 and summarize(times, None, "max") == 4.0
    assert summarize(times, None, "all") == times
    assert summarize(times, [0.5, 0.0, 1.0], "mean") == [2.5, 1.0, 4.0]
    assert summarize(times, [0.5], "mean") == 2.5


def test_do_bench_checks_return_mode_first():
    with pytest.raises(ValueError, match="do_bench: return_mode must be one of min, max, mean, "
                                         "median, all, got 'avg'"):
        triton.testing.do_bench(lambda: None, return_mode="avg")


def test_perf_report_runs_every_point_and_prints_a_table(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "pandas", None)  # the table without pandas
    calls = []

    @triton.testing.perf_report(triton.testing.Benchmark(
        x_names=["N"], x_vals=[128, 1024], line_arg="provider", line_vals=["tile", "numpy"],
        line_names=["Tile", "NumPy"], plot_name="copy", args={"scale": 2}))
    def bench(N, provider, scale):
        calls.append((N, provider, scale))
        return N * scale if provider == "tile" else (N / 2, N / 4, N)

    rows = bench.run(print_data=True, return_df=True, save_path=str(tmp_path))
    assert calls == [(128, "tile", 2), (128, "numpy", 2), (1024, "tile", 2),
                     (1024, "numpy", 2)]
    assert rows == [{"N": 128, "Tile": 256, "NumPy": 64.0},
                    {"N": 1024, "Tile": 2048, "NumPy": 512.0}]
    assert capsys.readouterr().out == ("copy:\n"
                                       "   N  Tile  NumPy\n"
                                       " 128   256     64\n"
                                       "1024  2048    512\n")
    assert (tmp_path / "copy.csv").read_text() == "N,Tile,NumPy\n128,256,64.0\n1024,2048,512.0\n"
    assert (tmp_path / "copy.png").exists()
