"""Host side of instrumented launches: the GPU debug mode's record (lowering/debug_checks.py)
and the timeline's event buffer (lowering/timeline.py).

A launch of a debug variant gets hidden arguments after the kernel's own: the address of a
zeroed 64-byte record (one per CUDA context) and every pointer argument's extent in bytes
(from the data pointer to the end of its allocation). After the launch the context is
synchronized (debug launches are synchronous), the record read back, and a claimed record
raised as a DeviceCheckError naming the kernel line, the program, the partition and the
offset or the barrier (and zeroed for the next launch).
"""

from __future__ import annotations

import linecache
import sys

import numpy as np

from shared_codegen.errors import DeviceDeadlockError, DeviceOutOfBoundsError
from shared_codegen.lowering.debug_checks import (KIND_ATOMIC, KIND_LOAD, KIND_STORE,
                                                  NO_ARGUMENT, RECORD_WORDS)

# An argument passed as a bare address has no known extent: its accesses pass every check.
UNKNOWN_EXTENT = (1 << 63) - 1

# The record of each CUDA context (its address by context handle): zeroed once when allocated
# and again after a failure was read, so a launch that passes costs no copy.
_records: dict = {}


def argument_extent(arg) -> int:
    """Bytes from a pointer argument's data pointer to the end of what it may touch: a torch
    tensor's storage (views may reach past their own shape), an `__cuda_array_interface__`
    array's strided extent; a bare int address is unchecked."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arg, torch.Tensor):
        storage = arg.untyped_storage()
        return max(0, storage.nbytes() - arg.storage_offset() * arg.element_size())
    interface = getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        shape = tuple(interface["shape"])
        itemsize = np.dtype(interface["typestr"]).itemsize
        if any(d == 0 for d in shape):
            return 0
        strides = interface.get("strides")
        if strides is None:
            return int(np.prod(shape, dtype=np.int64)) * itemsize
        return sum((d - 1) * s for d, s in zip(shape, strides) if s > 0) + itemsize
    return UNKNOWN_EXTENT


def _record_buffer() -> int:
    from shared_codegen.runtime import driver

    context = int(driver.ensure_context())
    address = _records.get(context)
    if address is None:
        address = _records[context] = driver.mem_alloc(RECORD_WORDS * 4)
        driver.copy_to_device(address, np.zeros(RECORD_WORDS, np.uint32))
    return address


def debug_hidden_args(kernel, runtime_args, pointer_positions) -> list:
    """The hidden arguments of a debug variant: the zeroed record, then the extents."""
    return [_record_buffer()] + [argument_extent(runtime_args[i]) for i in pointer_positions]


def check_record(kernel_name: str, info: dict) -> None:
    """After a debug launch: synchronize, read the record, raise if a check failed."""
    from shared_codegen.runtime import driver

    driver.synchronize()
    address = _record_buffer()
    words = np.zeros(RECORD_WORDS, np.uint32)
    driver.copy_to_host(words, address)
    if words[0]:
        driver.copy_to_device(address, np.zeros(RECORD_WORDS, np.uint32))  # for the next launch
        raise decode_record(kernel_name, info, words)


def decode_record(kernel_name: str, info: dict, words: np.ndarray):
    """The DeviceCheckError a claimed record (`RECORD_WORDS` u32 words) describes."""
    words = np.asarray(words, np.uint32)
    kind, site_index = int(words[1]), int(words[2])
    site = info["sites"][site_index]
    program = (int(words[3]), int(words[4]), int(words[5]))
    thread, phase = int(words[6]), int(words[7])
    value = int(words[8]) | int(words[9]) << 32
    extent = int(words[10]) | int(words[11]) << 32
    arg = int(words[12])
    if value >= 1 << 63:  # below the argument's start: the offset is negative
        value -= 1 << 64
    partition = site["partition"]
    partition = "default partition" if partition == "default" else \
        f"worker partition {partition.removeprefix('partition')}"
    where = f"{site['file']}:{site['line']}"
    who = f"(program id {program}, thread {thread}, {partition})"
    record = {"kernel": kernel_name, "file": site["file"], "line": site["line"],
              "program": program, "thread": thread, "partition": partition}
    if kind in (KIND_LOAD, KIND_STORE, KIND_ATOMIC):
        what = site["what"]
        record.update(kind=what)
        if arg == NO_ARGUMENT:
            detail = (f"out-of-bounds {what} in `{kernel_name}`: address {value:#x} is inside "
                      f"no pointer argument {who}")
            record.update(address=value)
        else:
            name, size, vec = info["pointer_args"][arg], site["elem_bytes"], site["vec"]
            count = extent // size
            first = value // size if value % size == 0 else value / size
            bounds = f"[0, {count}) ({count} elements of {site['dtype']})"
            if vec > 1 and 0 <= value and value + size <= extent:
                reach = (f"elements [{first}, {first + vec}) of a {vec}-element access are "
                         f"not all inside {bounds}")
            else:
                reach = f"element offset {first} is outside {bounds}"
            detail = f"out-of-bounds {what} of `{name}` in `{kernel_name}`: {reach} {who}"
            record.update(argument=name, offset=value, extent=extent)
        message = f"{where}: {detail}; the {what} was not performed"
        cls = DeviceOutOfBoundsError
    else:
        record.update(kind="wait", phase=phase, barrier_address=value)
        message = (f"{where}: deadlock: mbarrier.wait for phase {phase} of the mbarrier at "
                   f"shared address {value:#x} in `{kernel_name}` did not complete within "
                   f"{info['wait_ms']} ms; the waiting threads gave up {who}")
        cls = DeviceDeadlockError
    source = linecache.getline(site["file"], site["line"]).strip() if site["file"] else ""
    if source:
        message += f"\n    {source}"
    return cls(message, record)


__all__ = ["argument_extent", "debug_hidden_args", "check_record", "decode_record",
           "UNKNOWN_EXTENT"]
