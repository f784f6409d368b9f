"""Drawing layouts: a grid of the tensor, each cell colored by the thread holding it.

The picture follows the CuTe / Gluon documentation figures: one cell per element, hue by warp,
lightness by lane inside the warp, and (for small tensors) the text ``T<thread>`` over
``R<register>``. A conversion is drawn as the two layouts side by side with the plan's summary
under them. matplotlib is an optional dependency (``pip install matplotlib``); everything else
in ``gluon.layouts`` works without it.
"""

from __future__ import annotations

import colorsys
import textwrap

import numpy as np

__all__ = ["render_layout", "render_conversion", "cell_colors"]

_WARP_HUES = [0.58, 0.08, 0.33, 0.83, 0.0, 0.5, 0.15, 0.7]


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("drawing layouts needs matplotlib: pip install matplotlib") from None
    return plt


def cell_colors(holder_warp: np.ndarray, holder_lane: np.ndarray) -> np.ndarray:
    """RGB per element: hue from the warp, lightness from the lane (32 steps)."""
    out = np.zeros(holder_warp.shape + (3,))
    for index in np.ndindex(holder_warp.shape):
        w, lane = int(holder_warp[index]), int(holder_lane[index])
        hue = _WARP_HUES[w % len(_WARP_HUES)] + 0.02 * (w // len(_WARP_HUES))
        light = 0.85 - 0.45 * (lane / 31)
        out[index] = colorsys.hls_to_rgb(hue % 1.0, light, 0.65)
    return out


def _first_holders(layout, shape):
    """(warp, lane, register, copies) of the first location holding each element."""
    from shared_codegen.layouts.planner import placement
    place = placement(layout, shape)
    rows, cols = shape
    warp = np.full(shape, -1)
    lane = np.full(shape, -1)
    reg = np.full(shape, -1)
    copies = np.zeros(shape, dtype=int)
    for (w, ln, r), flat in np.ndenumerate(place):
        i, j = int(flat) % rows, int(flat) // rows
        copies[i, j] += 1
        if warp[i, j] < 0:
            warp[i, j], lane[i, j], reg[i, j] = w, ln, r
    return warp, lane, reg, copies


def _draw(ax, layout, shape, title):
    if len(shape) != 2:
        raise ValueError(f"render draws 2-D tensors, got shape {list(shape)}")
    warp, lane, reg, copies = _first_holders(layout, shape)
    rows, cols = shape
    ax.imshow(cell_colors(warp, lane), interpolation="nearest", aspect="equal")
    if rows * cols <= 64 * 64 and max(rows, cols) <= 64:
        size = max(2.5, min(7.0, 260.0 / max(rows, cols)))
        for i in range(rows):
            for j in range(cols):
                text = f"T{warp[i, j] * 32 + lane[i, j]}\nR{reg[i, j]}"
                # the darker half of the lane shades needs light text
                color = "white" if lane[i, j] >= 20 else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=size,
                        color=color, linespacing=0.9)
    ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
    if max(rows, cols) <= 64:
        ax.grid(which="minor", color="white", linewidth=0.4)
    ax.tick_params(which="minor", length=0)
    step = max(1, cols // 8)
    ax.set_xticks(range(0, cols, step))
    ax.set_yticks(range(0, rows, max(1, rows // 8)))
    ax.set_xlabel("dim1")
    ax.set_ylabel("dim0")
    extra = "  (* broadcast: first copy shown)" if copies.max() > 1 else ""
    ax.set_title(title + extra, fontsize=8)


def _figure_size(shape, panels):
    rows, cols = shape
    scale = 0.32 if max(rows, cols) <= 32 else 0.16 if max(rows, cols) <= 64 else 0.08
    width = max(4.0, min(14.0, cols * scale)) * panels
    height = max(3.5, min(14.0, rows * scale)) + 0.8
    return width, height


def _save(fig, path):
    fmt = "svg" if str(path).lower().endswith(".svg") else "png"
    fig.savefig(path, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")


def render_layout(layout, shape, path) -> None:
    """Draw ``layout`` over a 2-D ``shape`` to ``path`` (.png, or .svg)."""
    plt = _pyplot()
    shape = tuple(int(s) for s in shape)
    fig, ax = plt.subplots(figsize=_figure_size(shape, 1))
    _draw(ax, layout, shape, _title(repr(layout), 70))
    fig.text(0.5, 0.01, "color: hue = warp, darker = higher lane;  T = thread (32*warp+lane),"
             " R = register", ha="center", fontsize=7)
    _save(fig, path)
    plt.close(fig)


def render_conversion(src, dst, shape, path, dtype="fp16") -> None:
    """Draw ``src`` and ``dst`` side by side with the conversion plan under them."""
    from shared_codegen.layouts.planner import plan_conversion
    plt = _pyplot()
    shape = tuple(int(s) for s in shape)
    plan = plan_conversion(src, dst, shape, dtype)
    fig, axes = plt.subplots(1, 2, figsize=_figure_size(shape, 2))
    _draw(axes[0], src, shape, _title("src: " + repr(src)))
    _draw(axes[1], dst, shape, _title("dst: " + repr(dst)))
    fig.text(0.5, -0.02, f"{plan.kind} ({dtype}): {plan.cost}", ha="center", fontsize=8)
    _save(fig, path)
    plt.close(fig)


def _title(text: str, width: int = 48) -> str:
    # a layout's repr is its constructor call; wrap it so side-by-side titles do not collide
    return textwrap.fill(text, width=width, subsequent_indent="  ")
