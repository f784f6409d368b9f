"""Drawing layouts (matplotlib is optional: the tests that draw skip without it)."""

import builtins

import numpy as np
import pytest

from gluon.layouts import BlockedLayout
from gluon.layouts.cli import main
from gluon.layouts.render import cell_colors, render_conversion, render_layout

SRC = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
DST = BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])


def test_colors_separate_warps_and_lanes():
    warp = np.array([[0, 0, 1]])
    lane = np.array([[0, 31, 0]])
    colors = cell_colors(warp, lane)
    assert colors.shape == (1, 3, 3)
    assert not np.allclose(colors[0, 0], colors[0, 1])   # lane changes lightness
    assert not np.allclose(colors[0, 0], colors[0, 2])   # warp changes hue


def test_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "layout.png"
    render_layout(SRC, (32, 16), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "cvt.svg"
    render_conversion(SRC, DST, (32, 16), svg)
    assert b"<svg" in svg.read_bytes()[:400]


def test_cli_render(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "big.png"
    assert main(["render", repr(SRC), "--shape", "128x128", "-o", str(out)]) == 0
    assert out.exists() and capsys.readouterr().out == f"wrote {out}\n"


def test_missing_matplotlib_gives_a_clear_message(monkeypatch, tmp_path, capsys):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        render_layout(SRC, (32, 16), tmp_path / "x.png")
    assert main(["render", repr(SRC), "--shape", "32x16", "-o", str(tmp_path / "y.png")]) == 2
    assert "needs matplotlib: pip install matplotlib" in capsys.readouterr().err
