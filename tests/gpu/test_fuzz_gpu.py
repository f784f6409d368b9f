"""The differential fuzzer on the device: a few dozen programs on our GPU path, in the
interpreter and (where installed) on Triton 3.6, each against the numpy reference."""

import json
import os
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


@pytest.mark.gpu
def test_fuzzed_programs_agree_on_the_gpu(tmp_path):
    sys.path.insert(0, BENCHMARKS)
    import fuzz_tile

    fuzz_tile.main(["--gpu", "-n", "40", "--seed", "5", "--workers", "2",
                    "--out", str(tmp_path)])
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["programs"] == 40
    assert report["runs"] == 80
    assert report["disagreements"] == 0, report["failures"][:5]
