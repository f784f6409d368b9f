"""Issue 16, item 6 on the GPU: the launch fast path never serves a kernel compiled for an
earlier value of a global it folded in, and kernels that fold none keep the launcher
without the check."""

import pytest

import tile
import tile.language as tl

pytestmark = pytest.mark.gpu


class _Cfg:
    scale = 2.0


CFG = _Cfg()


@tile.jit
def _scale_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, tl.load(X + offs) * CFG.scale)


@tile.jit
def _plain_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, tl.load(X + offs) * 2.0)


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    return torch


def test_fast_path_checks_folded_globals(torch, monkeypatch):
    x = torch.arange(128, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    early = _scale_kernel[(1,)]  # a launcher built before anything was compiled
    for value in (2.0, 3.0, 3.0, 2.0, 0.5):
        monkeypatch.setattr(CFG, "scale", value)
        _scale_kernel[(1,)](x, y, 128)
        torch.cuda.synchronize()
        assert torch.equal(y, x * value), value
        y.zero_()
        early(x, y, 128)
        torch.cuda.synchronize()
        assert torch.equal(y, x * value), value
    assert _scale_kernel._fast_guarded
    assert len(_scale_kernel._fast_guarded_variants) == 1


def test_kernel_without_globals_keeps_the_unchecked_launcher(torch):
    x = torch.arange(128, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    for _ in range(2):
        _plain_kernel[(1,)](x, y, 128)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2.0)
    assert not _plain_kernel._fast_guarded and len(_plain_kernel._fast_variants) == 1
