"""The launch option `launch_pdl=True` (programmatic dependent launch, Triton 3.6): every way
of launching passes it to the binder (`Binder.launch_pdl`, or `launch_cluster(..., pdl=True)`
with clusters), the fast path keeps it from launch to launch without a recompile, and a value
that is not a bool is refused by name. The driver is replaced by a recorder, so this runs
without a GPU; the attribute itself is checked in tests/shared_codegen/runtime/test_launcher.py
and on the GPU in tests/gpu/test_pdl_gpu.py."""

import re

import numpy as np
import pytest
from fake_gpu import DevicePointer, forbid_the_full_path, install

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from shared_codegen.errors import KernelError


@tile.jit
def _pdl_kernel(Y, s):
    tl.store(Y, s * 2.0)


@tile.autotune(configs=[tile.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
@tile.jit
def _tuned_pdl_kernel(Y, n, BLOCK: tl.constexpr):
    tl.store(Y + tl.program_id(0), n * BLOCK)


@gluon.jit
def _cluster_pdl_kernel(Y):
    gl.store(Y + gl.program_id(0), 1.0)


class _RecordingBinder:
    """Records how each launch reached the driver: "plain", "pdl" or ("cluster", shape, pdl)."""

    def __init__(self, launches):
        self.launches = launches

    def launch(self, function, grid, num_warps, shared, stream, args):
        self.launches.append("plain")

    def launch_pdl(self, function, grid, num_warps, shared, stream, args):
        self.launches.append("pdl")

    def launch_cluster(self, function, grid, cluster, num_warps, shared, stream, args,
                       pdl=False):
        self.launches.append(("cluster", tuple(cluster), pdl))


@pytest.fixture
def fake_gpu(monkeypatch):
    """(compiles, launches): each compiled variant, and each launch's binder call."""
    launches = []
    compiles = install(
        monkeypatch, (_pdl_kernel, _tuned_pdl_kernel.fn, _cluster_pdl_kernel),
        lambda num_stages: _RecordingBinder(launches))
    monkeypatch.setattr(_tuned_pdl_kernel, "cache", {})
    return compiles, launches


def test_launch_pdl_reaches_the_binder_and_stays_on_the_fast_path(fake_gpu, monkeypatch):
    compiles, launches = fake_gpu
    y = DevicePointer()
    _pdl_kernel[(2,)](y, 1.0, launch_pdl=True)
    forbid_the_full_path(monkeypatch)
    # PDL changes no code: one variant serves both, the launch call follows the option.
    for pdl in (True, False, True, True):
        _pdl_kernel[(2,)](y, 1.0, launch_pdl=pdl)
    _pdl_kernel[(2,)](y, 1.0)
    assert compiles == [("_pdl_kernel", 3)]
    assert launches == ["pdl", "pdl", "plain", "pdl", "pdl", "plain"]


def test_kernel_run_autotuned_kernels_and_warmup_pass_launch_pdl_on(fake_gpu):
    compiles, launches = fake_gpu
    y = DevicePointer()
    _pdl_kernel.run(y, 1.0, grid=(1,), launch_pdl=True)
    _pdl_kernel.run(y, 1.0, grid=(1,))
    _tuned_pdl_kernel[(1,)](y, 4, launch_pdl=True)  # compiles: the full path
    _tuned_pdl_kernel[(1,)](y, 4, launch_pdl=True)  # the chosen config's fast path
    _tuned_pdl_kernel.run(y, 4, grid=(1,), launch_pdl=True)
    assert launches == ["pdl", "plain", "pdl", "pdl", "pdl"]
    compiled = _pdl_kernel.warmup(y, 1.0, grid=(1,), launch_pdl=True)
    compiled.relaunch(y, 1.0, grid=(1,))  # what `compiled[grid](...)` calls
    assert launches[-1] == "pdl"


def test_launch_pdl_combines_with_cluster_launches(fake_gpu):
    compiles, launches = fake_gpu
    y = DevicePointer()
    _cluster_pdl_kernel[(4,)](y, num_ctas=2, launch_pdl=True)
    _cluster_pdl_kernel[(4,)](y, num_ctas=2, launch_pdl=True)  # options: the full path again
    _pdl_kernel[(4,)](y, 1.0, cluster_dims=(2,), launch_pdl=True)
    _cluster_pdl_kernel[(4,)](y, num_ctas=2)
    assert launches == [("cluster", (2, 1, 1), True)] * 3 + [("cluster", (2, 1, 1), False)]


BAD_VALUES = [1, 0, "yes", None, np.int32(1)]


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_a_launch_pdl_that_is_not_a_bool_is_refused_by_name(fake_gpu, value):
    compiles, launches = fake_gpu
    y = DevicePointer()
    _pdl_kernel[(1,)](y, 1.0, launch_pdl=True)  # a variant the fast path could reuse
    message = rf": launch_pdl must be True or False, got {re.escape(repr(value))}$"
    with pytest.raises(KernelError, match="^_pdl_kernel" + message):
        _pdl_kernel[(1,)](y, 1.0, launch_pdl=value)
    with pytest.raises(KernelError, match="^_pdl_kernel" + message):
        _pdl_kernel.run(y, 1.0, grid=(1,), launch_pdl=value)
    with pytest.raises(KernelError, match="^_cluster_pdl_kernel" + message):
        _cluster_pdl_kernel[(4,)](y, num_ctas=2, launch_pdl=value)
    assert launches == ["pdl"]


def test_a_bad_launch_pdl_is_refused_in_the_interpreter_too():
    y = np.zeros(1, np.float32)
    with pytest.raises(KernelError, match=r"launch_pdl must be True or False, got 'on'$"):
        _pdl_kernel[(1,)](y, 1.0, launch_pdl="on")
    _pdl_kernel[(1,)](y, 1.0, launch_pdl=np.bool_(True))  # numpy's bool is a bool
    assert y[0] == 2.0
