"""The driver wrapper on any machine: detection never raises, errors name the call."""

import pytest

from shared_codegen.runtime import driver


def test_has_gpu_answers_a_bool_without_raising():
    assert driver.has_gpu() in (True, False)
    assert driver.has_gpu() is driver.has_gpu()  # cached


def test_has_gpu_is_false_when_the_driver_library_is_missing(monkeypatch):
    def missing_library():
        raise OSError("libcuda.so.1: cannot open shared object file")

    driver.has_gpu.cache_clear()
    driver._initialize.cache_clear()
    monkeypatch.setattr(driver, "_driver", missing_library)
    try:
        assert driver.has_gpu() is False
    finally:
        driver.has_gpu.cache_clear()
        driver._initialize.cache_clear()


def test_check_unwraps_values_and_names_failing_calls():
    from cuda.bindings.driver import CUresult

    assert driver.check((CUresult.CUDA_SUCCESS,)) is None
    assert driver.check((CUresult.CUDA_SUCCESS, 7)) == 7
    assert driver.check((CUresult.CUDA_SUCCESS, 7, 8)) == (7, 8)
    with pytest.raises(driver.CudaError, match="cuModuleLoadData failed") as info:
        driver.check((CUresult.CUDA_ERROR_INVALID_IMAGE,), "cuModuleLoadData")
    assert info.value.code == int(CUresult.CUDA_ERROR_INVALID_IMAGE)
    assert "INVALID_IMAGE" in str(info.value)


@pytest.mark.gpu
def test_device_facts():
    device = driver.get_device(0)
    assert device.warp_size == 32
    assert device.compute_capability >= (8, 0)
    assert device.max_shared_memory_per_block == 48 * 1024
    assert device.target.startswith("sm_")


@pytest.mark.gpu
def test_context_and_memory_round_trip():
    import numpy as np

    driver.ensure_context()
    array = driver.DeviceArray.from_numpy(np.arange(100, dtype=np.int32))
    try:
        np.testing.assert_array_equal(array.to_numpy(), np.arange(100, dtype=np.int32))
    finally:
        array.free()


@pytest.mark.gpu
def test_loading_garbage_names_the_call():
    with pytest.raises(driver.CudaError, match="cuModuleLoadData"):
        driver.load_module(b"\x7fELF not really a cubin" + bytes(64))
