"""Tracebacks of compile and interpreter errors end at the user's kernel line, with the
compiler's frames hidden; SC_FULL_TRACEBACK=1 shows them (shared_codegen/tracebacks.py)."""

import os
import traceback

import numpy as np
import pytest
from error_kernels import FILE, line_of, undefined_name_kernel, wait_forever_kernel

import tile
import shared_codegen

PACKAGE = os.path.dirname(shared_codegen.__file__) + os.sep


def formatted(error) -> str:
    return "".join(traceback.format_exception(error))


def frames_of(error):
    return traceback.extract_tb(error.__traceback__)


def compiler_frames(error):
    return [f for f in frames_of(error) if f.filename.startswith(PACKAGE)]


def launch_undefined_name():
    x = np.zeros(16, np.float32)
    undefined_name_kernel[(1,)](x, BLOCK=16)


def test_a_compile_error_at_launch_ends_at_the_kernel_line(monkeypatch):
    monkeypatch.delenv("SC_FULL_TRACEBACK", raising=False)
    with pytest.raises(tile.CompilationError) as info:
        launch_undefined_name()
    error = info.value
    last = frames_of(error)[-1]
    bad = line_of("# noqa: F821")
    assert (last.filename, last.lineno, last.name) == (FILE, bad, "undefined_name_kernel")
    source = "tl.store(x_ptr + offs, tl.load(x_ptr + offs) + not_defined_anywhere)  # noqa: F821"
    assert last.line == source
    text = formatted(error)
    assert PACKAGE not in text, text
    assert "The above exception was the direct cause" not in text
    assert text.endswith(f"CompilationError: {FILE}:{bad}: name `not_defined_anywhere` is not "
                         f"defined\n    {source}\n{' ' * 51}^\n"), text
    # No `^^^^` under a wrong part of the kernel line: the frame spans the whole line.
    assert text.count("^") == 1


def test_sc_full_traceback_keeps_the_compiler_frames(monkeypatch):
    monkeypatch.setenv("SC_FULL_TRACEBACK", "1")
    with pytest.raises(tile.CompilationError) as info:
        launch_undefined_name()
    names = {f.name for f in compiler_frames(info.value)}
    assert {"run_bound", "make_ir", "visit_statements"} <= names, names


def test_tile_compile_errors_end_at_the_kernel_line_too(monkeypatch):
    monkeypatch.delenv("SC_FULL_TRACEBACK", raising=False)
    with pytest.raises(tile.CompilationError) as info:
        tile.compile(undefined_name_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 16}, target="sm_90a")
    assert compiler_frames(info.value) == []
    assert frames_of(info.value)[-1].lineno == line_of("# noqa: F821")


def test_an_interpreter_report_ends_at_the_line_it_names(monkeypatch):
    monkeypatch.delenv("SC_FULL_TRACEBACK", raising=False)
    with pytest.raises(tile.DeadlockError) as info:
        wait_forever_kernel[(1,)](np.zeros(1, np.int32))
    last = frames_of(info.value)[-1]
    assert (last.filename, last.lineno, last.name) == (FILE, line_of("# nobody arrives"),
                                                       "wait_forever_kernel")
    assert compiler_frames(info.value) == []
