"""tools/upstream_tutorials/run_tutorials.py's loading rules, on fixed text: which import lines
the tile frontend rewrites (and that nothing else moves), which top-level statements count as
a tutorial's demo and are not run, and the error for a missing source folder. The tutorials
themselves are Triton's and are not in the repository (tools/upstream_tutorials/README.md)."""

import ast
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from tools.upstream_tutorials import run_tutorials as rt  # noqa: E402

SOURCE = """import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor
import tritonclient
import triton.profiler as proton
from triton._C.libtriton import nvidia


def show():
    from triton.runtime import driver
    return driver
"""

SWAPPED = """import torch
import tile as triton
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor
import tritonclient
from _tutorial_stand_ins import proton
from _tutorial_stand_ins import nvidia


def show():
    from tile.runtime import driver
    return driver
"""


def test_swap_imports_rewrites_only_triton_imports_line_for_line():
    assert rt.swap_imports(SOURCE) == SWAPPED


DEMO = """import torch
configs = [1, 2]


def add(x, y):
    return x + y


x = torch.rand(8)
y = add(x, x)
z = x + 1
w = len(configs)
print(y)
benchmark.run(print_data=True)
if __name__ == "__main__":
    add(1, 2)
"""


def test_split_demo_drops_demos_and_what_only_they_feed():
    tree = ast.parse(DEMO)
    kept, dropped = rt.split_demo(tree, {"add"})
    assert [ast.unparse(s) for s in kept] == [
        "import torch", "configs = [1, 2]", "def add(x, y):\n    return x + y",
        "w = len(configs)"]
    assert [s.lineno for s in dropped] == [9, 10, 13, 14, 15, 11]


def test_missing_sources_are_named(tmp_path, capsys):
    (tmp_path / "01-vector-add.py").write_text("")
    with pytest.raises(SystemExit) as exit_info:
        rt.main(["--frontend", "tile", "--device", "cpu", "--sources", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert (f"--sources {tmp_path}: missing 02-fused-softmax.py, 03-matrix-multiplication.py, "
            "05-layer-norm.py, 08-grouped-gemm.py, 09-persistent-matmul.py") in err
    assert "01-vector-add.py" not in err.split("missing")[1]
