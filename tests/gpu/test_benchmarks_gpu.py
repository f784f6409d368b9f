"""The benchmarks run on the GPU: every row of benchmarks/launch_overhead.py that needs only
this package (ours, binder, raw) launches, checks its result and is timed."""

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

pytestmark = pytest.mark.gpu


def test_launch_overhead_times_every_row_of_ours(capsys):
    pytest.importorskip("torch")
    import launch_overhead

    assert launch_overhead.main(["--launches", "200", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("ours", "binder", "raw"):
        assert f"{name}: unavailable" not in out, out
        assert re.search(rf"^\s*{name}:\s+\d+\.\d+ us", out, re.MULTILINE), out
