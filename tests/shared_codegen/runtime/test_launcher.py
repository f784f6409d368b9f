"""The launcher binder: slot layout, packed bytes, and the cuLaunchKernel call it makes,
checked on the CPU with the driver call replaced by a recorder."""

import ctypes
import struct
import time

import pytest

from shared_codegen.runtime import launcher
from shared_codegen.runtime.launcher import Binder, data_ptr_of


class FakeTensor:
    """Quacks like a torch tensor for pointer extraction."""

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class CudaArray:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "typestr": "<f4",
                                         "shape": (1,), "version": 3}


class LaunchRecorder:
    """Replaces cuLaunchKernel; reads each parameter through the kernelParams pointer array
    exactly as the driver would, using the sizes of the kinds."""

    def __init__(self, binder):
        self.sizes = [launcher.PARAMETER_KINDS[kind][1] for kind in binder.param_kinds]
        self.calls = []

    def __call__(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = (ctypes.c_void_p * len(self.sizes)).from_address(params)
        values = [ctypes.string_at(pointers[i], size) for i, size in enumerate(self.sizes)]
        self.calls.append({"function": function, "grid": (gx, gy, gz), "block": (bx, by, bz),
                           "shared": shared, "stream": stream, "extra": extra, "params": values})
        return (0,)


@pytest.fixture
def record(monkeypatch):
    def install(binder):
        recorder = LaunchRecorder(binder)
        monkeypatch.setattr(launcher, "_cuLaunchKernel", recorder)
        return recorder
    return install


def test_four_argument_kernel_packs_pointers_and_int(record):
    binder = Binder(("ptr", "ptr", "ptr", "i32"))
    recorder = record(binder)
    args = (FakeTensor(0x7F0000001000), CudaArray(0x7F0000002000), 0x7F0000003000, 1000)
    binder.launch("fn", (8,), 4, 1024, 77, args)
    call, = recorder.calls
    assert call["function"] == "fn" and call["grid"] == (8, 1, 1) and call["block"] == (128, 1, 1)
    assert call["shared"] == 1024 and call["stream"] == 77 and call["extra"] == 0
    assert call["params"] == [struct.pack("<Q", 0x7F0000001000), struct.pack("<Q", 0x7F0000002000),
                              struct.pack("<Q", 0x7F0000003000), struct.pack("<i", 1000)]


def test_every_scalar_kind_is_packed_at_its_natural_alignment(record):
    kinds = ("i1", "fp64", "i8", "fp16", "bf16", "u32", "i64", "fp32", "u64", "i16", "u8")
    binder = Binder(kinds)
    for offset, kind in zip(binder.offsets, kinds):
        assert offset % launcher.PARAMETER_KINDS[kind][2] == 0
    recorder = record(binder)
    values = (True, 1.5, -3, 0.5, 1.0, 2 ** 32 - 1, -(2 ** 40), 2.0, 2 ** 64 - 1, -2, 255)
    binder.launch("fn", (1, 2, 3), 1, 0, 0, values)
    expected = [b"\x01", struct.pack("<d", 1.5), struct.pack("<b", -3), struct.pack("<e", 0.5),
                b"\x80\x3f", struct.pack("<I", 2 ** 32 - 1), struct.pack("<q", -(2 ** 40)),
                struct.pack("<f", 2.0), struct.pack("<Q", 2 ** 64 - 1), struct.pack("<h", -2),
                b"\xff"]
    assert recorder.calls[0]["params"] == expected
    assert recorder.calls[0]["grid"] == (1, 2, 3)


def test_bf16_rounds_to_nearest_even_and_keeps_nan():
    assert launcher._float_to_bf16_bits(1.0) == 0x3F80
    assert launcher._float_to_bf16_bits(1.00390625) == 0x3F80  # tie -> even
    assert launcher._float_to_bf16_bits(1.01171875) == 0x3F82  # tie -> even (up)
    assert launcher._float_to_bf16_bits(float("inf")) == 0x7F80
    assert launcher._float_to_bf16_bits(float("nan")) & 0x7FC0 == 0x7FC0


def test_tensor_map_slot_is_64_byte_aligned(record):
    binder = Binder(("i32", "tensormap", "ptr"))
    assert binder.offsets == [0, 64, 192]
    assert (binder._base + binder.offsets[1]) % 64 == 0
    recorder = record(binder)
    descriptor = bytes(range(128))
    binder.launch("fn", (1,), 1, 0, 0, (5, descriptor, 0))
    assert recorder.calls[0]["params"][1] == descriptor


def test_empty_grid_launches_nothing(record):
    binder = Binder(("i32",))
    recorder = record(binder)
    binder.launch("fn", (0,), 4, 0, 0, (1,))
    binder.launch("fn", (4, 0), 4, 0, 0, (1,))
    assert recorder.calls == []


def test_kernel_without_parameters(record):
    binder = Binder(())
    recorder = record(binder)
    binder.launch("fn", (1,), 1, 0, 0, ())
    assert recorder.calls[0]["params"] == []


def test_bad_arguments_name_position_and_kind(record):
    binder = Binder(("ptr", "i32"))
    record(binder)
    with pytest.raises(TypeError, match=r"argument 1 \(i32\)"):
        binder.launch("fn", (1,), 1, 0, 0, (0, 2 ** 31))
    with pytest.raises(TypeError, match=r"argument 0 \(ptr\).*cannot pass str"):
        binder.launch("fn", (1,), 1, 0, 0, ("x", 1))
    with pytest.raises(TypeError, match="takes 2 runtime arguments, got 3"):
        binder.launch("fn", (1,), 1, 0, 0, (0, 1, 2))
    with pytest.raises(ValueError, match="unknown kernel parameter kind 'f32'"):
        Binder(("f32",))


def test_a_driver_error_names_the_launch(monkeypatch):
    from cuda.bindings.driver import CUresult

    from shared_codegen.runtime.driver import CudaError

    monkeypatch.setattr(launcher, "_cuLaunchKernel",
                        lambda *args: (CUresult.CUDA_ERROR_INVALID_VALUE,))
    with pytest.raises(CudaError, match=r"cuLaunchKernel\(grid=\(3, 1, 1\), block=\(64, 1, 1\)"):
        Binder(("i32",)).launch("fn", (3,), 2, 0, 0, (1,))


def test_cluster_launch_sets_the_cluster_attribute(monkeypatch):
    from cuda.bindings import driver

    calls = []
    monkeypatch.setattr(launcher, "_cuLaunchKernelEx",
                        lambda config, function, params, extra: calls.append(
                            (config, function, params)) or (0,))
    binder = Binder(("i32",))
    binder.launch_cluster("fn", (4, 2), (2, 1, 1), 4, 256, 0, (9,))
    config, function, params = calls[0]
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (4, 2, 1)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ) == (128, 1, 1)
    assert config.sharedMemBytes == 256 and config.numAttrs == 1
    attribute = config.attrs[0]
    assert attribute.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (attribute.value.clusterDim.x, attribute.value.clusterDim.y) == (2, 1)
    assert params == binder.params_address
    with pytest.raises(ValueError, match="not a multiple of the cluster"):
        binder.launch_cluster("fn", (3,), (2, 1, 1), 4, 0, 0, (9,))


