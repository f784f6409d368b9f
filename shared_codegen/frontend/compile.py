"""From a specialization to a compiled kernel: the language's stages list, IR to cubin.

`CompiledKernel.asm` holds every stage: `ir` (frontend IR), `ttgir` (explicit-layout IR after
the language's passes), `llir`, `ptx`, `cubin`. Compiling needs no GPU: the target is given
(`sm_90a`, `sm_100a`, ...) or read from the device.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Optional

from shared_codegen import config
from shared_codegen.errors import PerformanceWarning
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.ir.passes import run_pipeline
from shared_codegen.ir.printer import print_module
from shared_codegen.ir.verifier import verify_module
from shared_codegen.lowering.backend import performance_losses

_DISK_CACHE = None


def disk_cache():
    """The compilation cache of the current SC_CACHE_DIR / SC_CACHE_DISABLE (a new one when
    they change, so a kernel is never stored in or served from a folder no longer named)."""
    global _DISK_CACHE
    directory = None if config.get("SC_CACHE_DISABLE") else config.get("SC_CACHE_DIR")
    if _DISK_CACHE is None or _DISK_CACHE.setting != directory:
        from shared_codegen.runtime.cache import CompilationCache

        _DISK_CACHE = CompilationCache(directory)
        _DISK_CACHE.setting = directory
    return _DISK_CACHE


class KernelMetadata(dict):
    """A compiled kernel's metadata: a dict (what the cache stores), also read as attributes
    under Triton's names (`kernel.metadata.shared`, `.num_warps`, `.name`, `.target`)."""

    _TRITON_NAMES = {"shared": "shared_bytes"}

    def __getattr__(self, name):
        key = self._TRITON_NAMES.get(name, name)
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"kernel metadata has no field {name!r} (fields: "
                                 f"{', '.join(sorted(self))})") from None


@dataclass
class CompiledKernel:
    """One compiled variant (Triton's `CompiledKernel`). `kernel.warmup(...)` returns one;
    `compiled[grid](*args)` launches it again with the kernel's arguments (all of them, as
    Triton 3.6 passes them, or only the non-constexpr ones)."""

    name: str
    asm: Dict[str, Any]
    metadata: Dict[str, Any]
    _function: Any = None
    _module: Any = None
    compile_seconds: float = 0.0
    # Values from outside the kernel folded into it (frontend/guards.py): a launch that reuses
    # this kernel checks them first.
    guards: Any = ()
    # Set by the launch path: `launch(*args, grid, stream)` for `compiled[grid](...)`.
    relaunch: Any = None

    def __post_init__(self):
        if not isinstance(self.metadata, KernelMetadata):
            self.metadata = KernelMetadata(self.metadata)

    @property
    def n_regs(self) -> int:
        """Registers per thread (ptxas's count; 0 where it reported none)."""
        return int(self.metadata.get("registers", 0))

    @property
    def n_spills(self) -> int:
        """Bytes of spill stores per thread (ptxas's count)."""
        return int(self.metadata.get("spill_stores", 0))

    @property
    def n_max_threads(self) -> int:
        return self.num_warps * 32

    def _init_handles(self) -> None:
        """Triton's name for loading the kernel onto the device; with no GPU (the kernel runs
        in the interpreter) there is nothing to load."""
        from shared_codegen.runtime import driver

        if driver.has_gpu():
            self.function()

    def __getitem__(self, grid):
        if self.relaunch is None:
            raise RuntimeError(f"compiled kernel `{self.name}` cannot be launched by itself: "
                               f"take it from `{self.name}.warmup(...)` or a launch")
        import functools

        return functools.partial(self.relaunch, grid=grid)

    @property
    def num_warps(self) -> int:
        return self.metadata["num_warps"]

    @property
    def shared(self) -> int:
        return self.metadata["shared_bytes"]

    @property
    def param_kinds(self):
        return tuple(self.metadata["param_kinds"])

    def function(self):
        """The loaded CUfunction (loads the cubin on first use)."""
        if self._function is None:
            from shared_codegen.runtime import driver

            if self.metadata.get("driver_jit") and config.get("SC_DRIVER_JIT"):
                self._module, self.metadata["driver_jit_log"] = driver.load_ptx_module(
                    self.asm["ptx"])
            else:
                self._module = driver.load_module(self.asm["cubin"])
            self._function = driver.get_function(self._module, self.name)
            if self.shared > 48 * 1024:
                driver.set_dynamic_shared_memory(self._function, self.shared,
                                                 kernel_name=self.name)
        return self._function


