"""Linking NVIDIA's libdevice (`libdevice.10.bc`, LLVM bitcode of the CUDA math library) into a
kernel's LLVM module, so calls to `__nv_*` functions become inlined code before PTX emission.

Where the bitcode comes from, first found wins:
  1. `SC_LIBDEVICE_PATH` (shared_codegen/config.py);
  2. the `nvidia-nvvm` wheel (`pip install shared-codegen[libdevice]`; CUDA 13 puts it under
     `nvidia/cu13/nvvm/libdevice/`), or the CUDA 12 `nvidia-cuda-nvcc-cu12` wheel's copy;
  3. triton's copy (`triton/backends/nvidia/lib/`), found without importing triton.

libdevice reads `__nvvm_reflect("__CUDA_FTZ")` to choose its flush-to-zero paths; the module
flag `nvvm-reflect-ftz` answers it (1, as Triton sets it), and NVPTX's NVVMReflect pass, which
the O3 pipeline runs, folds the calls away.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache

from shared_codegen import config
from shared_codegen.errors import CompilationError

LIBDEVICE_PREFIX = "__nv_"
_BITCODE_NAME = "libdevice.10.bc"
# Inside the `nvidia` namespace package: CUDA 13's nvidia-nvvm, then CUDA 12's nvcc wheel.
_WHEEL_SUBDIRS = (("cu13", "nvvm", "libdevice"), ("cuda_nvcc", "nvvm", "libdevice"))
_FTZ_FLAG_MODULE = '!llvm.module.flags = !{!0}\n!0 = !{i32 4, !"nvvm-reflect-ftz", i32 1}\n'


class LibdeviceNotFound(CompilationError, RuntimeError):
    """No libdevice bitcode anywhere we look; the message says what to install."""


def _package_dirs(name: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return list(spec.submodule_search_locations or [])


def candidate_paths() -> list[str]:
    """Every place searched, in order (the env var first when set)."""
    paths = []
    explicit = config.get("SC_LIBDEVICE_PATH")
    if explicit:
        paths.append(explicit)
    for root in _package_dirs("nvidia"):
        paths.extend(os.path.join(root, *sub, _BITCODE_NAME) for sub in _WHEEL_SUBDIRS)
    for root in _package_dirs("triton"):
        paths.append(os.path.join(root, "backends", "nvidia", "lib", _BITCODE_NAME))
    return paths


def find_libdevice(needed: tuple[str, ...] = ()) -> str:
    explicit = config.get("SC_LIBDEVICE_PATH")
    if explicit and not os.path.isfile(explicit):
        raise LibdeviceNotFound(f"SC_LIBDEVICE_PATH={explicit!r} is not a file; point it at "
                                f"{_BITCODE_NAME} or unset it")
    for path in candidate_paths():
        if os.path.isfile(path):
            return path
    what = ", ".join(sorted(needed)) or "libdevice functions"
    raise LibdeviceNotFound(
        f"the kernel calls {what} from NVIDIA's libdevice, and no {_BITCODE_NAME} was found; "
        f"install it with `pip install nvidia-nvvm` (or `pip install shared-codegen[libdevice]`)"
        f", or set SC_LIBDEVICE_PATH to the file")


@lru_cache(maxsize=4)
def _read_bitcode(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def link_libdevice(llvm, module) -> None:
    """Link libdevice into `module` (an llvmlite ModuleRef with triple and data layout set) if
    it declares any `__nv_*` function; the linked functions become internal, so the optimizer
    inlines the ones used and drops the rest."""
    needed = tuple(f.name for f in module.functions
                   if f.is_declaration and f.name.startswith(LIBDEVICE_PREFIX))
    if not needed:
        return
    own = {f.name for f in module.functions if not f.is_declaration}
    library = llvm.parse_bitcode(_read_bitcode(find_libdevice(needed)))
    flags = llvm.parse_assembly(_FTZ_FLAG_MODULE)
    for extra in (library, flags):
        extra.triple = module.triple
        extra.data_layout = module.data_layout
        module.link_in(extra)
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in own:
            fn.linkage = "internal"
    missing = [f.name for f in module.functions
               if f.is_declaration and f.name.startswith(LIBDEVICE_PREFIX)]
    if missing:
        raise LibdeviceNotFound(f"libdevice at {find_libdevice()} does not define "
                                f"{', '.join(missing)}")


def check_extern_libs(kernel_name: str, extern_libs) -> None:
    """Triton's `extern_libs={'libdevice': path}` launch option (tutorial 07). The path must
    name a file; the compiler links the libdevice its lookup finds, so a different file is
    reported (SC_LIBDEVICE_PATH is how to choose one) rather than silently not used."""
    if extern_libs is None:
        return
    if not isinstance(extern_libs, dict) or set(extern_libs) - {"libdevice"}:
        raise ValueError(f"{kernel_name}(): extern_libs must be {{'libdevice': path}}, got "
                         f"{extern_libs!r} (NVIDIA's libdevice is the only external library)")
    path = os.path.abspath(str(extern_libs["libdevice"]))
    if not os.path.isfile(path):
        raise ValueError(f"{kernel_name}(): extern_libs['libdevice'] = {path!r} is not a file")
    try:
        used = os.path.abspath(find_libdevice())
    except LibdeviceNotFound:
        used = None
    if used != path:
        import warnings
        warnings.warn(f"{kernel_name}(): extern_libs['libdevice'] is not what gets linked "
                      f"({used or 'none found'}); set SC_LIBDEVICE_PATH={path} to link it",
                      UserWarning, stacklevel=4)
