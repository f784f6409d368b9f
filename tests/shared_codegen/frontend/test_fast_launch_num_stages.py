"""The launch fast path (frontend/fastpath.py) serves launches that pass `num_stages`: the
depth is part of its key, so each depth compiles once and later launches skip the full path.
The driver is replaced by a recorder, so this runs without a GPU."""

import pytest
from fake_gpu import DevicePointer, forbid_the_full_path, install

import tile
import tile.language as tl
from shared_codegen.errors import KernelError


@tile.jit
def _staged_kernel(Y, s):
    tl.store(Y, s * 2.0)


class _RecordingBinder:
    def __init__(self, launches, num_stages):
        self.launches, self.num_stages = launches, num_stages

    def launch(self, function, grid, num_warps, shared, stream, args):
        self.launches.append(self.num_stages)


@pytest.fixture
def fake_gpu(monkeypatch):
    """(compiles, launches): the num_stages of each compiled variant and of each launch."""
    launches = []
    compiles = install(monkeypatch, (_staged_kernel,),
                       lambda num_stages: _RecordingBinder(launches, num_stages))
    return compiles, launches


def _depths(compiles):
    return [num_stages for _, num_stages in compiles]


def test_non_default_num_stages_takes_the_fast_path(fake_gpu, monkeypatch):
    compiles, launches = fake_gpu
    y = DevicePointer()
    _staged_kernel[(1,)](y, 1.0, num_stages=2)
    _staged_kernel[(1,)](y, 1.0, num_stages=4)
    _staged_kernel[(1,)](y, 1.0)
    assert _depths(compiles) == [2, 4, 3]

    # Every depth seen is now served without the full path, each by its own variant.
    forbid_the_full_path(monkeypatch)
    for stages in (2, 4, None, 2):
        _staged_kernel[(1,)](y, 1.0, num_stages=stages)
    assert _depths(compiles) == [2, 4, 3]
    assert launches == [2, 4, 3, 2, 4, 3, 2]


def test_num_stages_zero_and_one_share_the_unpipelined_variant(fake_gpu):
    compiles, launches = fake_gpu
    y = DevicePointer()
    for stages in (0, 1, 0, 1):
        _staged_kernel[(1,)](y, 1.0, num_stages=stages)
    assert _depths(compiles) == [1] and launches == [1, 1, 1, 1]


def test_bad_num_stages_is_still_refused_by_name(fake_gpu):
    y = DevicePointer()
    with pytest.raises(KernelError, match=r"^_staged_kernel: num_stages must be an int >= 0, "
                                          r"got -1$"):
        _staged_kernel[(1,)](y, 1.0, num_stages=-1)
    with pytest.raises(KernelError, match=r"num_stages must be an int >= 0, got \[2\]$"):
        _staged_kernel[(1,)](y, 1.0, num_stages=[2])  # unhashable: the full path names it
