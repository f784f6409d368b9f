"""Kernel launch: a binder per kernel signature packs Python arguments straight into
preallocated parameter storage and calls cuLaunchKernel.

cuLaunchKernel takes `void **kernelParams`: an array of N pointers, each pointing at the bytes of
one parameter. A `Binder` allocates, once, one byte buffer holding every parameter slot at its
natural alignment and the pointer array aimed at those slots; a launch then only writes the
slots (one `struct.pack_into` of a precompiled layout) and passes the array's address as an
int, so cuda-python uses it as-is. Nothing is constructed per call except the packed values.

    binder = get_binder(("ptr", "ptr", "ptr", "i32"))
    binder.launch(function, (blocks,), num_warps=4, shared_mem_bytes=0,
                  stream=current_stream(), arg_values=(x, y, out, n))

Launches with attributes (thread-block clusters, programmatic dependent launch) go through
cuLaunchKernelEx with a `CUlaunchConfig` that `launch_config` builds, once per binder and
attribute set.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
from functools import lru_cache

WARP_SIZE = 32


def _float_to_bf16_bits(value: float) -> int:
    # Round to nearest even on the upper 16 bits of the fp32 pattern, as __float2bfloat16 does;
    # NaN stays a quiet NaN instead of rounding into infinity.
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
        return (bits >> 16) | 0x0040
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _tensor_map_bytes(value) -> bytes:
    # A CUtensorMap is an opaque 128-byte, 64-byte-aligned struct passed by value
    # (`.param .align 64 .b8 p[128]` with nvvm.grid_constant). Host tensor descriptors
    # (gluon.nvidia.hopper.TensorDescriptor) carry their encoded bytes as `tensor_map`.
    if not isinstance(value, bytes):
        value = getattr(value, "tensor_map", value)
    data = bytes(memoryview(value).cast("B")) if not isinstance(value, bytes) else value
    if len(data) != 128:
        raise ValueError(f"a tensor map parameter must be 128 bytes, got {len(data)}")
    return data


def _tensor_desc_bytes(value) -> bytes:
    # Host tensor descriptors give their whole parameter struct (`param_bytes()`).
    if isinstance(value, bytes):
        return value
    return value.param_bytes()


# kind -> (struct format char, size, alignment, converter name or None). Sizes and alignments
# are those of the PTX `.param` the NVPTX backend declares for the LLVM type (i1 becomes .u8,
# half / bfloat become `.align 2 .b8 [2]`).
PARAMETER_KINDS = {
    "ptr": ("Q", 8, 8, "data_ptr_of"),
    "i1": ("?", 1, 1, None),
    "i8": ("b", 1, 1, None),
    "u8": ("B", 1, 1, None),
    "i16": ("h", 2, 2, None),
    "u16": ("H", 2, 2, None),
    "i32": ("i", 4, 4, None),
    "u32": ("I", 4, 4, None),
    "i64": ("q", 8, 8, None),
    "u64": ("Q", 8, 8, None),
    "fp16": ("e", 2, 2, None),
    "bf16": ("H", 2, 2, "_float_to_bf16_bits"),
    "fp32": ("f", 4, 4, None),
    "fp64": ("d", 8, 8, None),
    "tensormap": ("128s", 128, 64, "_tensor_map_bytes"),
    # A descriptor parameter of rank r: map, base, shape, strides, fill
    # (types.TensorDescriptorType.param_bytes).
    **{f"tensordesc{r}": (f"{144 + 16 * r}s", 144 + 16 * r, 64, "_tensor_desc_bytes")
       for r in range(1, 6)},
}


class PackError(TypeError):
    """A launch argument the binder cannot pack. The binder knows positions, not names:
    the launch path turns this into an ArgumentError naming the kernel and the parameter
    (frontend/launch.py `pack_error`)."""

    def __init__(self, index: int, kind: str, value, reason: str):
        self.index, self.kind, self.value, self.reason = index, kind, value, reason
        super().__init__(f"argument {index} ({kind}): cannot pass {value!r}: {reason}")


# ---- argument extraction -------------------------------------------------------------------


def _pointer_of_int(arg) -> int:
    return arg


def _pointer_of_none(arg) -> int:
    return 0


def _pointer_of_cuda_array(arg) -> int:
    return arg.__cuda_array_interface__["data"][0]


def _pointer_of_data_ptr(arg) -> int:
    return arg.data_ptr()


# type -> function giving the device address; filled per type on first sight so a launch costs
# one dict lookup per pointer argument.
_POINTER_GETTERS: dict[type, object] = {int: _pointer_of_int, type(None): _pointer_of_none}


def _resolve_pointer_getter(arg):
    kind = type(arg)
    if isinstance(arg, int) and not isinstance(arg, bool):
        getter = _pointer_of_int
    elif callable(getattr(arg, "data_ptr", None)):  # torch tensors, and look-alikes
        getter = getattr(kind, "data_ptr", None)
        if getter is None or not callable(getter):
            getter = _pointer_of_data_ptr
    elif hasattr(arg, "__cuda_array_interface__"):
        getter = _pointer_of_cuda_array
    else:
        raise TypeError(f"cannot pass {kind.__name__} as a pointer argument: expected a torch "
                        f"tensor, an object with __cuda_array_interface__, or an int address")
    _POINTER_GETTERS[kind] = getter
    return getter


def data_ptr_of(arg) -> int:
    """The device address behind a kernel pointer argument: a torch tensor (`data_ptr()`), an
    object with `__cuda_array_interface__` (`['data'][0]`), an int address, or None (0)."""
    getter = _POINTER_GETTERS.get(type(arg))
    if getter is None:
        getter = _resolve_pointer_getter(arg)
    return getter(arg)


_stream_getter = None


def _resolve_stream_getter():
    global _stream_getter
    torch = sys.modules.get("torch")  # never import torch ourselves: it costs seconds
    if torch is None:
        return None
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    get_device = getattr(torch._C, "_cuda_getDevice", None)
    if raw_stream is not None and get_device is not None:
        # The private entry points skip building a torch.cuda.Stream object (~1 µs) per launch.
        _stream_getter = lambda: raw_stream(get_device())  # noqa: E731
    else:
        _stream_getter = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    return _stream_getter


def current_stream() -> int:
    """The raw CUstream to launch on: torch's current stream when torch is imported, else the
    legacy default stream (0)."""
    getter = _stream_getter or _resolve_stream_getter()
    return 0 if getter is None else getter()


# ---- the driver entry points (module globals so tests can replace them) -------------------

_cuLaunchKernel = None
_cuLaunchKernelEx = None


def _resolve_driver():
    global _cuLaunchKernel, _cuLaunchKernelEx
    from cuda.bindings import driver

    _cuLaunchKernel = driver.cuLaunchKernel
    _cuLaunchKernelEx = driver.cuLaunchKernelEx
    return _cuLaunchKernel


def _raise_launch_error(error, call: str, grid, block_x: int, shared_mem_bytes: int):
    from shared_codegen.runtime.driver import check

    check((error,), f"{call}(grid={tuple(grid)}, block=({block_x}, 1, 1), "
                    f"shared_mem={shared_mem_bytes})")


# ---- the binder ----------------------------------------------------------------------------


def _slot_layout(param_kinds):
    """(struct format, offsets, total size, alignment of the buffer) for the parameter slots."""
    fmt, offsets, offset, max_align = ["<"], [], 0, 8
    for kind in param_kinds:
        try:
            code, size, align, _ = PARAMETER_KINDS[kind]
        except KeyError:
            raise ValueError(f"unknown kernel parameter kind {kind!r}; known: "
                             f"{', '.join(PARAMETER_KINDS)}") from None
        padding = -offset % align
        if padding:
            fmt.append(f"{padding}x")
        offset += padding
        offsets.append(offset)
        fmt.append(code)
        offset += size
        max_align = max(max_align, align)
    return "".join(fmt), offsets, max(offset, 1), max_align


def _make_packer(param_kinds, layout: struct.Struct, buffer):
    # Generated once per signature: one positional unpack, the pointer lookup inlined (one dict
    # get per pointer, no extra Python frame), then a single pack_into. Any failure (wrong
    # argument count; unknown pointer type, where the lookup gives None; out-of-range int:
    # struct.error) falls back to the checked path, which resolves new pointer types or raises
    # an error naming the argument.
    names = [f"a{i}" for i in range(len(param_kinds))]
    values = []
    for name, kind in zip(names, param_kinds):
        converter = PARAMETER_KINDS[kind][3]
        if converter == "data_ptr_of":
            values.append(f"pointer_getter({name}.__class__)({name})")
        else:
            values.append(f"{converter}({name})" if converter else name)
    unpack = f"{', '.join(names)}{',' if len(names) == 1 else ''} = arg_values" if names \
        else "() = arg_values"
    source = (f"def pack(arg_values):\n"
              f"    try:\n"
              f"        {unpack}\n"
              f"        pack_into(buffer, 0{''.join(', ' + v for v in values)})\n"
              f"    except (TypeError, ValueError, struct.error, OverflowError):\n"
              f"        checked_pack(arg_values)\n")

    def checked_pack(arg_values):
        if len(arg_values) != len(param_kinds):
            raise TypeError(f"kernel takes {len(param_kinds)} runtime arguments, "
                            f"got {len(arg_values)}")
        converted = []
        for index, (value, kind) in enumerate(zip(arg_values, param_kinds)):
            converter = PARAMETER_KINDS[kind][3]
            try:
                converted.append(namespace[converter](value) if converter else value)
                layout_of_kind(kind).pack(converted[-1])
            except (TypeError, ValueError, struct.error, OverflowError) as exc:
                raise PackError(index, kind, value, str(exc)) from None
        layout.pack_into(buffer, 0, *converted)

    namespace = {"pack_into": layout.pack_into, "buffer": buffer, "struct": struct,
                 "pointer_getter": _POINTER_GETTERS.get, "checked_pack": checked_pack,
                 "data_ptr_of": data_ptr_of, "_float_to_bf16_bits": _float_to_bf16_bits,
                 "_tensor_map_bytes": _tensor_map_bytes,
                 "_tensor_desc_bytes": _tensor_desc_bytes}
    exec(compile(source, f"<binder {','.join(param_kinds)}>", "exec"), namespace)
    return namespace["pack"]


@lru_cache(maxsize=None)
def layout_of_kind(kind: str) -> struct.Struct:
    """The struct packing one parameter of `kind` alone (used to check a value)."""
    return struct.Struct("<" + PARAMETER_KINDS[kind][0])


def _grid_dims(grid) -> tuple[int, int, int]:
    count = len(grid)
    return (grid[0], grid[1] if count > 1 else 1, grid[2] if count > 2 else 1)


class Binder:
    """Packs and launches kernels of one parameter signature (a tuple of PARAMETER_KINDS keys).

    Build once per signature (see `get_binder`); `launch` is the hot path. A lock makes the
    write-slots-then-launch pair atomic: cuda-python releases the GIL inside cuLaunchKernel,
    and the driver reads the slots during the call.
    """

    def __init__(self, param_kinds):
        self.param_kinds = tuple(param_kinds)
        fmt, self.offsets, self.size, align = _slot_layout(self.param_kinds)
        self.layout = struct.Struct(fmt)
        # Over-allocate to place slot 0 on the strictest alignment (64 B for tensor maps);
        # packing then writes through a memoryview of the aligned window.
        self._storage = ctypes.create_string_buffer(self.size + align)
        base = ctypes.addressof(self._storage)
        self._base = base + (-base % align)
        self._window = (ctypes.c_char * self.size).from_address(self._base)
        self._pointer_array = (ctypes.c_void_p * max(1, len(self.param_kinds)))(
            *[self._base + offset for offset in self.offsets])
        self.params_address = ctypes.addressof(self._pointer_array)
        self.pack = _make_packer(self.param_kinds, self.layout, self._window)
        self._lock = threading.Lock()
        self._configs = {}  # (cluster, pdl) -> CUlaunchConfig (see `launch_config`)

    def launch(self, function, grid, num_warps, shared_mem_bytes, stream, arg_values):
        """Launch `function` on `grid` (1-3 ints) with num_warps*32 threads per block.
        An empty grid (any dimension 0) launches nothing, like Triton."""
        # _grid_dims inlined: this is the hot path, and a call costs ~0.1 µs.
        count = len(grid)
        gx = grid[0]
        gy = grid[1] if count > 1 else 1
        gz = grid[2] if count > 2 else 1
        if not (gx and gy and gz):
            return
        launch_kernel = _cuLaunchKernel or _resolve_driver()
        block_x = num_warps * WARP_SIZE
        with self._lock:
            self.pack(arg_values)
            error, = launch_kernel(function, gx, gy, gz, block_x, 1, 1, shared_mem_bytes,
                                   stream, self.params_address, 0)
        if error:
            _raise_launch_error(error, "cuLaunchKernel", (gx, gy, gz), block_x, shared_mem_bytes)

    def launch_cluster(self, function, grid, cluster, num_warps, shared_mem_bytes, stream,
                       arg_values, pdl=False):
        """Launch with thread-block clusters (sm_90+): `cluster` is (cx, cy, cz) blocks, and
        each grid dimension must be a multiple of it (CUDA guide, "Thread Block Clusters").
        Clusters of more than 8 blocks additionally need the function attribute
        CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED. `pdl`: as `launch_pdl`."""
        gx, gy, gz = _grid_dims(grid)
        if gx * gy * gz == 0:
            return
        cx, cy, cz = _grid_dims(cluster)
        if gx % cx or gy % cy or gz % cz:
            raise ValueError(f"grid {(gx, gy, gz)} is not a multiple of the cluster {(cx, cy, cz)}")
        self._launch_ex(function, (gx, gy, gz), (cx, cy, cz), pdl, num_warps, shared_mem_bytes,
                        stream, arg_values)

    def launch_pdl(self, function, grid, num_warps, shared_mem_bytes, stream, arg_values):
        """`launch` with programmatic dependent launch: the kernel may start before the one
        before it on the stream has finished (its `gdc_wait` waits for that one)."""
        gx, gy, gz = _grid_dims(grid)
        if gx * gy * gz == 0:
            return
        self._launch_ex(function, (gx, gy, gz), None, True, num_warps, shared_mem_bytes,
                        stream, arg_values)

    def _launch_ex(self, function, grid3, cluster, pdl, num_warps, shared_mem_bytes, stream,
                   arg_values):
        if _cuLaunchKernelEx is None:
            _resolve_driver()
        block_x = num_warps * WARP_SIZE
        with self._lock:
            # One CUlaunchConfig per attribute set, built on first use: the driver reads it
            # during the call only, so later launches just refill the dimensions.
            config = self._configs.get((cluster, pdl))
            if config is None:
                config = self._configs[(cluster, pdl)] = launch_config(cluster, pdl)
            config.gridDimX, config.gridDimY, config.gridDimZ = grid3
            config.blockDimX = block_x
            config.sharedMemBytes = shared_mem_bytes
            config.hStream = stream
            self.pack(arg_values)
            error, = _cuLaunchKernelEx(config, function, self.params_address, 0)
        if error:
            _raise_launch_error(error, "cuLaunchKernelEx", grid3, block_x, shared_mem_bytes)


def launch_config(cluster=None, pdl: bool = False):
    """A `CUlaunchConfig` carrying the launch attributes, its grid, block size, shared memory
    and stream left for the launch to fill in:

    - `cluster` (cx, cy, cz): CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, thread-block clusters;
    - `pdl`: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1, programmatic
      dependent launch (CUDA guide, "Programmatic Dependent Launch and Synchronization"): the
      kernel may be scheduled before the previous kernel on the stream has completed, as soon
      as every CTA of that one has issued `griddepcontrol.launch_dependents` or exited; its
      `griddepcontrol.wait` waits for the rest. Triton's launcher sets the same attribute for
      `launch_pdl=True`.
    """
    from cuda.bindings import driver

    ids = driver.CUlaunchAttributeID
    attributes = []
    if cluster is not None:
        attribute = driver.CUlaunchAttribute()
        attribute.id = ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attribute.value.clusterDim.x, attribute.value.clusterDim.y, \
            attribute.value.clusterDim.z = cluster
        attributes.append(attribute)
    if pdl:
        attribute = driver.CUlaunchAttribute()
        attribute.id = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attribute.value.programmaticStreamSerializationAllowed = 1
        attributes.append(attribute)
    config = driver.CUlaunchConfig()
    config.blockDimY = config.blockDimZ = 1
    config.attrs = attributes
    config.numAttrs = len(attributes)
    return config


class PersistentBinder:
    """The launches of a persistent kernel (tile/passes/persistent.py). A 1-D grid larger
    than the GPU holds at once (occupancy x SMs, found on the first launch: a loaded function
    belongs to one device) runs that many programs, with the grid the launch asked for as
    the hidden last argument, which the kernel's programs walk. Any other launch (a grid
    that fits, a 2-D or 3-D grid, a cluster launch) runs the one-program-per-tile build that
    `plain()` compiles on first use (an object with `function`, `binder`, `num_warps` and
    `shared`): the flattened loop costs 1-4% where every program has one tile."""

    def __init__(self, binder: Binder, plain):
        self.binder = binder
        self.programs = 0  # the most programs resident at once; 0 until the first launch
        self._make_plain, self._plain = plain, None

    def _persistent_grid(self, function, grid, num_warps, shared_mem_bytes):
        """The capped grid, or None when the launch runs the plain build."""
        if len(grid) > 1 and any(g != 1 for g in grid[1:]):
            return None
        if not self.programs:
            from shared_codegen.runtime import driver

            per_sm = driver.max_active_blocks(function, num_warps * 32, shared_mem_bytes)
            self.programs = max(1, per_sm) * driver.get_device(
                driver.current_device_index()).sm_count
        return (self.programs,) if grid[0] > self.programs else None

    def plain(self):
        if self._plain is None:
            self._plain = self._make_plain()
        return self._plain

    def _launch(self, how, function, grid, num_warps, shared_mem_bytes, stream, arg_values):
        """Binder method `how` (launch, launch_pdl) on the capped grid, or on the plain build."""
        capped = self._persistent_grid(function, grid, num_warps, shared_mem_bytes)
        if capped is None:
            p = self.plain()
            getattr(p.binder, how)(p.function, grid, p.num_warps, p.shared, stream, arg_values)
        else:
            getattr(self.binder, how)(function, capped, num_warps, shared_mem_bytes, stream,
                                      (*arg_values, grid[0]))

    def launch(self, function, grid, num_warps, shared_mem_bytes, stream, arg_values):
        self._launch("launch", function, grid, num_warps, shared_mem_bytes, stream, arg_values)

    def launch_pdl(self, function, grid, num_warps, shared_mem_bytes, stream, arg_values):
        self._launch("launch_pdl", function, grid, num_warps, shared_mem_bytes, stream,
                     arg_values)

    def launch_cluster(self, function, grid, cluster, num_warps, shared_mem_bytes, stream,
                       arg_values, pdl=False):
        p = self.plain()
        p.binder.launch_cluster(p.function, grid, cluster, p.num_warps, p.shared, stream,
                                arg_values, pdl=pdl)


@lru_cache(maxsize=None)
def get_binder(param_kinds: tuple) -> Binder:
    """The shared binder for a signature; built on first use."""
    return Binder(param_kinds)
