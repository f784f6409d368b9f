"""@jit functions whose source Python cannot read (defined through exec() of a string or from
stdin) are refused when decorated, naming the function and saying what to do; source that
exec'd code registered in linecache is read as a file's, as in Triton."""

import linecache
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from shared_codegen.errors import CompilationError, SourceUnavailableError

KERNEL = textwrap.dedent('''
    @jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1, mask=offs < n)
''')


def _expected(filename: str, line: int) -> str:
    return (f"{filename}:{line}: cannot read the source of @jit function `add_one`, which the "
            f"compiler parses: Python keeps no source for code defined through exec() of a "
            f"string or read from stdin. Define the kernel in a .py file, or register its lines "
            f"in linecache under the filename it was compiled with ({filename!r})")


@pytest.mark.parametrize("jit", [tile.jit, gluon.jit], ids=["tile", "gluon"])
def test_a_kernel_defined_through_exec_is_refused_by_name(jit):
    with pytest.raises(SourceUnavailableError) as caught:
        exec(compile(KERNEL, "<kernels>", "exec"), {"jit": jit, "tl": tl})
    assert str(caught.value) == _expected("<kernels>", 2)
    assert isinstance(caught.value, CompilationError) and isinstance(caught.value, ValueError)


def test_a_kernel_read_from_stdin_is_refused_by_name():
    script = "import tile\nimport tile.language as tl\njit = tile.jit\n" + KERNEL
    run = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last == "shared_codegen.errors.SourceUnavailableError: " + _expected("<stdin>", 5)


def test_source_registered_in_linecache_compiles_and_runs(monkeypatch):
    filename = "<generated add_one>"
    monkeypatch.setitem(linecache.cache, filename,
                        (len(KERNEL), None, KERNEL.splitlines(True), filename))
    namespace = {"jit": tile.jit, "tl": tl}
    exec(compile(KERNEL, filename, "exec"), namespace)
    x = np.arange(16, dtype=np.float32)
    namespace["add_one"][(1,)](x, 12, BLOCK=16)
    np.testing.assert_array_equal(x, np.r_[np.arange(1, 13), np.arange(12, 16)])


def test_source_gone_by_the_first_launch_is_refused_by_name():
    filename = "<short-lived add_one>"
    linecache.cache[filename] = (len(KERNEL), None, KERNEL.splitlines(True), filename)
    namespace = {"jit": tile.jit, "tl": tl}
    try:
        exec(compile(KERNEL, filename, "exec"), namespace)
    finally:
        del linecache.cache[filename]
    with pytest.raises(SourceUnavailableError) as caught:
        namespace["add_one"][(1,)](np.zeros(16, np.float32), 16, BLOCK=16)
    assert str(caught.value) == _expected(filename, 2)
