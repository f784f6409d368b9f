"""The README's kernels are real code: extract them, run them in the interpreter."""

import os
import re

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..")


def python_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_readme_kernels_compute_vector_addition(load_source):
    blocks = python_blocks()
    tile_src = next(b for b in blocks if "@tile.jit" in b)
    gluon_src = next(b for b in blocks if "@gluon.jit" in b)
    x = np.random.default_rng(0).standard_normal(3000).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    # The tile block ends with its own launch line; run it with the names it uses.
    tile_module = load_source("readme_tile", tile_src.replace(
        "add_kernel[(tile.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)", ""))
    out = np.zeros_like(x)
    tile_module.add_kernel[(3,)](x, y, out, 3000, BLOCK_SIZE=1024)
    np.testing.assert_array_equal(out, x + y)
    gluon_module = load_source("readme_gluon", gluon_src)
    out2 = np.zeros_like(x)
    gluon_module.add_kernel[(6,)](x, y, out2, 3000, BLOCK=512)
    np.testing.assert_array_equal(out2, x + y)
