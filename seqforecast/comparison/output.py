"""A comparison written out: Markdown tables (compare.md, also printed), CSV (compare.csv for the
summaries, compare_runs.csv for every run) and a figure (compare.png: each seed's value per
group, on a log scale, with the baselines)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..training.figures import render
from ..training.files import atomic_write, atomic_write_text
from ..training.report import SPLIT_TITLES, describe_split
from .summary import PAIRED, SCALED_MSE, Comparison

PAIRED_NOTE = (
    "Paired ratio: the geometric mean over shared seeds of group ÷ reference, with a 95% "
    "Student-t interval on the log ratios (a paired t-test); *within noise* when the interval "
    "holds 1. Mean ± sample standard deviation over seeds; n runs."
)


def fmt(value: float, digits: int = 3) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}g}"


def mean_std(summary) -> str:
    if summary.n == 0:
        return "–"
    if summary.n == 1:
        return fmt(summary.mean)
    return f"{fmt(summary.mean)} ± {fmt(summary.std, 2)}"


def paired_cell(paired) -> str:
    if paired is None:
        return "reference"
    if paired.n == 0:
        return "no shared seeds"
    if paired.n < 2:
        return f"{paired.ratio:.3f} (n=1)"
    return f"{paired.ratio:.3f} [{paired.low:.3f}, {paired.high:.3f}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def summary_table(result: Comparison) -> list[str]:
    """One row per group: n, MSE (and in scaled units, where the runs have them), MSE ÷ each
    baseline, paired MSE ratio and verdict (and the scaled one's), training seconds."""
    ratio_metrics = [m.name for m in result.metrics if m.name.startswith("MSE ÷")]
    scaled = any(m.name == SCALED_MSE for m in result.metrics)
    errors = ["MSE", *([SCALED_MSE] if scaled else [])]
    header = ["group", "n", *(f"{result.split} {m}" for m in errors),
              *(m.replace("MSE ", "") for m in ratio_metrics)]
    for m in errors:
        header += [f"{m} vs {result.reference.label} [95% CI]", "verdict"]
    header.append("train s")
    rows = []
    for group in result.groups:
        row = [
            f"`{group.label}`",
            str(len(group.runs)),
            *(mean_std(result.summaries[group.label, m]) for m in errors),
            *(mean_std(result.summaries[group.label, m]) for m in ratio_metrics),
        ]
        for m in errors:
            paired = result.paired.get((group.label, m))
            row += [paired_cell(paired), "reference" if paired is None else paired.verdict]
        rows.append([*row, fmt(result.seconds[group.label].mean)])
    return _table(header, rows)


def metric_tables(result: Comparison) -> list[str]:
    lines = []
    for metric in result.metrics:
        lines += ["", f"### {result.split} {metric.name}", ""]
        header = ["group", "mean ± std", "n"]
        paired = metric.name in PAIRED
        if paired:
            header += [f"÷ {result.reference.label} [95% CI]", "verdict"]
        rows = []
        for group in result.groups:
            summary = result.summaries[group.label, metric.name]
            row = [f"`{group.label}`", mean_std(summary), str(summary.n)]
            if paired:
                pair = result.paired.get((group.label, metric.name))
                row += [paired_cell(pair), "reference" if pair is None else pair.verdict]
            rows.append(row)
        lines += _table(header, rows)
    return lines


def markdown(result: Comparison, command: str) -> str:
    first = result.groups[0].runs[0].metrics["splits"][result.split]
    title = SPLIT_TITLES.get(result.split, result.split)
    detail = describe_split(first)
    counted = sum(len(g.runs) for g in result.groups)
    units = f"; `(scaled)`: in {first['scaled_units']}" if "scaled_units" in first else ""
    lines = [
        "# seqforecast compare",
        "",
        f"    {command}",
        "",
        f"Split: {title}{': ' + detail if detail else ''}. Errors in the data's units{units}.",
        f"{counted} runs counted in {len(result.groups)} group(s); reference "
        f"`{result.reference.label}`. {PAIRED_NOTE}",
        "",
        "## Summary",
        "",
        *summary_table(result),
        "",
        "Baselines on the same windows (MSE, mean over the runs): "
        + ", ".join(f"{name} {fmt(s.mean)}" for name, s in result.baselines.items())
        + "."
        + (
            " In scaled units: "
            + ", ".join(f"{name} {fmt(s.mean)}" for name, s in result.baselines_scaled.items())
            + "."
            if result.baselines_scaled
            else ""
        ),
        "",
        "## Per metric",
        *metric_tables(result),
    ]
    if result.excluded:
        lines += ["", "## Not counted", ""]
        lines += [f"- `{run.path}`: {run.problem}" for run in result.excluded]
    return "\n".join(lines) + "\n"


def summary_csv(result: Comparison) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["split", "group", "metric", "mean", "std", "n", "paired_ratio",
                     "ci_low", "ci_high", "paired_seeds", "verdict"])
    for group in result.groups:
        for metric in result.metrics:
            s = result.summaries[group.label, metric.name]
            pair = result.paired.get((group.label, metric.name))
            verdict = pair.verdict if pair else ("reference" if metric.name in PAIRED else "")
            extra = [pair.ratio, pair.low, pair.high, pair.n] if pair else ["", "", "", ""]
            writer.writerow([result.split, group.label, metric.name, s.mean, s.std, s.n,
                             *extra, verdict])
    return out.getvalue()


