"""The CUDA driver, through `cuda.bindings.driver`: GPU detection, device facts, the context,
modules and functions, and small memory helpers for tests that run without torch.

Nothing here runs at import: a machine without a driver imports this module fine and
`has_gpu()` answers False. Every driver result goes through `check`, which turns a CUresult
error into a `CudaError` naming the call, the error name and the driver's description.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from functools import lru_cache

from shared_codegen import config

# Kernels may use up to 48 KB of dynamic shared memory without asking; above that the function
# must opt in through CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (CUDA programming guide,
# "Shared memory" / compute capability tables).
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024


class CudaError(RuntimeError):
    """A driver call returned an error. `.call` names it, `.code` is the CUresult value."""

    def __init__(self, call: str, code: int, name: str, description: str):
        super().__init__(f"{call} failed: {name} ({code}): {description}")
        self.call = call
        self.code = code
        self.name = name


def _driver():
    from cuda.bindings import driver

    return driver


def _error_text(driver, error) -> tuple[str, str]:
    try:
        name_result, name = driver.cuGetErrorName(error)
        text_result, text = driver.cuGetErrorString(error)
        return name.decode(), text.decode()
    except Exception:  # the driver may be gone (shutdown); the enum name still helps
        return getattr(error, "name", str(error)), "no description available"


def check(result, call: str = "CUDA driver call"):
    """Unwrap a cuda-python result tuple `(CUresult, *values)`.

    Returns None, the single value, or the tuple of values; raises CudaError otherwise.
    """
    error, *values = result
    if error != 0:  # CUresult is an int enum; CUDA_SUCCESS == 0
        driver = _driver()
        name, text = _error_text(driver, error)
        raise CudaError(call, int(error), name, text)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


# ---- detection and devices -----------------------------------------------------------------


@lru_cache(maxsize=None)
def _initialize() -> None:
    check(_driver().cuInit(0), "cuInit")


@lru_cache(maxsize=None)
def has_gpu() -> bool:
    """True when a CUDA driver and at least one device answer. Never raises: a missing
    libcuda (cuda.pathfinder's DynamicLibNotFoundError), no device, or any other failure
    means "no GPU". Cached for the process."""
    try:
        _initialize()
        return check(_driver().cuDeviceGetCount(), "cuDeviceGetCount") > 0
    except Exception:
        return False


def require_gpu() -> None:
    if not has_gpu():
        raise CudaError("has_gpu", -1, "NO_GPU",
                        "no CUDA GPU or driver on this machine; set SC_INTERPRET=1 to run kernels "
                        "in the CPU interpreter")


@dataclass(frozen=True)
class Device:
    """Facts about one GPU that compilation and launch decisions need."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_shared_memory_per_block: int        # without opting in (48 KB)
    max_shared_memory_per_block_optin: int  # the most a kernel may request (227 KB on H100)
    max_shared_memory_per_sm: int
    max_threads_per_block: int
    warp_size: int

    @property
    def target(self) -> str:
        from shared_codegen.lowering.backend import target_from_capability

        return target_from_capability(*self.compute_capability)


@lru_cache(maxsize=None)
def get_device(index: int = 0) -> Device:
    require_gpu()
    driver = _driver()
    handle = check(driver.cuDeviceGet(index), "cuDeviceGet")
    attribute = driver.CUdevice_attribute

    def read(name: str) -> int:
        return check(driver.cuDeviceGetAttribute(getattr(attribute, name), handle),
                     f"cuDeviceGetAttribute({name})")

    raw_name = check(driver.cuDeviceGetName(256, handle), "cuDeviceGetName")
    return Device(
        index=index,
        name=raw_name.split(b"\0", 1)[0].decode(errors="replace"),
        compute_capability=(read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                            read("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")),
        sm_count=read("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        max_shared_memory_per_block=read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_memory_per_block_optin=read(
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_shared_memory_per_sm=read("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        max_threads_per_block=read("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        warp_size=read("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
    )


def _torch_if_initialized():
    # Only look at torch if the user imported it: importing torch ourselves costs seconds.
    # is_initialized() alone: torch initializes CUDA only where it is available, and
    # is_available() (asked first before) costs an environment read and a device count on
    # every launch that asks for the current device (tutorials ask several times per call).
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch
    return None


def current_device_index() -> int:
    """torch's current device when torch drives CUDA, else the current context's, else 0."""
    torch = _torch_if_initialized()
    if torch is not None:
        return torch.cuda.current_device()
    driver = _driver()
    context = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(context) == 0:
        return 0
    return int(check(driver.cuCtxGetDevice(), "cuCtxGetDevice"))


# ---- context -------------------------------------------------------------------------------

_retained_contexts: dict[int, object] = {}
_context_lock = threading.Lock()


def ensure_context(device_index: int | None = None):
    """Make sure the calling thread has a current context and return it.

    If one is current (torch made it, or an earlier call), keep it. Otherwise retain the
    device's *primary* context and make it current: that is the context torch and the CUDA
    runtime use, so tensors allocated by torch and our modules live in the same context.
    """
    require_gpu()
    driver = _driver()
    context = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(context) != 0:
        return context
    if device_index is None:
        torch = _torch_if_initialized()
        device_index = torch.cuda.current_device() if torch is not None else 0
    with _context_lock:
        context = _retained_contexts.get(device_index)
        if context is None:
            device = check(driver.cuDeviceGet(device_index), "cuDeviceGet")
            # Retained for the life of the process, never released: modules loaded into it
            # must stay valid as long as kernels can launch.
            context = check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
            _retained_contexts[device_index] = context
    check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    return context


# ---- modules and functions -----------------------------------------------------------------


def load_module(cubin: bytes):
    """Load a cubin image into the current context (made current if needed) -> CUmodule."""
    ensure_context()
    return check(_driver().cuModuleLoadData(cubin), "cuModuleLoadData")


# CUjit_option values (cuda.h), for the ctypes call below.
_JIT_INFO_LOG, _JIT_INFO_LOG_SIZE, _JIT_ERROR_LOG, _JIT_ERROR_LOG_SIZE, _JIT_VERBOSE = \
    3, 4, 5, 6, 12
_JIT_CACHE_MODE, _JIT_CACHE_NONE = 14, 0


def load_ptx_module(ptx: str, cache: bool = True):
    """JIT-compile PTX with the driver's own ptxas and load it -> (CUmodule, info log).

    For kernels whose `setmaxnreg` nvJitLink's ptxas drops (warning C7504: it compiles every
    input as a separately linked unit, and register reallocation needs the whole program);
    the driver JIT compiles the module as a whole program. The driver caches the result on
    disk (CUDA_CACHE_PATH), so only the first load pays the JIT; a load from that cache
    writes no log (`cache=False` skips it).

    libcuda is called through ctypes here: cuda-python's cuModuleLoadDataEx takes the log
    buffers as immutable `bytes` and never hands the driver's logs back."""
    import ctypes

    ensure_context()
    lib = ctypes.CDLL("libcuda.so.1")
    info, errors = ctypes.create_string_buffer(1 << 14), ctypes.create_string_buffer(1 << 14)
    keys = [_JIT_INFO_LOG, _JIT_INFO_LOG_SIZE, _JIT_ERROR_LOG, _JIT_ERROR_LOG_SIZE,
            _JIT_VERBOSE]
    vals = [ctypes.addressof(info), len(info), ctypes.addressof(errors), len(errors), 1]
    if not cache:
        keys.append(_JIT_CACHE_MODE)
        vals.append(_JIT_CACHE_NONE)
    options = (ctypes.c_int * len(keys))(*keys)
    values = (ctypes.c_void_p * len(vals))(*vals)
    handle = ctypes.c_void_p()
    code = lib.cuModuleLoadDataEx(ctypes.byref(handle), ctypes.c_char_p(ptx.encode() + b"\0"),
                                  len(keys), options, values)
    if code:
        log = errors.value.decode(errors="replace")
        check((_driver().CUresult(code),), f"cuModuleLoadDataEx (driver JIT of PTX):\n{log}")
    return _driver().CUmodule(handle.value), info.value.decode(errors="replace")


def unload_module(module) -> None:
    check(_driver().cuModuleUnload(module), "cuModuleUnload")


def get_function(module, name: str):
    """The kernel `name` of a loaded module -> CUfunction."""
    return check(_driver().cuModuleGetFunction(module, name.encode()),
                 f"cuModuleGetFunction({name!r})")


def function_attribute(function, attribute_name: str) -> int:
    """One CU_FUNC_ATTRIBUTE_* of a loaded kernel, e.g. 'CU_FUNC_ATTRIBUTE_NUM_REGS'."""
    driver = _driver()
    return check(driver.cuFuncGetAttribute(getattr(driver.CUfunction_attribute, attribute_name),
                                           function), f"cuFuncGetAttribute({attribute_name})")


def max_active_blocks(function, threads: int, dynamic_shared: int) -> int:
    """How many CTAs of `threads` threads and `dynamic_shared` bytes of dynamic shared memory
    one multiprocessor holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
    return check(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads,
                                                                        dynamic_shared),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor")


def set_dynamic_shared_memory(function, nbytes: int, device_index: int | None = None,
                              kernel_name: str = "kernel") -> None:
    """Let `function` use `nbytes` of dynamic shared memory. Needed only above 48 KB; raises
    OutOfResources, before any launch, when the device cannot give that much (its opt-in limit
    minus the kernel's static shared memory)."""
    if nbytes <= DEFAULT_DYNAMIC_SHARED_LIMIT:
        return
    from shared_codegen.lowering.resources import check_shared_memory

    device = get_device(current_device_index() if device_index is None else device_index)
    static = function_attribute(function, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")
    check_shared_memory(kernel_name, nbytes + static, device.max_shared_memory_per_block_optin,
                        f"bytes a CTA can have on {device.name} (device {device.index})",
                        f"{static} of them static" if static else "")
    driver = _driver()
    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(driver.cuFuncSetAttribute(function, attribute, nbytes),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")


def synchronize() -> None:
    check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")


# ---- memory, for tests that run without torch ---------------------------------------------


def mem_alloc(nbytes: int) -> int:
    """Allocate device memory in the current context; returns the address as an int."""
    ensure_context()
    return int(check(_driver().cuMemAlloc(max(1, nbytes)), "cuMemAlloc"))


def mem_free(address: int) -> None:
    check(_driver().cuMemFree(address), "cuMemFree")


def copy_to_device(address: int, host) -> None:
    """Copy a bytes-like object or a C-contiguous numpy array to device memory."""
    view = memoryview(host).cast("B")
    check(_driver().cuMemcpyHtoD(address, view, view.nbytes), "cuMemcpyHtoD")


def copy_to_host(host, address: int) -> None:
    """Fill a writable bytes-like object or C-contiguous numpy array from device memory."""
    view = memoryview(host).cast("B")
    check(_driver().cuMemcpyDtoH(view, address, view.nbytes), "cuMemcpyDtoH")


class DeviceArray:
    """A minimal device array for tests without torch: owns its memory and exposes
    `__cuda_array_interface__`, so kernels accept it like a tensor."""

    def __init__(self, shape, dtype):
        import numpy as np

        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.address = mem_alloc(self.nbytes)

    @classmethod
    def from_numpy(cls, array) -> "DeviceArray":
        import numpy as np

        array = np.ascontiguousarray(array)
        result = cls(array.shape, array.dtype)
        copy_to_device(result.address, array)
        return result

    def to_numpy(self):
        import numpy as np

        host = np.empty(self.shape, self.dtype)
        copy_to_host(host, self.address)
        return host

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.address, False),
                "version": 3, "strides": None}

    def free(self) -> None:
        if self.address:
            mem_free(self.address)
            self.address = 0


def target_from_device(device_index: int = 0) -> str:
    """The target of the GPU `device_index` (e.g. 'sm_90a' on an H100)."""
    from shared_codegen.lowering.backend import target_from_capability

    major, minor = get_device(device_index).compute_capability
    return target_from_capability(major, minor)


def default_target() -> str:
    """SC_TARGET if set, else the current GPU's target, else sm_90a (what we run on)."""
    override = config.get("SC_TARGET")
    if override:
        return override
    if has_gpu():
        return target_from_device(current_device_index())
    return "sm_90a"
