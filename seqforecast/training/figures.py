"""Figures for a run, drawn with matplotlib's object API on the Agg canvas (no pyplot, no
display): one attention figure per layer with a panel per head, and the forecast figure.

matplotlib is imported where a figure is drawn, not with the module: it is a third of the
CLI's own import time, and a run with `log.figures=false`, a refused config or `--help` never
draws."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _new_figure(width: float, height: float) -> Figure:
    """A figure on its own Agg canvas (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def attention_figure(
    weights: np.ndarray,
    query_spans: Sequence[tuple[int, int]],
    key_spans: Sequence[tuple[int, int]],
    title: str,
    signed: bool,
) -> Figure:
    """weights [H, Lq, Lk] -> a row of H heatmaps, one colour bar. Axes in time steps for
    point tokens ([first, last] spans of one step), else one cell per patch, ticks labelled
    with the steps each covers; variate tokens (each the whole window) by their channel index.

    Signed (differential) maps use a diverging colour map centred on zero, so zeros outside a
    block-local window read as white; softmax maps use a sequential one from zero.
    """
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.ticker import MaxNLocator

    points = all(a == b for a, b in list(query_spans) + list(key_spans))
    channels = len(set(query_spans) | set(key_spans)) == 1 and len(key_spans) > 1
    heads = weights.shape[0]
    # A fixed layout: matplotlib's constrained layout would double the drawing time.
    fig = _new_figure(2.6 * heads + 1.2, 3.0)
    axes = fig.subplots(1, heads, squeeze=False)[0]
    fig.subplots_adjust(left=0.3 / heads + 0.04, right=0.9, bottom=0.17, top=0.8, wspace=0.3)
    if points:  # pixel edges sit half a step around each time step
        q0, q1, k0, k1 = query_spans[0][0], query_spans[-1][0], key_spans[0][0], key_spans[-1][0]
    else:  # one cell per token
        q0, q1, k0, k1 = 0, len(query_spans) - 1, 0, len(key_spans) - 1
    extent = (k0 - 0.5, k1 + 0.5, q1 + 0.5, q0 - 0.5)
    unit = "time step" if points else "channel" if channels else "patch (time steps)"
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
        ax.set_xlabel(f"key {unit}", fontsize=8)
        if head == 0:
            ax.set_ylabel(f"query {unit}", fontsize=8)
        ax.tick_params(labelsize=7)
        if points or channels:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        else:
            _span_ticks(ax.xaxis, key_spans)
            _span_ticks(ax.yaxis, query_spans)
    fig.colorbar(image, ax=list(axes), fraction=0.03, pad=0.02)
    fig.suptitle(title, fontsize=10)
    return fig


def _span_ticks(axis, spans: Sequence[tuple[int, int]], most: int = 6) -> None:
    """At most `most` ticks on token cells, each labelled "first-last" (time steps)."""
    every = max(1, -(-len(spans) // most))
    ticks = list(range(0, len(spans), every))
    axis.set_ticks(ticks)
    axis.set_ticklabels([f"{spans[i][0]}-{spans[i][1]}" for i in ticks])


def forecast_figure(
    src: np.ndarray,
    target: np.ndarray,
    forecasts: Mapping[str, np.ndarray],
    title: str,
    bands: Mapping[float, tuple[np.ndarray, np.ndarray]] | None = None,
    own: tuple[np.ndarray, np.ndarray] | None = None,
) -> Figure:
    """src [in_len], target [out_len] and forecasts {name: [out_len]} of one series; `bands`:
    the model's conformal intervals {level: (lower, upper) [out_len]}, shaded; `own`: a
    probabilistic model's own 80% interval (lower, upper), dotted."""
    from matplotlib.ticker import MaxNLocator

    in_len, out_len = len(src), len(target)
    past = np.arange(in_len)
    future = np.arange(in_len, in_len + out_len)
    fig = _new_figure(7.0, 3.6)
    ax = fig.subplots()
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.14, top=0.9)
    ax.plot(past, src, color="black", label="input")
    ax.plot(future, target, color="black", linestyle="--", label="truth")
    for level, (lower, upper) in sorted((bands or {}).items(), reverse=True):  # widest first
        ax.fill_between(future, lower, upper, color="tab:red", alpha=0.12 + 0.1 * (level < 0.9),
                        linewidth=0, label=f"model {100 * level:g}% band")
    if own is not None:
        for i, edge in enumerate(own):
            ax.plot(future, edge, color="tab:red", linestyle=":", linewidth=1.3,
                    label="model's own 80%" if i == 0 else None)
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
