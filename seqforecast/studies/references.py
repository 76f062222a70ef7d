"""A study's reference rows: what each cell's trained rows are scored beside, none of it trained
by the study (`references:` in its file).

    references:
      linear: true                    # the best least-squares linear fit of the cell's windows
      published: itransformer_table10 # the published rows (seqforecast/published/results.py)
      paper_batch: {patchtst: 128}    # the test windows a model's published loader scores

- linear: NLinear (the run's own least-squares baseline, from its metrics.json) and DLinear's
  function class fitted in closed form on the cell's training windows and scored on its test
  windows (a seasonal-trend split of the window, each part through a map shared by the channels:
  as the split is invertible, that is every linear map of a channel's window); where the file
  has exogenous series, a linear map of every input channel's window too. The best of them (on
  test MSE) is the cell's reference: each row's paired MSE ratio to it, over seeds.
- paper_batch: the MSE and MAE on the test windows the model's published code scores: its test
  loader drops the last incomplete batch of that size (`drop_last=True`), per channel for a
  channel-independent model, so the newest windows are never scored. The cell's linear fits are
  scored on those windows too, beside the model's.

Both are read from a run dir once and kept beside it (`reference_scores.json`), and in the
study's report, so a report rebuilt without the run dirs keeps them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..options import ConfigError
from ..published.results import published_table

SCORES_FILE = "reference_scores.json"
LINEAR = {"nlinear": "nlinear", "dlinear": "dlinear",  # the target channels' own windows
          "linear_all_inputs": "linear, every input"}  # exogenous series too, where there are


@dataclass(frozen=True)
class References:
    linear: bool = False
    published: str | None = None  # a table of seqforecast/published/results.py
    paper_batch: dict[str, int] = field(default_factory=dict)  # model -> its test loader's batch

    @classmethod
    def parse(cls, raw: dict | None, models: list[str]) -> References | None:
        if not raw:
            return None
        unknown = set(raw) - {"linear", "published", "paper_batch"}
        if unknown:
            raise ConfigError(f"references.{sorted(unknown)[0]} is not known: give linear, "
                             f"published, paper_batch")
        found = cls(bool(raw.get("linear", False)), raw.get("published"),
                    dict(raw.get("paper_batch") or {}))
        if found.published is not None:
            try:
                published_table(found.published)
            except KeyError as err:
                raise ConfigError(f"references.published: {err.args[0]}") from None
        for model, batch in found.paper_batch.items():
            if model not in models or type(batch) is not int or batch < 1:
                raise ConfigError(f"references.paper_batch.{model}={batch!r} is not allowed: a "
                                 f"study model's test batch, an integer >= 1")
        return found


def _cached(run_dir: Path, key: str, compute):
    """A score of the run dir kept in its reference_scores.json (computed the first time)."""
    path = Path(run_dir) / SCORES_FILE
    kept = json.loads(path.read_text()) if path.is_file() else {}
    if key not in kept:
        kept[key] = compute()
        path.write_text(json.dumps(kept, indent=1) + "\n")
    return kept[key]


def linear_fits(run_dir: Path) -> dict[str, dict[str, float]]:
    """The cell's linear fits ({name: {mse, mae}}, z units) from one of its runs."""
    return _cached(run_dir, "linear", lambda: _linear_fits(Path(run_dir)))


def linear_paper_count(run_dir: Path, batch: int) -> dict[str, dict[str, float]]:
    """The cell's linear fits scored on the windows a test loader of `batch` scores."""
    return _cached(run_dir, f"linear_paper_batch_{batch}",
                   lambda: _linear_paper_count(Path(run_dir), batch))


def paper_count(run_dir: Path, batch: int) -> dict[str, float]:
    """The model's test MSE and MAE on the windows a test loader of `batch` scores."""
    return _cached(run_dir, f"paper_batch_{batch}", lambda: _paper_count(Path(run_dir), batch))


