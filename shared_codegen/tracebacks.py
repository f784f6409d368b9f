"""Tracebacks that end at the user's kernel line, with the compiler's own frames hidden.

A compile error is raised tens of frames deep (the launcher, the specializer, the code
generator's visitor, a builtin); shown raw, the user's kernel line is lost among them. At each
entry point (`kernel[grid](...)`, `tile.compile`, `gluon.compile`, `kernel.run`) the error
leaves through `user_facing`, which keeps only the frames outside this project's packages (the
user's own helpers called while tracing stay) and appends one frame at the kernel line the
error names, so the last entry of the traceback is that line with its source:

    Traceback (most recent call last):
      File "run.py", line 20, in <module>
        add_kernel[grid](x, y, out, n, BLOCK=1024)
      File "<launcher of add_kernel>", line 9, in add_kernel
      File "kernels.py", line 12, in add_kernel
        y = tl.load(y_ptr + offs, mask=mask) + missing
    tile.CompilationError: kernels.py:12: name 'missing' is not defined

SC_FULL_TRACEBACK=1 leaves every frame (and the chained internal exception) in place, for
debugging the compiler itself; Triton 3.6's TRITON_FRONT_END_DEBUGGING plays the same part.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import TracebackType
from typing import Optional

from shared_codegen import config

# Frames from files under these folders are the compiler's own.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE_DIRS = tuple(os.path.join(_ROOT, name) + os.sep for name in ("shared_codegen", "tile",
                                                                        "gluon"))


# The standard library and installed packages (ast's visitor, numpy) called by the compiler.
_LIBRARY_DIRS = tuple(sorted({os.path.abspath(path) + os.sep
                              for key in ("stdlib", "platstdlib", "purelib", "platlib")
                              if (path := sysconfig.get_paths().get(key))}))


def is_compiler_frame(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIRS)


def _is_user_frame(filename: str) -> bool:
    """Frames of the user's own code (helpers a kernel calls while it is traced)."""
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(_PACKAGE_DIRS) and not path.startswith(_LIBRARY_DIRS)


def user_facing(error: BaseException, kernel=None) -> BaseException:
    """`error` with its traceback trimmed to the user's frames and ending at the kernel line
    it names (unless SC_FULL_TRACEBACK); raise the result. `kernel` (a JITFunction) names the
    appended frame when the line is in its body."""
    if config.get("SC_FULL_TRACEBACK"):
        return error
    # The first entry is the frame catching the error (the entry point), which the `raise`
    # of the result adds again.
    entries = list(_walk(error.__traceback__))[1:]
    frames = [tb for tb in entries if _is_user_frame(tb.tb_frame.f_code.co_filename)]
    location = _location(error)
    if location is not None:
        kernel_frame = _frame_at(error, *location, _function_name(kernel, *location))
        if kernel_frame is not None:
            frames.append(kernel_frame)
    # The internal exception a compile error was raised from is a compiler frame too.
    error.__cause__ = None
    error.__suppress_context__ = True
    return error.with_traceback(_link(frames))


def _walk(tb: Optional[TracebackType]):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _link(entries) -> Optional[TracebackType]:
    head = None
    for entry in reversed(entries):
        head = TracebackType(head, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return head


def _location(error) -> Optional[tuple]:
    file, line = getattr(error, "file", None), getattr(error, "line", 0)
    if not file or not line or file.startswith("<") or not os.path.exists(file):
        return None
    return file, line


def _function_name(kernel, file: str, line: int) -> str:
    info = getattr(kernel, "source_info", None) if kernel is not None else None
    if info is not None and os.path.abspath(info.file) == os.path.abspath(file):
        last = info.first_line + info.source.count("\n")
        if info.first_line <= line <= last:
            return kernel.__name__
    return "<jit function>"


def _frame_at(error, file: str, line: int, name: str) -> Optional[TracebackType]:
    """A traceback entry whose frame runs `file` at `line` (so traceback printing shows that
    source line): the error raised from a code object compiled to sit on that line."""
    try:
        with open(file, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    text = lines[line - 1].rstrip() if line <= len(lines) else ""
    stripped = text.lstrip()
    indent = len(text) - len(stripped)
    # The raise covers exactly the source line's columns, so traceback printing marks no
    # part of the line with `^^^^` (it does when a range covers less or more than the line).
    alias = "_" * max(1, len(stripped) - len("raise "))
    if indent and line > 1:
        source = "\n" * (line - 2) + "if 1:\n" + " " * indent + f"raise {alias}"
    else:
        source = "\n" * (line - 1) + f"raise {alias}"
    code = compile(source, file, "exec").replace(co_name=name)
    saved = error.__traceback__, error.__context__
    entry = None
    try:
        exec(code, {alias: error})
    except BaseException:
        entry = sys.exc_info()[2].tb_next  # past this function's own frame
    finally:
        error.__traceback__, error.__context__ = saved
    return entry


__all__ = ["user_facing", "is_compiler_frame"]
