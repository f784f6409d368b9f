"""The launch fast path (frontend/fastpath.py) calls a grid function itself, with the arguments
by name as the full path does, and launches its grid like a tuple; autotuned kernels launch
this way once their config is chosen (tutorial 06's forward did two full launches per call).
The driver is replaced by a recorder, so this runs without a GPU."""

import pytest
from fake_gpu import DevicePointer, forbid_the_full_path, install

import tile
import tile.language as tl


@tile.jit
def _grid_kernel(Y, n, BLOCK: tl.constexpr):
    tl.store(Y + tl.program_id(0), n * BLOCK)


@tile.autotune(configs=[tile.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
@tile.jit
def _tuned_kernel(Y, n, BLOCK: tl.constexpr):
    tl.store(Y + tl.program_id(0), n * BLOCK)


class _RecordingBinder:
    def __init__(self, launches):
        self.launches = launches

    def launch(self, function, grid, num_warps, shared, stream, args):
        self.launches.append((tuple(grid), num_warps))


@pytest.fixture
def fake_gpu(monkeypatch):
    """(compiles, launches) recorded; full_path() makes the full path fail from then on."""
    launches = []
    compiles = install(monkeypatch, (_grid_kernel, _tuned_kernel.fn),
                       lambda num_stages: _RecordingBinder(launches))
    return compiles, launches, lambda: forbid_the_full_path(monkeypatch)


def test_a_grid_function_is_served_by_the_fast_path(fake_gpu):
    compiles, launches, full_path = fake_gpu
    y = DevicePointer()
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (meta["n"] // meta["BLOCK"],)

    _grid_kernel[grid](y, 256, BLOCK=64)
    full_path()
    _grid_kernel[grid](y, 512, BLOCK=64)
    assert compiles == [("_grid_kernel", 3)]
    assert launches == [((4,), 4), ((8,), 4)]
    assert seen[-1] == {"Y": y, "n": 512, "BLOCK": 64}


def test_a_grid_function_asking_for_a_missing_name_is_reported(fake_gpu):
    _compiles, _launches, full_path = fake_gpu
    y = DevicePointer()
    _grid_kernel[(1,)](y, 256, BLOCK=64)
    full_path()
    with pytest.raises(tile.ArgumentError, match=r"asks for META\['BLOCK_M'\], which is not a "
                                                 r"parameter of _grid_kernel"):
        _grid_kernel[lambda meta: (meta["BLOCK_M"],)](y, 256, BLOCK=64)


def test_an_autotuned_launch_takes_the_fast_path_once_tuned(fake_gpu):
    compiles, launches, full_path = fake_gpu
    y = DevicePointer()
    grid = lambda meta: (meta["n"] // meta["BLOCK"],)  # noqa: E731
    _tuned_kernel[grid](y, 256)
    full_path()
    _tuned_kernel[grid](y, 256)
    _tuned_kernel[grid](y, 128)
    assert compiles == [("_tuned_kernel", 3)]
    assert launches == [((4,), 4), ((4,), 4), ((2,), 4)]