def trace(jit_fn, spec):
    """The frontend IR of one specialization, before any pass. Called through the base class
    because a language's `make_ir` may run its passes too (Gluon's does, for its callers),
    and the stages below must run them exactly once."""
    from shared_codegen.frontend.jit import JITFunction

    return JITFunction.make_ir(jit_fn, spec)


def frontend_ir(jit_fn, spec):
    module = trace(jit_fn, spec)
    verify_module(module)
    return module


def compile_spec(jit_fn, spec, source_hash: Optional[str] = None) -> CompiledKernel:
    """Compile one specialization for `spec.target`, through the on-disk cache.

    The cache key cannot include the values of the globals the kernel reads before tracing
    says which ones it reads, so an entry keeps them (`metadata["globals"]`): a hit whose
    recorded values still hold is served; otherwise the kernel is traced and looked up (or
    stored) under a key that includes the values it read."""
    from shared_codegen.frontend import guards as guards_mod
    from shared_codegen.runtime.cache import make_key

    start = time.perf_counter()
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages,
               "language": jit_fn.language.name,
               "constants": repr(spec.constants)}
    persistent = bool(config.get("SC_PERSISTENT")) and getattr(spec, "persistent", True)
    if not persistent:  # tile/passes/persistent.py turned off
        options["persistent"] = False
    if spec.num_ctas != 1:  # cluster kernels only: ordinary keys stay as they were
        options["num_ctas"] = spec.num_ctas
    if spec.instrument:  # only instrumented variants: ordinary keys stay as they were
        options["instrument"] = repr(spec.instrument)
        # Their metadata names kernel files and lines (debug sites): the same source moved
        # to another file or line must not be served the old ones.
        options["locations"] = source_locations(jit_fn)
    key = make_key(source_hash or jit_fn.cache_hash(), spec.key, spec.target, options)
    cache = disk_cache()
    entry = cache.get(key)
    if entry is not None:
        restored = guards_mod.restore(entry["metadata"].get("globals", []), jit_fn)
        if restored is not None:
            return _from_entry(entry, restored, start)
    module = trace(jit_fn, spec)
    module.stage_results["instrument"] = dict(spec.instrument)
    module.stage_results["allow_persistent"] = persistent
    found = list(getattr(module, "external_reads", ()))
    if found:
        # The key of this kernel given the values it read.
        key = make_key(source_hash or jit_fn.cache_hash(), spec.key, spec.target,
                       dict(options, globals=guards_mod.key_text(found)))
        entry = cache.get(key)
        if entry is not None:
            return _from_entry(entry, found, start)
    kernel = compile_module(module, jit_fn.language, spec.target)
    warn_performance_losses(kernel, jit_fn)
    kernel.guards = tuple(found)
    kernel.metadata["globals"] = [g.serialize() for g in found]
    kernel.compile_seconds = time.perf_counter() - start
    cache.put(key, kernel.asm, kernel.metadata)
    if found and entry is None:
        # The first key too, so that a fresh process with unchanged values hits without
        # tracing (its recorded values are checked first).
        first = make_key(source_hash or jit_fn.cache_hash(), spec.key, spec.target, options)
        cache.put(first, kernel.asm, kernel.metadata)
    return kernel


def warn_performance_losses(kernel: CompiledKernel, jit_fn) -> None:
    """One PerformanceWarning per ptxas "Potential Performance Loss" note of a fresh compile
    (a cached kernel was warned about when it was compiled; its metadata keeps the notes):
    the note, the PTX line it points at, and where the kernel is defined. ptxas says nothing
    else when, say, it serializes every wgmma of a kernel written to overlap them."""
    ptx_lines = kernel.asm.get("ptx", "").splitlines()
    for note in kernel.metadata.get("performance_losses", ()):
        where = ""
        if 0 < note["ptx_line"] <= len(ptx_lines):
            where = (f"; ptxas points at PTX line {note['ptx_line']}: "
                     f"`{ptx_lines[note['ptx_line'] - 1].strip()}` (kernel.asm['ptx'])")
        info = getattr(jit_fn, "source_info", None)
        defined = f" (defined at {info.file}:{info.first_line})" if info is not None else ""
        message = (f"{kernel.name}{defined}: ptxas reports a performance loss "
                   f"({note['code']}): {note['reason']}{where}")
        if info is None:
            warnings.warn(message, PerformanceWarning, stacklevel=3)
        else:  # shown at the kernel's definition, not inside the compiler
            warnings.warn_explicit(message, PerformanceWarning, info.file, info.first_line)


