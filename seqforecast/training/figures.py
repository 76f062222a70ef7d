"""Figures for a run, drawn with matplotlib's object API on the Agg canvas (no pyplot, no
display): one attention figure per layer with a panel per head, and the forecast figure."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def attention_figure(
    weights: np.ndarray,
    query_steps: Sequence[int],
    key_steps: Sequence[int],
    title: str,
    signed: bool,
) -> Figure:
    """weights [H, Lq, Lk] -> a row of H heatmaps, axes in time steps, one colour bar.

    Signed (differential) maps use a diverging colour map centred on zero, so zeros outside a
    block-local window read as white; softmax maps use a sequential one from zero.
    """
    heads = weights.shape[0]
    # A fixed layout: matplotlib's constrained layout would double the drawing time.
    fig = Figure(figsize=(2.6 * heads + 1.2, 3.0))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, heads, squeeze=False)[0]
    fig.subplots_adjust(left=0.3 / heads + 0.04, right=0.9, bottom=0.17, top=0.8, wspace=0.3)
    # Pixel edges sit half a step around each time step.
    extent = (key_steps[0] - 0.5, key_steps[-1] + 0.5, query_steps[-1] + 0.5, query_steps[0] - 0.5)
    if signed:
        bound = max(float(np.abs(weights).max()), 1e-12)
        style = dict(cmap="RdBu_r", norm=TwoSlopeNorm(vcenter=0.0, vmin=-bound, vmax=bound))
    else:
        style = dict(cmap="viridis", vmin=0.0, vmax=max(float(weights.max()), 1e-12))
    image = None
    for head, ax in enumerate(axes):
        image = ax.imshow(
            weights[head], extent=extent, aspect="auto", interpolation="nearest", **style
        )
        ax.set_title(f"head {head}", fontsize=9)
        ax.set_xlabel("key time step", fontsize=8)
        if head == 0:
            ax.set_ylabel("query time step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.colorbar(image, ax=list(axes), fraction=0.03, pad=0.02)
    fig.suptitle(title, fontsize=10)
    return fig


def forecast_figure(
    src: np.ndarray, target: np.ndarray, forecasts: Mapping[str, np.ndarray], title: str
) -> Figure:
    """src [in_len], target [out_len] and forecasts {name: [out_len]} of one series."""
    in_len, out_len = len(src), len(target)
    past = np.arange(in_len)
    future = np.arange(in_len, in_len + out_len)
    fig = Figure(figsize=(7.0, 3.6))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.14, top=0.9)
    ax.plot(past, src, color="black", label="input")
    ax.plot(future, target, color="black", linestyle="--", label="truth")
    styles = {"model": dict(color="tab:red", linewidth=2.0)}
    for name, values in forecasts.items():
        ax.plot(future, values, label=name, **styles.get(name, dict(linewidth=1.0, alpha=0.8)))
    ax.axvline(in_len - 0.5, color="grey", linewidth=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("time step")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return fig


def render(fig: Figure, dpi: int = 100) -> tuple[bytes, int, int]:
    """Draw once: (PNG bytes, width, height), for the run dir and TensorBoard alike."""
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=dpi)
    width, height = (round(v) for v in fig.get_size_inches() * dpi)
    return png.getvalue(), width, height
