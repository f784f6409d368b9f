"""`tl.device_print` on the GPU: vprintf's output, captured from a child process (the device
printf buffer is flushed to the process's stdout, which pytest's capture does not see), must
equal the interpreter's lines up to their order. Skipped without a GPU."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = textwrap.dedent('''
    import os, sys
    import numpy as np
    import tile
    import tile.language as tl

    @tile.jit
    def k(x_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        x = tl.load(x_ptr + offs)
        tl.device_print("x", x)
        tl.device_print("both", x.to(tl.float16), offs.to(tl.int64), hex=True)
        tl.device_print("pid", tl.program_id(0))
        tl.device_print("bare")

    x = np.arange(64, dtype=np.float32) - 3.5
    if sys.argv[1] == "gpu":
        import torch
        k[(2,)](torch.from_numpy(x).cuda(), N=64)
        torch.cuda.synchronize()
    else:
        os.environ["SC_INTERPRET"] = "1"
        k[(2,)](x, N=64)
''')


def _lines(script, mode):
    # A file, not `python -c`: @jit reads the kernel's source.
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.splitlines())


def test_gpu_prints_the_interpreters_lines(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "print_script.py"
    script.write_text(SCRIPT)
    gpu, interpreted = _lines(script, "gpu"), _lines(script, "interpret")
    assert len(interpreted) == 2 * (64 * 3 + 1 + 1)
    assert gpu == interpreted
