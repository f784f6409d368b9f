"""The last two compilation steps: LLVM IR text -> PTX (LLVM's NVPTX backend through llvmlite)
and PTX -> cubin (nvJitLink, in-process, no CUDA toolkit needed).

Both run on a machine without a GPU, so every target compiles everywhere (the target of the GPU
present, when there is one, is read by `runtime/driver.py`).

    ptx = llvm_to_ptx(module_text, "sm_90a")
    cubin, info_log = ptx_to_cubin(ptx, "sm_90a")
    parse_resource_usage(info_log)["my_kernel"].registers
"""

from __future__ import annotations

import re
import shlex
import threading
from dataclasses import dataclass
from functools import lru_cache

from shared_codegen import config
from shared_codegen.errors import CompilationError
from shared_codegen.lowering.libdevice import link_libdevice

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
# The newest PTX ISA the GPU machine's driver (580, CUDA 13.0) JIT-loads and its nvJitLink 13.0
# accepts. PTX newer than the driver fails at module load with UNSUPPORTED_PTX_VERSION, even
# though the cubin path never JITs, so we never go past it.
MAX_PTX_VERSION = (9, 0)

# The lowest PTX ISA version that can name each target (PTX ISA "Release notes" table). We ask
# for the lowest, not the newest, so the same PTX stays loadable by older drivers; lowering that
# needs a newer instruction asks for it through `ptx_version=`.
_MIN_PTX_VERSION = {
    80: (7, 0),
    86: (7, 1),
    87: (7, 4),
    89: (7, 8),
    90: (7, 8),
    100: (8, 6),
    101: (8, 6),
    103: (8, 8),
    110: (9, 0),
    120: (8, 7),
    121: (8, 8),
}
# Architecture-specific ("a") targets arrived later than the plain ones for some architectures:
# wgmma / setmaxnreg need sm_90a, available from PTX 8.0.
_MIN_PTX_VERSION_ARCH_SPECIFIC = {90: (8, 0)}
# Family-specific ("f") targets appeared in PTX 8.8.
_MIN_PTX_VERSION_FAMILY = (8, 8)

_TARGET_PATTERN = re.compile(r"^sm_(\d{2,3})([af]?)$")


class BackendError(CompilationError, RuntimeError):
    """PTX or cubin generation failed. The message carries the tool's own log."""


# ---- targets -------------------------------------------------------------------------------


def parse_target(target: str) -> tuple[int, str]:
    """'sm_90a' -> (90, 'a'); raises BackendError for anything the backend cannot compile for."""
    match = _TARGET_PATTERN.match(target)
    if not match or int(match.group(1)) not in _MIN_PTX_VERSION:
        known = ", ".join(f"sm_{cc}" for cc in sorted(_MIN_PTX_VERSION))
        raise BackendError(f"unknown GPU target {target!r}; known architectures: {known} "
                           f"(with an optional 'a' or 'f' suffix, e.g. sm_90a)")
    return int(match.group(1)), match.group(2)


def min_ptx_version(target: str) -> tuple[int, int]:
    """The lowest PTX ISA version (major, minor) that supports `target`."""
    arch, suffix = parse_target(target)
    version = _MIN_PTX_VERSION[arch]
    if suffix == "a":
        version = max(version, _MIN_PTX_VERSION_ARCH_SPECIFIC.get(arch, version))
    elif suffix == "f":
        version = max(version, _MIN_PTX_VERSION_FAMILY)
    return version


def ptx_feature(target: str, ptx_version: tuple[int, int] | None = None) -> str:
    """The LLVM NVPTX subtarget feature ('+ptx80') for `target`; `ptx_version` raises the floor."""
    version = min_ptx_version(target)
    if ptx_version is not None:
        version = max(version, tuple(ptx_version))
    if version > MAX_PTX_VERSION:
        raise BackendError(f"{target} needs PTX ISA {version[0]}.{version[1]}, newer than the "
                           f"{MAX_PTX_VERSION[0]}.{MAX_PTX_VERSION[1]} the CUDA 13.0 driver loads")
    return f"+ptx{version[0]}{version[1]}"


def target_from_capability(major: int, minor: int) -> str:
    """The target we compile for on a GPU of compute capability major.minor.

    Hopper and Blackwell datacenter parts get their architecture-specific target (sm_90a,
    sm_100a) because wgmma / tcgen05 exist only there; Ampere-class parts share sm_80 code
    (sm_86/89 run sm_80 cubins) so one cache entry serves them all.
    """
    if major == 8:
        return "sm_80" if minor in (0, 6, 7) else f"sm_8{minor}"
    if major in (9, 10):
        return f"sm_{major}{minor}a"
    if major == 12:
        return f"sm_12{minor}"
    return f"sm_{major}{minor}"


# ---- LLVM IR -> PTX ------------------------------------------------------------------------

_llvm_lock = threading.Lock()  # llvmlite's target machines and pass builders are not thread-safe


@lru_cache(maxsize=None)
def _initialize_llvm():
    import llvmlite.binding as llvm

    # llvmlite 0.50 initializes the core itself; the NVPTX target and its printer still need this.
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@lru_cache(maxsize=None)
def _target_machine(target: str, feature: str, opt_level: int):
    # Creating a target machine costs ~0.5 ms; kernels of one process share a handful.
    llvm = _initialize_llvm()
    return llvm.Target.from_triple(NVPTX_TRIPLE).create_target_machine(
        cpu=target, features=feature, opt=opt_level)