def runs_csv(result: Comparison) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["group", "seed", "run_dir", "status", *(m.name for m in result.metrics)])
    for group in result.groups:
        for run in group.runs:
            values = [m.read(run.metrics) for m in result.metrics]
            writer.writerow([group.label, run.seed, run.path, "counted", *values])
    for run in result.excluded:
        writer.writerow(["", run.seed, run.path, run.problem, *([""] * len(result.metrics))])
    return out.getvalue()


def figure(result: Comparison, path: Path) -> None:
    """Each seed's MSE as a point per group (log scale), the group's geometric mean as a bar,
    the baselines as dashed lines."""
    read = result.metrics[0].read
    fig = Figure(figsize=(max(4.0, 1.4 * len(result.groups) + 2), 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for i, group in enumerate(result.groups):
        values = [read(run.metrics) for run in group.runs]
        offsets = [(k - (len(values) - 1) / 2) * 0.06 for k in range(len(values))]
        ax.scatter([i + o for o in offsets], values, s=22, zorder=3)
        positive = [v for v in values if v > 0]
        if positive:
            centre = math.exp(math.fsum(math.log(v) for v in positive) / len(positive))
            ax.hlines(centre, i - 0.25, i + 0.25, colors="black", linewidth=1.5, zorder=4)
    for k, (name, s) in enumerate(result.baselines.items()):
        ax.axhline(s.mean, linestyle="--", linewidth=1, color=f"C{(k + 3) % 10}", label=name)
    ax.set_yscale("log")
    ax.set_xticks(range(len(result.groups)))
    ax.set_xticklabels([g.label for g in result.groups], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(f"{result.split} MSE (log scale)")
    ax.set_title(f"{result.split} MSE per seed; bar: geometric mean", fontsize=10)
    if result.baselines:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    png, _, _ = render(fig, dpi=110)
    atomic_write(path, lambda f: f.write(png))


def write_all(result: Comparison, out_dir: Path, command: str) -> str:
    """Write compare.md, compare.csv, compare_runs.csv and compare.png; return the Markdown."""
    text = markdown(result, command)
    atomic_write_text(out_dir / "compare.md", text)
    atomic_write_text(out_dir / "compare.csv", summary_csv(result))
    atomic_write_text(out_dir / "compare_runs.csv", runs_csv(result))
    figure(result, out_dir / "compare.png")
    return text
