"""What a run shows: TensorBoard scalars, attention maps and forecast figures, hparams.

Everything goes into the run dir itself: the event file, and for users without TensorBoard
the same maps as `.npz` (raw arrays) and `.png` under `figures/<point>/`, where a point is
`epoch_000` (before training), every `log.attention_every` epochs, and `final` (the best
weights, logged one step after the last).

TensorBoard tags: train/mse, train/lr, train/grad_norm, train/tokens_per_s, train/data_fraction
(per interval of trainer.log_every steps);
<split>/mse and <split>/mae for val (the selection set) and test_curve (synthetic data) every
epoch, for test (held out) every `log.test_every` epochs; baseline/<name>/<split>_mse and
lambda/<stack>/layer<i> (per epoch); attention/<stack>/layer<i> and test/forecast (images);
config (text); hparams with final/<split>_<metric>, written into this run's own event file (no
sub-run). Every error is in the data's own units, train/mse included, so the curves can be read
against each other.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path

from tensorboard.compat.proto.summary_pb2 import Summary
from torch import nn
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from ..data import ForecastData
from ..probabilistic.bands import Bands, read_bands
from ..probabilistic.quantiles import QuantileError, interval_bounds
from ..probabilistic.sums import OWN, is_interval_score
from .baselines import Forecaster
from .evaluation import Evaluator
from .figures import attention_figure, forecast_figure, render
from .files import atomic_write
from .metrics import METRICS, evaluation
from .probe import probe, save_maps_npz


class Monitor:
    """The loop's hooks; this base does nothing (a run without logging)."""

    def on_step(self, step: int, scalars: Mapping[str, float]) -> None:
        pass

    def on_epoch_end(self, epoch: int, step: int, model: nn.Module, val: Mapping) -> None:
        pass

    def on_start(self, model: nn.Module, config_yaml: str) -> None:
        pass

    def on_end(self, model: nn.Module, step: int, results: Mapping, hparam_values: Mapping):
        pass

    def close(self) -> None:
        pass


def attention_scalars(model: nn.Module) -> dict[str, float]:
    """{'<name>/<stack>/layer<i>': value} for every learned scalar an attention logs (diff's
    lambda: Attention.logged_scalars), over the family's stacks."""
    found = {}
    for stack, layers in model.attention_stacks().items():
        for i, attn in enumerate(layers, start=1):
            for name, value in attn.logged_scalars().items():
                found[f"{name}/{stack}/layer{i}"] = value
    return found


def save_visuals(
    directory: Path,
    model: nn.Module,
    data: ForecastData,
    baselines: Mapping[str, Forecaster],
    label: str,
    bands: Bands | None = None,
) -> dict[str, Summary.Image]:
    """Probe the model on the test curve; write attention.npz and one PNG per layer and the
    forecast PNG into `directory` (with the model's conformal `bands` shaded, when given).
    Returns {tag: the same PNG as a TensorBoard image}. Maps of a backend whose weights can be
    negative (the model's `signed_maps`) are drawn on a scale centred on zero."""
    directory.mkdir(parents=True, exist_ok=True)
    signed = model.signed_maps
    forecast, maps = probe(model, data.probe.src)
    atomic_write(directory / "attention.npz", lambda f: save_maps_npz(f, maps))
    images = {}
    for m in maps:
        title = f"{m.stack} layer {m.layer} ({label})"
        images[f"attention/{m.stack}/layer{m.layer}"] = _draw(
            attention_figure(m.weights, m.query_spans, m.key_spans, title, signed),
            directory / f"{m.name}.png",
        )

    def first_target(values):  # [1, L, T] in model units -> [L] in the data's units
        raw = data.to_raw(values[..., : data.n_targets], data.probe.series)
        return raw[0, :, 0].cpu().numpy()

    window = data.probe.src
    lines = {"model": first_target(forecast)}
    lines.update({name: first_target(f(window)) for name, f in baselines.items()})
    title = f"{data.probe_name} ({label})"
    shaded = None
    if bands is not None:  # offsets in model units around the probe's forecast
        around = bands.around(forecast[..., : data.n_targets])
        shaded = {level: (first_target(lower), first_target(upper))
                  for level, (lower, upper) in around.items()}
    own = own_interval(model, window, data.n_targets)
    own = None if own is None else (first_target(own[0]), first_target(own[1]))
    figure = forecast_figure(first_target(window), first_target(data.probe.target), lines, title,
                             shaded, own)
    images["test/forecast"] = _draw(figure, directory / "forecast.png")
    return images


def own_interval(model: nn.Module, window, n_targets: int, coverage: float = 0.8):
    """A probabilistic model's own central `coverage` interval around `window` (lower, upper)
    [1, out_len, T] in model units; None for a point model or one without those levels."""
    output = getattr(model, "output", None)
    if output is None or not output.probabilistic:
        return None
    tail = (1.0 - coverage) / 2.0
    levels = output.own_levels((tail, 0.5, 1.0 - tail))  # a quantile loss: its own levels
    try:
        low, high = interval_bounds(levels, coverage)
    except QuantileError:
        return None
    with evaluation(model):
        quantiles = output.quantiles(model(window, distribution=True), levels)[..., :n_targets, :]
    return quantiles[..., low], quantiles[..., high]


