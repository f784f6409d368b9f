"""The launch fast path (frontend/fastpath.py) serves launches that pass `num_stages`: the
depth is part of its key, so each depth compiles once and later launches skip the full path.
The driver is replaced by a recorder, so this runs without a GPU."""

import pytest

import tile
import tile.language as tl
from shared_codegen.errors import KernelError
from shared_codegen.runtime.specialize import register_handler


@tile.jit
def _staged_kernel(Y, s):
    tl.store(Y, s * 2.0)


class _DevicePointer:
    """Stands in for a device tensor (a pointer argument that is not host data)."""


register_handler(_DevicePointer, lambda arg: ("*fp32", "D"))


class _RecordingBinder:
    def __init__(self, launches, num_stages):
        self.launches, self.num_stages = launches, num_stages

    def launch(self, function, grid, num_warps, shared, stream, args):
        self.launches.append(self.num_stages)


@pytest.fixture
def fake_gpu(monkeypatch):
    """(compiles, launches): the num_stages of each compiled variant and of each launch."""
    from shared_codegen.frontend import launch as launch_mod
    from shared_codegen.runtime import driver, launcher

    compiles, launches = [], []

    def compile_variant(jit_fn, spec_key, num_warps, target, num_stages=3):
        compiles.append(num_stages)
        variant = launch_mod._Variant()
        variant.kernel, variant.function, variant.check = object(), None, None
        variant.binder = _RecordingBinder(launches, num_stages)
        variant.runtime_positions = [i for i, (name, _) in enumerate(spec_key)
                                     if name != "constexpr"]
        variant.shared, variant.num_warps = 0, num_warps
        return variant

    monkeypatch.setattr(launch_mod, "_compile_variant", compile_variant)
    monkeypatch.setattr(driver, "has_gpu", lambda: True)
    monkeypatch.setattr(launcher, "current_stream", lambda: 0)
    for name in ("_fast_launch", "_fast_variants", "_fast_guarded_variants", "_variants"):
        monkeypatch.setattr(_staged_kernel, name, None if name == "_fast_launch" else {})
    return compiles, launches


def test_non_default_num_stages_takes_the_fast_path(fake_gpu, monkeypatch):
    from shared_codegen.frontend import launch as launch_mod

    compiles, launches = fake_gpu
    y = _DevicePointer()
    _staged_kernel[(1,)](y, 1.0, num_stages=2)
    _staged_kernel[(1,)](y, 1.0, num_stages=4)
    _staged_kernel[(1,)](y, 1.0)
    assert compiles == [2, 4, 3]

    def full_path(*args, **kwargs):
        raise AssertionError("the launch took the full path")

    # Every depth seen is now served without the full path, each by its own variant.
    monkeypatch.setattr(launch_mod, "_run_gpu", full_path)
    for stages in (2, 4, None, 2):
        _staged_kernel[(1,)](y, 1.0, num_stages=stages)
    assert compiles == [2, 4, 3]
    assert launches == [2, 4, 3, 2, 4, 3, 2]


def test_num_stages_zero_and_one_share_the_unpipelined_variant(fake_gpu):
    compiles, launches = fake_gpu
    y = _DevicePointer()
    for stages in (0, 1, 0, 1):
        _staged_kernel[(1,)](y, 1.0, num_stages=stages)
    assert compiles == [1] and launches == [1, 1, 1, 1]


def test_bad_num_stages_is_still_refused_by_name(fake_gpu):
    y = _DevicePointer()
    with pytest.raises(KernelError, match=r"^_staged_kernel: num_stages must be an int >= 0, "
                                          r"got -1$"):
        _staged_kernel[(1,)](y, 1.0, num_stages=-1)
    with pytest.raises(KernelError, match=r"num_stages must be an int >= 0, got \[2\]$"):
        _staged_kernel[(1,)](y, 1.0, num_stages=[2])  # unhashable: the full path names it
