"""Every environment variable the project reads, declared once with its type, default and meaning.

Nothing else in the package calls `os.environ` directly: code asks this module, so a user can
list every knob with `python -m shared_codegen.config` and a reader finds them all in one place.
Values are read from the environment at call time (not at import), so tests and users can set a
variable after the package was imported and see it take effect.

    from shared_codegen import config
    config.get("SC_INTERPRET")     # -> bool
    config.SC_CACHE_DIR            # the same, attribute style (the full name ...)
    config.cache_dir               # ... or the lower-case name without the SC_ prefix
    print(config.describe())       # a table of all of them with their current values

To add a variable: append an `EnvVar` to `_DECLARED` below; nothing else is needed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})
# The targets the backend knows how to compile for (see lowering/backend.py).
_TARGET_PATTERN = re.compile(r"^sm_[0-9]{2,3}[af]?$")


class ConfigError(ValueError):
    """An environment variable holds a value its declared type cannot accept."""


def _parse_bool(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ConfigError(f"{name}={text!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def _parse_str(name: str, text: str) -> str:
    return text


def _parse_path(name: str, text: str) -> str:
    return os.path.abspath(os.path.expanduser(text))


def _parse_target(name: str, text: str) -> str:
    target = text.strip().lower()
    if not _TARGET_PATTERN.match(target):
        raise ConfigError(f"{name}={text!r} is not a GPU target; expected e.g. sm_80, sm_90a, sm_100a")
    return target


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not an integer") from None


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "bool": _parse_bool,
    "int": _parse_int,
    "str": _parse_str,
    "path": _parse_path,
    "target": _parse_target,
}


@dataclass(frozen=True)
class EnvVar:
    """One declared environment variable. `default` is the parsed value used when it is unset;
    a path default is expanded (`~`) when read."""

    name: str
    type: str  # a key of _PARSERS
    default: Any
    meaning: str

    def read(self) -> Any:
        text = os.environ.get(self.name)
        if text is None:
            if self.type == "path" and self.default is not None:
                return _parse_path(self.name, self.default)
            return self.default
        return _PARSERS[self.type](self.name, text)


_DECLARED = (
    EnvVar("SC_INTERPRET", "bool", False,
           "Run every kernel launch in the CPU interpreter instead of compiling for the GPU."),
    EnvVar("SC_INTERPRET_SEED", "int", 0,
           "Seed of the interpreter's choices of when asynchronous operations (TMA loads) "
           "complete; change it to try other legal orders."),
    EnvVar("SC_INTERPRET_CONCURRENT", "bool", False,
           "Run the programs of every grid concurrently in the interpreter, switching at "
           "atomics and volatile loads (kernels with a spin loop always do; "
           "shared_codegen/interpreter/grid.py)."),
    EnvVar("SC_INTERPRET_STRICT", "bool", False,
           "Sanitizer checks of the interpreter that cost time or flag code that often works: "
           "reads of never-written tensor memory, and mbarriers that end a program with a TMA "
           "load in flight or transaction bytes unmatched (docs/sanitizer.md)."),
    EnvVar("SC_DUMP_IR_DIR", "path", None,
           "If set, write the IR after every named pass (and the LLVM IR / PTX) into this folder."),
    EnvVar("SC_CACHE_DIR", "path", "~/.cache/shared_codegen",
           "Folder of the on-disk compilation cache."),
    EnvVar("SC_CACHE_DISABLE", "bool", False,
           "Neither read nor write the on-disk cache (the in-memory cache still applies)."),
    EnvVar("SC_DEBUG", "bool", False,
           "Extra checking and logging: verify IR after every pass, keep nvJitLink info logs, "
           "emit line info."),
    EnvVar("SC_DEVICE_DEBUG", "bool", False,
           "Launch every GPU kernel in debug mode (as `debug=True` at launch): global loads and "
           "stores bounds-checked against their argument, mbarrier waits with a time budget; a "
           "failure raises DeviceCheckError after the launch (docs/debug_mode.md)."),
    EnvVar("SC_DEVICE_DEBUG_WAIT_MS", "int", 1000,
           "Debug mode: how long an mbarrier wait may spin (milliseconds of %globaltimer) "
           "before its threads give up and report a deadlock."),
    EnvVar("SC_TIMELINE", "bool", False,
           "Record the timeline regions (`enter_scope` / `exit_scope` of "
           "tile.profiler.language) of every launch, as `timeline=True` at launch does; the "
           "result is `kernel.last_timeline` (docs/timeline.md)."),
    EnvVar("SC_TIMELINE_EVENTS", "int", 256,
           "Timeline: events each warp can record per launch; later ones are counted and "
           "dropped (the buffer is programs x warps x (this + 1) x 16 bytes)."),
    EnvVar("SC_PTXAS_OPTS", "str", "",
           "Extra ptxas options, space separated (e.g. '-warn-spills --maxrregcount=128'); each is "
           "passed to nvJitLink as -Xptxas=<option>."),
    EnvVar("SC_DRIVER_JIT", "bool", True,
           "Load a kernel whose setmaxnreg nvJitLink dropped (ptxas warning C7504) from its PTX "
           "through the driver JIT, which keeps it; 0 always loads nvJitLink's cubin."),
    EnvVar("SC_PERSISTENT", "bool", True,
           "Let the tile compiler run a GEMM-like kernel launched with more programs than fit "
           "on the GPU as persistent programs (tile/passes/persistent.py); 0 keeps one program "
           "per program id."),
    EnvVar("SC_FULL_TRACEBACK", "bool", False,
           "Show every frame of the compiler in the traceback of a compile, argument or "
           "interpreter error (by default they are hidden and the traceback ends at the "
           "kernel line; shared_codegen/tracebacks.py)."),
    EnvVar("SC_TARGET", "target", None,
           "Compile for this target instead of the current GPU's (sm_80, sm_90a, sm_100a, ...)."),
    EnvVar("SC_PRINT_AUTOTUNING", "bool", False,
           "Autotuning prints, to stderr, one line per config it times and the config it picks "
           "for each key (Triton's TRITON_PRINT_AUTOTUNING, which is honoured too)."),
    EnvVar("TRITON_PRINT_AUTOTUNING", "bool", False,
           "Triton's name for SC_PRINT_AUTOTUNING, read so upstream scripts keep working."),
    EnvVar("SC_LIBDEVICE_PATH", "path", None,
           "NVIDIA's libdevice bitcode (libdevice.10.bc) to link for tl.extra.cuda.libdevice and "
           "fp64 transcendentals; unset: the nvidia-nvvm wheel's copy, then triton's."),
)

VARIABLES: dict[str, EnvVar] = {var.name: var for var in _DECLARED}


def get(name: str) -> Any:
    """The current value of a declared variable, parsed to its type; raises for unknown names so
    a typo fails loudly instead of silently reading the default."""
    try:
        var = VARIABLES[name]
    except KeyError:
        raise KeyError(f"{name} is not a declared environment variable; "
                       f"known: {', '.join(VARIABLES)}") from None
    return var.read()


def describe() -> str:
    """A human-readable table: name, type, default, current value and meaning of every variable."""
    lines = []
    for var in _DECLARED:
        try:
            current = repr(var.read())
        except ConfigError as exc:
            current = f"<invalid: {exc}>"
        lines.append(f"{var.name}  ({var.type}, default {var.default!r}, now {current})")
        lines.append(f"    {var.meaning}")
    return "\n".join(lines)


def __getattr__(attr: str) -> Any:
    # Module-level attribute access reads the environment each time: `config.SC_DEBUG` or
    # `config.debug`.
    name = attr if attr.startswith("SC_") else "SC_" + attr.upper()
    if name in VARIABLES:
        return VARIABLES[name].read()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


if __name__ == "__main__":
    print(describe())
