"""What a kernel author reads when a language module lacks a name: that the compiler does not
support it (yet), not a Python AttributeError about a module object, and the closest names
that do exist (`tl.arangee` -> did you mean `tl.arange`?)."""

from __future__ import annotations

import difflib
import types

# Language modules and how kernel source usually spells them.
ALIASES = {"tile.language": "tl", "gluon.language": "gl"}


def spelled(module_name: str) -> str:
    for full, alias in ALIASES.items():
        if module_name == full or module_name.startswith(full + "."):
            return alias + module_name[len(full):]
    return module_name


def is_language_module(obj) -> bool:
    return isinstance(obj, types.ModuleType) and any(
        obj.__name__ == m or obj.__name__.startswith(m + ".") for m in ALIASES)


def message(module_name: str, attr: str, available) -> str:
    name = f"{spelled(module_name)}.{attr}"
    text = f"{name} is not supported by this compiler (yet)"
    public = [a for a in available if not a.startswith("_")]
    close = difflib.get_close_matches(attr, public, n=1, cutoff=0.75)
    if close:
        text += f"; did you mean {spelled(module_name)}.{close[0]}?"
    return text


def module_getattr(module_name: str, namespace: dict):
    """A module-level `__getattr__` that raises AttributeError with `message`."""

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {attr!r}")
        raise AttributeError(message(module_name, attr, list(namespace)))

    return __getattr__