def _scores(error: torch.Tensor) -> dict[str, float]:
    return {"mse": float(error.square().mean()), "mae": float(error.abs().mean())}


def _linear_errors(run) -> dict[str, torch.Tensor]:
    """Each least-squares fit's test errors ([N, out_len, targets], z units): DLinear's class,
    and a map of every input where the file has exogenous series."""
    from ..model.linear_path import least_squares

    data, targets = run.data, run.data.n_targets
    # Every channel of every window one sample: its window's values in, its horizon out.
    x = data.train.src[..., :targets].transpose(1, 2).reshape(-1, data.train.src.shape[1])
    y = data.train.target.transpose(1, 2).reshape(-1, data.train.target.shape[1])
    weight, bias = least_squares(x.double(), y.double(), 1e-6)
    src, target = data.test.src[..., :targets].double(), data.test.target.double()
    errors = {"dlinear": (src.transpose(1, 2) @ weight + bias).transpose(1, 2) - target}
    if len(data.state["columns"]) > targets:  # exogenous series (the EPF markets)
        # a linear map of every input channel's window (calendar features too) to the targets'
        # horizon: the inputs the model reads
        weight, bias = least_squares(data.train.src.flatten(1).double(),
                                     data.train.target.flatten(1).double(), 1e-6)
        forecast = (data.test.src.flatten(1).double() @ weight + bias).view_as(target)
        errors["linear_all_inputs"] = forecast - target
    return errors


def _linear_fits(run_dir: Path) -> dict:
    from ..runs.loading import load_run

    run = load_run(run_dir, "best", "cpu")
    nlinear = json.loads((run_dir / "metrics.json").read_text())["test"]["nlinear"]
    # z units where the data was scaled, as the study's rows are (report._score)
    found = {"nlinear": {"mse": nlinear.get("mse_scaled", nlinear["mse"]),
                         "mae": nlinear.get("mae_scaled", nlinear["mae"])}}
    return found | {name: _scores(error) for name, error in _linear_errors(run).items()}


def _linear_paper_count(run_dir: Path, batch: int) -> dict:
    from ..runs.loading import load_run
    from ..training.evaluation import Evaluator

    run = load_run(run_dir, "best", "cpu")
    test = run.data.test
    nlinear = Evaluator.for_run(run.data, run.config).baselines["nlinear"]
    parts = []
    with torch.no_grad():
        for index in test.chunks(1024):
            src, target = test.take(index)
            parts.append((nlinear(src) - target).double())
    keep = torch.from_numpy(loader_windows(test, batch))
    errors = {"nlinear": torch.cat(parts), **_linear_errors(run)}
    return {name: _scores(error[keep]) for name, error in errors.items()}


def _paper_count(run_dir: Path, batch: int) -> dict:
    from ..runs.loading import load_run
    from ..training.metrics import evaluation

    run = load_run(run_dir, "best", "cpu")
    test = run.data.test
    errors = []
    with evaluation(run.model):
        for index in test.chunks(1024):
            src, target = test.take(index)
            errors.append((run.model(src) - target).double())
    keep = loader_windows(test, batch)
    error = torch.cat(errors)[torch.from_numpy(keep)]
    return {**_scores(error), "windows_per_channel": windows_per_series(test, keep)}


def loader_windows(test, batch: int) -> np.ndarray:
    """A mask of the test windows a loader of `batch` that drops its last incomplete batch
    scores: per series (a channel-independent model's channel), its first whole batches."""
    # Windows of one series each (a channel), or of time carrying every channel.
    series = np.zeros(len(test), int) if test.series is None else test.series.cpu().numpy()
    keep = np.zeros(len(series), bool)
    for s in np.unique(series):
        where = np.flatnonzero(series == s)  # this channel's windows, in time order
        keep[where[: len(where) // batch * batch]] = True
    return keep


def windows_per_series(test, keep: np.ndarray) -> int:
    series = 1 if test.series is None else len(np.unique(test.series.cpu().numpy()))
    return int(keep.sum() // series)
