"""`driver` (Triton 3.6's `triton.runtime.driver`): `driver.active` answers what tutorials and
benchmarks ask of the current GPU.

    driver.active.get_current_device()                 # device index (int)
    driver.active.get_current_stream()                 # raw CUstream (int)
    driver.active.get_current_target()                 # GPUTarget("cuda", 90, 32)
    driver.active.get_active_torch_device()            # torch.device("cuda", index)
    driver.active.utils.get_device_properties(index)   # {"multiprocessor_count": 132, ...}
    driver.active.get_benchmarker()                    # tile.testing.do_bench

Without a GPU, kernels run in the CPU interpreter; then the current device is 0, the torch
device is "cpu" (where the interpreter wants its tensors), the target is the one `tile.compile`
uses by default (SC_TARGET, else sm_90a), and device properties describe the reference GPU of
that target (an H100 SXM for sm_90a, an A100 SXM for sm_80, a B200 for sm_100a), so host code
that sizes its launch from them (tutorial 02's occupancy) runs unchanged in the interpreter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Union

from shared_codegen.runtime import driver as cuda

__all__ = ["driver", "GPUTarget", "CudaDriver", "CudaUtils"]

# cuDeviceGetAttribute names of the keys Triton's CUDA utils return.
_PROPERTY_ATTRIBUTES = {
    "max_shared_mem": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "max_num_regs": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK",
    "multiprocessor_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "warpSize": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
    "sm_clock_rate": "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
    "mem_clock_rate": "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE",
    "mem_bus_width": "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH",
}


@dataclass(frozen=True)
class GPUTarget:
    """Triton's `GPUTarget`: backend name, architecture (90 for sm_90a) and warp size."""

    backend: str
    arch: Union[int, str]
    warp_size: int


# get_current_target's answers: {(device index, SC_TARGET or None): GPUTarget}.
_TARGETS: Dict[tuple, GPUTarget] = {}


# Without a GPU: the reference device of each target the interpreter stands in for, with the
# numbers its CUDA driver reports (the keys are Triton's).
_MODELED_DEVICES = {
    80: {"max_shared_mem": 166912, "max_num_regs": 65536, "multiprocessor_count": 108,
         "warpSize": 32, "sm_clock_rate": 1410000, "mem_clock_rate": 1215000,
         "mem_bus_width": 5120},
    90: {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132,
         "warpSize": 32, "sm_clock_rate": 1980000, "mem_clock_rate": 2619000,
         "mem_bus_width": 5120},
    100: {"max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 148,
          "warpSize": 32, "sm_clock_rate": 1965000, "mem_clock_rate": 3996000,
          "mem_bus_width": 8192},
}


def _modeled_device_properties() -> dict:
    from shared_codegen.lowering.backend import parse_target
    target = cuda.default_target()
    arch, _suffix = parse_target(target)
    model = _MODELED_DEVICES.get(arch)
    if model is None:
        known = ", ".join(f"sm_{a}" for a in sorted(_MODELED_DEVICES))
        raise RuntimeError(f"get_device_properties: there is no CUDA GPU here and no reference "
                           f"device for target {target} to describe (known: {known}; set "
                           f"SC_TARGET to one of them)")
    return dict(model)


class CudaUtils:
    def get_device_properties(self, device) -> dict:
        """Triton's keys: max_shared_mem (opt-in bytes per block), max_num_regs (per
        block), multiprocessor_count, warpSize, sm_clock_rate and mem_clock_rate (kHz),
        mem_bus_width (bits). Without a GPU: the reference device of the default target."""
        index = getattr(device, "index", device)
        if index is None:
            index = cuda.current_device_index() if cuda.has_gpu() else 0
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise TypeError(f"get_device_properties: device must be a device index (int >= 0) "
                            f"or a torch.device, got {device!r}")
        if not cuda.has_gpu():
            if index != 0:
                raise RuntimeError(f"get_device_properties: there is no CUDA GPU here; the "
                                   f"interpreter models one device (index 0), got {index}")
            return _modeled_device_properties()
        api = cuda._driver()
        handle = cuda.check(api.cuDeviceGet(index), f"cuDeviceGet({index})")
        return {key: cuda.check(api.cuDeviceGetAttribute(getattr(api.CUdevice_attribute, name),
                                                         handle),
                                f"cuDeviceGetAttribute({name})")
                for key, name in _PROPERTY_ATTRIBUTES.items()}


class CudaDriver:
    """The one driver: NVIDIA GPUs through the CUDA driver API, else the CPU interpreter."""

    backend = "cuda"

    def __init__(self):
        self.utils = CudaUtils()

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_device(self) -> int:
        return cuda.current_device_index() if cuda.has_gpu() else 0

    def set_current_device(self, device: int) -> None:
        cuda.ensure_context(int(device))

    def get_current_stream(self, device=None) -> int:
        from shared_codegen.runtime.launcher import current_stream
        return current_stream()

    def get_current_target(self) -> GPUTarget:
        # Tutorials ask on every call (tutorial 06's forward: five times, through is_cuda()
        # and is_hopper()), so the answer is kept per device and SC_TARGET setting.
        key = (self.get_current_device(), os.environ.get("SC_TARGET"))
        target = _TARGETS.get(key)
        if target is None:
            from shared_codegen.lowering.backend import parse_target
            arch, _suffix = parse_target(cuda.default_target())
            target = _TARGETS[key] = GPUTarget("cuda", arch, 32)
        return target

    def get_active_torch_device(self):
        import torch
        if cuda.has_gpu():
            return torch.device("cuda", self.get_current_device())
        return torch.device("cpu")

    def get_device_interface(self):
        import torch
        return torch.cuda

    def get_benchmarker(self):
        from tile.testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32,
                           device=self.get_active_torch_device())

    def clear_cache(self, cache) -> None:
        cache.zero_()


class DriverConfig:
    """`driver.active` is the driver in use; `driver.default` the one picked at start."""

    def __init__(self):
        self.default = CudaDriver()
        self._active = None

    @property
    def active(self):
        return self._active or self.default

    def set_active(self, driver) -> None:
        self._active = driver

    def reset_active(self) -> None:
        self._active = None


driver = DriverConfig()
