"""benchmarks/launch_overhead.py keeps running without a GPU: it says so and exits 0, its tile
kernel (the "ours" row) computes x + y in the interpreter, and the LLVM IR of its "binder" and
"raw" rows compiles to a cubin for sm_90a. tests/gpu/test_benchmarks_gpu.py times it."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

import launch_overhead  # noqa: E402


def test_without_a_gpu_it_says_so_and_exits_0(capsys, monkeypatch):
    from shared_codegen.runtime import driver

    monkeypatch.setattr(driver, "has_gpu", lambda: False)
    assert launch_overhead.main(["--launches", "10", "--rounds", "1"]) == 0
    assert capsys.readouterr().out == ("launch_overhead: needs a GPU (no CUDA driver or device "
                                       "here); nothing measured.\n")


def test_its_tile_kernel_adds_in_the_interpreter():
    x = np.arange(launch_overhead.N_ELEMENTS, dtype=np.float32)
    y = np.full_like(x, 0.5)
    out = np.zeros_like(x)
    launch = launch_overhead._ours(x, y, out, launch_overhead.N_ELEMENTS - 28)
    launch()
    expected = np.r_[x[:100] + y[:100], np.zeros(28, np.float32)]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_its_raw_kernel_compiles_to_a_cubin(target):
    from shared_codegen.lowering import backend

    ptx = backend.llvm_to_ptx(launch_overhead.ADD_KERNEL_LLVM_IR, target)
    assert ".entry add_kernel(" in ptx and "add.rn.f32" in ptx
    cubin, _ = backend.ptx_to_cubin(ptx, target)
    assert cubin[:4] == b"\x7fELF"