def _draw(fig, path: Path) -> Summary.Image:
    png, width, height = render(fig)
    atomic_write(path, lambda f: f.write(png))
    return Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)


def flatten(config: Mapping, prefix: str = "") -> dict:
    """Nested config -> {'a.b': value} with values TensorBoard's hparams accept."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:  # None, lists
            flat[name] = str(value)
    return flat


def _wait_to_sort_after(run_dir: Path) -> None:
    """Waits (under a second) until a new event file's name sorts after the run dir's own.

    TensorBoard reads a run dir's event files in name order, and a name is
    `events.out.tfevents.<whole seconds>.<host>.<pid>.<counter>`: a resumed session that
    starts within the second its stopped one did would sort by pid and counter as strings
    ("10" before "9"), and its steps would be read before the ones they follow."""
    stamps = [int(p.name.split(".")[3]) for p in run_dir.glob("events.out.tfevents.*")
              if p.name.split(".")[3].isdigit()]
    if stamps and (wait := max(stamps) + 1 - time.time()) > 0:
        time.sleep(wait)


class RunMonitor(Monitor):
    """Writes one run's TensorBoard events and figures into its run dir."""

    def __init__(
        self,
        run_dir: Path,
        evaluator: Evaluator,
        attention_every: int,
        purge_step: int | None = None,
        test_every: int = 1,
        figures: bool = True,
    ):
        """`purge_step`: when resuming, the first step not covered by the checkpoint; events
        a stopped session wrote from there on are dropped, so no step appears twice.
        `test_every`: epochs between scores of the held-out test set (large: 8192 series by
        default); the validation set and the test curve are scored every epoch. `figures`:
        False draws no attention maps or forecasts (their PNGs, attention.npz, images)."""
        self.run_dir = Path(run_dir)
        self.evaluator = evaluator
        self.test_every = test_every
        self.attention_every = attention_every
        self.figures = figures
        _wait_to_sort_after(self.run_dir)
        self.writer = SummaryWriter(log_dir=str(self.run_dir), purge_step=purge_step)

    # -- hooks -----------------------------------------------------------------------------

    def on_start(self, model: nn.Module, config_yaml: str) -> None:
        # TensorBoard's text plugin renders markdown: indent to show YAML verbatim.
        self.writer.add_text("config", "    " + config_yaml.replace("\n", "\n    "), 0)
        self._visuals(model, step=0, point="epoch_000", label="before training")

    def on_step(self, step: int, scalars: Mapping[str, float]) -> None:
        for name, value in scalars.items():
            self.writer.add_scalar(f"train/{name}", value, step)

    def on_epoch_end(self, epoch: int, step: int, model: nn.Module, val: Mapping) -> None:
        for split in self.evaluator.splits:
            if split == "test" and not (self.test_every and epoch % self.test_every == 0):
                continue
            metrics = val if split == "val" else self.evaluator.model_metrics(model, split)
            for name in ("mse", "mae"):
                self.writer.add_scalar(f"{split}/{name}", metrics[name], step)
            for baseline, row in self.evaluator.baseline_metrics(split).items():
                self.writer.add_scalar(f"baseline/{baseline}/{split}_mse", row["mse"], step)
        for tag, value in attention_scalars(model).items():
            self.writer.add_scalar(tag, value, step)
        if self.attention_every and epoch and epoch % self.attention_every == 0:  # 0: on_start
            self._visuals(model, step, f"epoch_{epoch:03d}", f"epoch {epoch}")
        self.writer.flush()

    def on_end(self, model: nn.Module, step: int, results: Mapping, hparam_values: Mapping):
        """Final visuals of the best weights, and the hparams row with the final metrics."""
        # the kept model's bands (bands.json, written just before) shaded in the final figure
        self._visuals(model, step + 1, "final", "best weights", read_bands(self.run_dir))
        metrics = {
            f"final/{split}_{name}": rows["model"][name]
            for split, rows in results.items()
            for name in METRICS
        }
        # the test bands' scores (conformal, and a probabilistic model's own_*), where finite
        metrics.update({
            f"final/test_{name}": value for name, value in results["test"]["model"].items()
            if is_interval_score(name.removeprefix(OWN)) and math.isfinite(value)
        })
        for summary in hparams(dict(hparam_values), metrics):
            self.writer.file_writer.add_summary(summary, step + 1)
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, step + 1)
        self.writer.flush()

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()

    # -- internals -------------------------------------------------------------------------

    def _visuals(
        self, model: nn.Module, step: int, point: str, label: str, bands: Bands | None = None
    ) -> None:
        if not self.figures:
            return
        images = save_visuals(
            self.run_dir / "figures" / point,
            model,
            self.evaluator.data,
            self.evaluator.baselines,
            label,
            bands,
        )
        for tag, image in images.items():  # the PNG as drawn, not decoded and re-encoded
            summary = Summary(value=[Summary.Value(tag=tag, image=image)])
            self.writer.file_writer.add_summary(summary, step)