def llvm_to_ptx(llvm_ir_text: str, target: str, *, opt_level: int = 3,
                ptx_version: tuple[int, int] | None = None) -> str:
    """Optimize an LLVM IR module (new pass manager, O`opt_level` pipeline) and emit PTX.

    Kernels must be `ptx_kernel` functions (LLVM 22 dropped the nvvm.annotations "kernel"
    marker). The module's triple and data layout are set here, so callers need not.
    """
    llvm = _initialize_llvm()
    feature = ptx_feature(target, ptx_version)
    with _llvm_lock:
        machine = _target_machine(target, feature, opt_level)
        try:
            module = llvm.parse_assembly(llvm_ir_text)
            module.triple = NVPTX_TRIPLE
            module.data_layout = str(machine.target_data)
            module.verify()
        except RuntimeError as exc:
            raise BackendError(f"invalid LLVM IR for {target}:\n{exc}") from None
        link_libdevice(llvm, module)
        if opt_level > 0:
            tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            pass_builder = llvm.create_pass_builder(machine, tuning)
            pass_builder.getModulePassManager().run(module, pass_builder)
        try:
            return machine.emit_assembly(module)
        except RuntimeError as exc:
            raise BackendError(f"LLVM NVPTX code generation for {target} failed:\n{exc}") from None


# ---- PTX -> cubin --------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reported for one kernel (bytes unless named otherwise)."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    shared_memory: int = 0  # static shared memory; dynamic shared memory is chosen at launch
    local_memory: int = 0


_ENTRY_LINE = re.compile(r"Function properties for '?([\w$.]+)'?:?")
_SPILL_LINE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SUMMARY_LINE = re.compile(r"used (\d+) registers.*?(\d+) bytes smem.*?(\d+) bytes lmem")
_REGISTERS_LINE = re.compile(r"Used (\d+) registers")


def parse_resource_usage(info_log: str) -> dict[str, KernelResources]:
    """Per-kernel registers, spills and shared memory from a `-verbose` nvJitLink info log.

    nvJitLink 13 prints the ptxas block ("Function properties for k" + spills + "Used N
    registers") and then its own summary ("Function properties for 'k': used N registers, ...
    B bytes smem, ... L bytes lmem"); we take spills from the first and the rest from the second,
    falling back to ptxas' register count when the summary is missing.
    """
    fields: dict[str, dict[str, int]] = {}
    current = None
    for line in info_log.splitlines():
        entry = _ENTRY_LINE.search(line)
        if entry:
            current = fields.setdefault(entry.group(1), {})
        if current is None:
            continue
        spills = _SPILL_LINE.search(line)
        if spills:
            current["stack_frame"], current["spill_stores"], current["spill_loads"] = (
                int(value) for value in spills.groups())
        summary = _SUMMARY_LINE.search(line)
        if summary:
            current["registers"], current["shared_memory"], current["local_memory"] = (
                int(value) for value in summary.groups())
        elif (registers := _REGISTERS_LINE.search(line)) and "registers" not in current:
            current["registers"] = int(registers.group(1))
    return {name: KernelResources(**values) for name, values in fields.items()}


_PERFORMANCE_LOSS = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*?)"
                               r"(?: (?:in|for) the function '([^']+)')?(?: in line (\d+))?"
                               r"\s*$")
# Notes the compiler answers itself: setmaxnreg dropped by nvJitLink (C7504) sends the kernel
# through the driver JIT, which keeps it (frontend/compile._needs_whole_program).
HANDLED_NOTES = frozenset({"C7504"})


def performance_losses(info_log: str) -> list[dict]:
    """ptxas' "Potential Performance Loss" notes in an nvJitLink info log: code (C7515 ...),
    reason, function, and the PTX line it points at (0 when it names none)."""
    found = []
    for line in info_log.splitlines():
        match = _PERFORMANCE_LOSS.search(line)
        if match and match.group(1) not in HANDLED_NOTES:
            code, reason, function, ptx_line = match.groups()
            found.append({"code": code, "reason": reason.strip(), "function": function or "",
                          "ptx_line": int(ptx_line or 0)})
    return found


def _nvjitlink_log(nvjitlink, handle, which: str) -> str:
    size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
    if size <= 1:
        return ""
    buffer = bytearray(size)
    getattr(nvjitlink, f"get_{which}_log")(handle, buffer)
    return bytes(buffer).rstrip(b"\0").decode(errors="replace")


def nvjitlink_options(target: str, extra_opts=()) -> list[str]:
    """The option list `ptx_to_cubin` hands nvJitLink: arch, -O3, -verbose (for the resource
    report), SC_PTXAS_OPTS (one -Xptxas= per option: nvJitLink does not split on commas) and
    `extra_opts` verbatim."""
    parse_target(target)
    options = [f"-arch={target}", "-O3", "-verbose"]
    if config.get("SC_DEBUG"):
        options.append("-lineinfo")
    options += [f"-Xptxas={opt}" for opt in shlex.split(config.get("SC_PTXAS_OPTS"))]
    options += list(extra_opts)
    return options


def ptx_to_cubin(ptx: str | bytes, target: str, extra_opts=()) -> tuple[bytes, str]:
    """Assemble PTX into a cubin for `target` with nvJitLink; returns (cubin, info_log).

    Raises BackendError carrying nvJitLink's error log (which holds ptxas' messages).
    """
    from cuda.bindings import nvjitlink

    options = nvjitlink_options(target, extra_opts)
    data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    if not data.endswith(b"\0"):
        data += b"\0"  # ptxas reads the PTX as a C string
    handle = nvjitlink.create(len(options), options)
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            log = _nvjitlink_log(nvjitlink, handle, "error")
            raise BackendError(f"nvJitLink failed for {target} ({exc}) with options "
                               f"{' '.join(options)}:\n{log}") from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), _nvjitlink_log(nvjitlink, handle, "info")
    finally:
        nvjitlink.destroy(handle)