def _attributes(config):
    # The attributes are views into the config's memory: keep the config alive while reading.
    return {attribute.id: attribute for attribute in config.attrs[:config.numAttrs]}


def test_launch_config_sets_programmatic_stream_serialization_for_pdl():
    from cuda.bindings import driver

    ids = driver.CUlaunchAttributeID
    assert launcher.launch_config().numAttrs == 0
    pdl_config = launcher.launch_config(pdl=True)
    pdl = _attributes(pdl_config)
    assert list(pdl) == [ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION]
    assert pdl[ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION] \
        .value.programmaticStreamSerializationAllowed == 1
    both_config = launcher.launch_config((2, 1, 1), pdl=True)
    both = _attributes(both_config)
    assert set(both) == {ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                         ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION}
    assert both[ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION].value.clusterDim.x == 2


@pytest.fixture
def record_ex(monkeypatch):
    """The cuLaunchKernelEx calls: (attribute ids, grid, block, shared, stream)."""
    calls = []

    def launch_ex(config, function, params, extra):
        calls.append((list(_attributes(config)),
                      (config.gridDimX, config.gridDimY, config.gridDimZ),
                      config.blockDimX, config.sharedMemBytes, config.hStream))
        return (0,)

    monkeypatch.setattr(launcher, "_cuLaunchKernelEx", launch_ex)
    return calls


def test_pdl_launch_goes_through_cuLaunchKernelEx_with_the_attribute(record, record_ex):
    from cuda.bindings import driver

    pdl_id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    binder = Binder(("i32",))
    plain = record(binder)
    for _ in range(3):  # the cached config keeps its attribute launch after launch
        binder.launch_pdl("fn", (5, 2), 4, 512, 0, (1,))
    binder.launch_pdl("fn", (0,), 4, 512, 0, (1,))  # an empty grid launches nothing
    assert plain.calls == [] and len(record_ex) == 3
    attributes, grid, block_x, shared, _ = record_ex[-1]
    assert attributes == [pdl_id] and grid == (5, 2, 1) and block_x == 128
    assert shared == 512
    binder.launch("fn", (1,), 4, 0, 0, (1,))  # a plain launch stays cuLaunchKernel
    assert len(plain.calls) == 1 and len(record_ex) == 3


def test_a_cluster_launch_with_pdl_carries_both_attributes(record_ex):
    from cuda.bindings import driver

    ids = driver.CUlaunchAttributeID
    binder = Binder(("i32",))
    binder.launch_cluster("fn", (4,), (2, 1, 1), 4, 0, 0, (9,), pdl=True)
    binder.launch_cluster("fn", (4,), (2, 1, 1), 4, 0, 0, (9,))
    assert set(record_ex[0][0]) == {ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                    ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION}
    assert set(record_ex[1][0]) == {ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION}


def test_data_ptr_of_every_argument_form():
    assert data_ptr_of(FakeTensor(0x10)) == 0x10
    assert data_ptr_of(CudaArray(0x20)) == 0x20
    assert data_ptr_of(0x30) == 0x30
    assert data_ptr_of(None) == 0
    with pytest.raises(TypeError, match="cannot pass float"):
        data_ptr_of(1.5)


def test_stream_is_zero_without_torch(monkeypatch):
    import sys

    monkeypatch.setattr(launcher, "_stream_getter", None)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert launcher.current_stream() == 0


def test_python_side_of_a_launch_is_cheap(monkeypatch):
    # The budget for our whole launch path is 8 us next to a 3.4 us raw cuLaunchKernel; the
    # binder's share (everything but the driver call) should stay near 1 us.
    def fake_launch(*args):
        return (0,)

    monkeypatch.setattr(launcher, "_cuLaunchKernel", fake_launch)
    binder = Binder(("ptr", "ptr", "ptr", "i32"))
    args = (FakeTensor(0x1000), FakeTensor(0x2000), FakeTensor(0x3000), 1024)
    grid = (1,)
    binder.launch("fn", grid, 4, 0, 0, args)
    rounds = 20000
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            binder.launch("fn", grid, 4, 0, 0, args)
        best = min(best, (time.perf_counter() - start) / rounds)
    print(f"binder launch (fake driver call): {best * 1e6:.2f} us")
    assert best < 4e-6  # loose: shared CI machines are noisy