def source_locations(jit_fn) -> str:
    """Where the kernel and every jitted function it calls are defined (file:first line)."""
    functions = [jit_fn] + [f for f in jit_fn._dependencies({id(jit_fn)}) if hasattr(f, "fn")]
    return ";".join(f"{f.source_info.file}:{f.source_info.first_line}" for f in functions)


def _from_entry(entry, guards, start) -> CompiledKernel:
    asm = dict(entry["artifacts"])
    kernel = CompiledKernel(entry["metadata"]["name"], asm, dict(entry["metadata"]),
                            compile_seconds=time.perf_counter() - start)
    kernel.guards = tuple(guards)
    return kernel


def compile_module(module, language, target: str) -> CompiledKernel:
    """Run the language's stages (tile/stages.py, gluon/stages.py) on a frontend-IR module,
    down to the cubin."""
    asm: Dict[str, Any] = {}
    verify_module(module)
    asm["ir"] = print_module(module)
    module.stage_results["target"] = target
    run_pipeline(module, language.stages(), verify=bool(config.get("SC_DEBUG")))
    results = module.stage_results
    lowered = results["lowered"]
    asm["ttgir"] = results["ttgir"]
    asm["llir"] = lowered.llvm_ir
    asm["ptx"] = results["ptx"]
    asm["cubin"] = results["cubin"]
    log = results["jit_log"]
    metadata = {"name": lowered.name, "shared_bytes": int(lowered.shared_bytes),
                "num_warps": int(lowered.num_warps), "param_kinds": list(lowered.param_kinds),
                "target": target, "jit_log": log or "",
                "global_scratch_bytes": int(lowered.global_scratch_bytes),
                "global_scratch_align": int(lowered.global_scratch_align),
                "registers": int(results.get("registers", 0)),
                "spill_stores": int(results.get("spill_stores", 0)),
                # nvJitLink's ptxas ignores setmaxnreg (C7504): load the PTX through the
                # driver JIT instead, which keeps it (runtime/driver.load_ptx_module).
                "driver_jit": _needs_whole_program(asm["ptx"], log)}
    # ptxas' notes on what it made slower than the PTX asks (wgmmas serialized, ...). Not for
    # the driver JIT's kernels: nvJitLink's notes describe a build without setmaxnreg, whose
    # register shortages the whole-program build does not have.
    metadata["performance_losses"] = [] if metadata["driver_jit"] else \
        performance_losses(log or "")
    if module.attrs.get("persistent_programs"):  # tile/passes/persistent.py
        metadata["persistent_programs"] = True
    if results.get("tma_boxes"):  # maps the launch encodes with a multicast slice's box
        metadata["tma_boxes"] = {str(k): v for k, v in results["tma_boxes"].items()}
    if lowered.debug_info is not None:
        metadata["debug"] = lowered.debug_info
    if lowered.timeline_info is not None:
        metadata["timeline"] = lowered.timeline_info
    return CompiledKernel(lowered.name, asm, metadata)


def _needs_whole_program(ptx: str, log: Optional[str]) -> bool:
    """Whether the kernel must be assembled as a whole program (the driver JIT): it moves
    registers between warpgroups with `setmaxnreg`, which nvJitLink's ptxas always drops
    (it links every input as a separate unit). Decided from the PTX, not only from the
    C7504 note in nvJitLink's log: a variant whose log lacked the note was loaded from the
    cubin, where setmaxnreg is gone and a 240-register consumer spills to local memory
    (measured on the H100: the attention forward at D = 256 ran 2.3x slower)."""
    return "(C7504)" in (log or "") or re.search(r"\bsetmaxnreg\.", ptx) is not None


def explicit_layout_module(jit_fn, spec, verify: bool = True, persistent: bool = True):
    """The module after the language's passes: what the converter prints as Gluon and what
    the CPU interpreter runs. `persistent=False` leaves kernels one program per tile (the
    converter's form: tile/passes/persistent.py needs a hidden launch parameter)."""
    module = trace(jit_fn, spec)
    module.stage_results["allow_persistent"] = persistent
    return run_pipeline(module, jit_fn.language.passes(), verify=verify)


def wrap_internal_error(jit_fn, exc: BaseException) -> CompilationError:
    info = jit_fn.source_info
    return CompilationError(f"internal compiler error while compiling `{jit_fn.__name__}`: "
                            f"{type(exc).__name__}: {exc}", info.file, info.first_line, 0,
                            info.line_text(info.first_line), exc)
