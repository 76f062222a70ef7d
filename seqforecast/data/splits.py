"""Training, validation and test data as tensors on the training device."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from .scaling import Scaler


@dataclass
class Split:
    """Windows of one split: src [N, in_len, F] and target [N, out_len, T], held as tensors.

    `series` [N] (panels only) is the series each window belongs to (an index into the
    panel's ids): per-series scaling, metrics and MASE read it. `WindowSplit` is the same
    interface over one shared buffer of rows, for panels too large to copy every window."""

    src: Tensor
    target: Tensor
    series: Tensor | None = None

    def __len__(self) -> int:
        return self.src.shape[0]

    @property
    def in_len(self) -> int:
        return self.src.shape[1]

    @property
    def out_len(self) -> int:
        return self.target.shape[1]

    @property
    def device(self) -> torch.device:
        return self.src.device

    def take(self, index: Tensor | slice) -> tuple[Tensor, Tensor]:
        """(src, target) of the windows `index` picks."""
        return self.src[index], self.target[index]

    def series_of(self, index: Tensor | slice) -> Tensor | None:
        return None if self.series is None else self.series[index]

    def chunks(self, size: int):
        """Slices covering every window in order, `size` at a time."""
        return (slice(i, min(i + size, len(self))) for i in range(0, len(self), size))

    def sample(self, limit: int) -> Split:
        """At most `limit` windows, evenly spaced over the split, as tensors (all of them
        when there are no more): what the closed-form fits read."""
        index = self.sample_index(limit)
        return Split(*self.take(index), self.series_of(index))

    def sample_index(self, limit: int) -> Tensor | slice:
        """sample's windows: every one (a slice), or `limit` evenly spaced (their indices)."""
        if len(self) <= limit:
            return slice(None)
        return torch.linspace(0, len(self) - 1, limit, device=self.device).long()


class WindowSplit(Split):
    """Windows as index arithmetic over a buffer of rows: nothing is copied per window.

    `values` [R, C] holds every series' rows one after another (model units, gaps filled);
    window i reads rows [starts[i] - in_len, starts[i]) and forecasts [starts[i], starts[i]
    + out_len), all inside one series (the builder only makes such starts). `take` gathers a
    batch's rows in one indexing op. `series` [N]: each window's series in a panel; None for
    one file's rows (a wide CSV: Electricity's 321 channels would take 4.5 GB a split as
    copied windows of 96 + 96 steps, the rows themselves 34 MB)."""

    def __init__(
        self, values: Tensor, starts: Tensor, in_len: int, out_len: int, n_targets: int,
        series: Tensor | None,
    ):
        self.values, self.starts, self.series = values, starts, series
        self._in_len, self._out_len, self.n_targets = in_len, out_len, n_targets
        self.offsets = torch.arange(-in_len, out_len, device=values.device)  # [in_len + out_len]

    def __len__(self) -> int:
        return self.starts.shape[0]

    def __repr__(self) -> str:
        return (
            f"WindowSplit({len(self)} windows over {self.values.shape[0]} rows, "
            f"in_len={self._in_len}, out_len={self._out_len})"
        )

    @property
    def in_len(self) -> int:
        return self._in_len

    @property
    def out_len(self) -> int:
        return self._out_len

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def src(self) -> Tensor:  # every window: for small splits and tests only
        return self.take(slice(None))[0]

    @property
    def target(self) -> Tensor:
        return self.take(slice(None))[1]

    def take(self, index: Tensor | slice) -> tuple[Tensor, Tensor]:
        rows = self.starts[index][:, None] + self.offsets  # [b, in_len + out_len]
        windows = self.values[rows]  # [b, in_len + out_len, C]
        return windows[:, : self._in_len], windows[:, self._in_len :, : self.n_targets]


EVAL_SPLITS = ("test", "test_curve", "val")  # reported, in this order


@dataclass
class ForecastData:
    """Everything a run trains and evaluates on, in model units.

    src tensors hold `n_features` channels, the `n_targets` forecast channels first; targets
    hold those `n_targets`. `test` is the held-out test set (never seen in training or
    selection); `val` is the selection set (early stopping, hyperparameter search);
    `test_curve` (synthetic data only) is the reference sigmoid curve, reported as its own row.
    `probe` is the one window the figures show (the test curve, or the newest test window).
    `scaler` maps model units back to the data's own (None: they are the same); `state` is
    what evaluating or predicting on the file later needs (columns, rows, scaler, hashes).
    `info` describes each split for metrics.json and the log (rows or series, windows, ...);
    `notes` are lines the run logs once at its start.
    """

    train: Split
    val: Split
    test: Split
    n_features: int
    n_targets: int = 1
    test_curve: Split | None = None
    probe: Split | None = None
    scaler: Scaler | None = None
    state: dict | None = None
    info: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Panels: each series' own scaling of the target channels ([S, n_targets], model units ->
    # data units), and its ids. `mase_scale` [S, n_targets]: each series' in-sample
    # seasonal-naive MAE on its training rows (CSV data; None for synthetic series).
    series_ids: list[str] | None = None
    series_shift: Tensor | None = None
    series_scale: Tensor | None = None
    mase_scale: Tensor | None = None
    # How CSV data was scaled (data.scale: standard, minmax), None when the model's units are
    # the data's own: metrics are then also reported in the scaled units (`mse_scaled`, ...).
    scaled_by: str | None = None

    def __post_init__(self):
        if self.probe is None:
            source = self.test_curve if self.test_curve is not None else self.test
            self.probe = Split(*source.take(slice(0, 1)), source.series_of(slice(0, 1)))

    def eval_splits(self) -> dict[str, Split]:
        """The splits reported after training: test, test_curve (when there is one), val."""
        splits = {"test": self.test, "test_curve": self.test_curve, "val": self.val}
        return {name: splits[name] for name in EVAL_SPLITS if splits[name] is not None}

    @property
    def probe_name(self) -> str:
        return "test curve" if self.test_curve is not None else "newest test window"

    @property
    def is_panel(self) -> bool:
        return self.series_scale is not None

    def to_raw(self, values: Tensor, series: Tensor | None = None) -> Tensor:
        """Target values [B, ..., n_targets] in model units -> the data's own units; a panel
        needs each window's `series` [B] (its own scaling)."""
        if self.is_panel:
            if series is None:
                raise ValueError("a panel's values need their series to be unscaled")
            view = (-1,) + (1,) * (values.dim() - 2) + (self.n_targets,)  # [B, 1.., T]
            # Indexed where the windows' series live (the training device), then cast.
            scale = self.series_scale.to(series.device)[series].to(values).view(view)
            shift = self.series_shift.to(series.device)[series].to(values).view(view)
            return values * scale + shift
        if self.scaler is None:
            return values
        return self.scaler.inverse(values, slice(0, self.n_targets))

    def squared_error_weights(self, device: torch.device) -> Tensor:
        """Factors that turn a squared error in model units into the data's own units (scale²
        per target channel; ones when unscaled): [n_targets], or for a panel one row per
        series, [S, n_targets] (index it by the windows' series)."""
        if self.is_panel:
            return self.series_scale.to(device, torch.float32).square()
        if self.scaler is None:
            return torch.ones(self.n_targets, device=device)
        return self.scaler.scale[: self.n_targets].to(device, torch.float32).square()


def fingerprint(split: Split, data: ForecastData, chunk: int = 1024) -> str:
    """A short hash of a split's targets in the data's units: runs scored on equal
    fingerprints were scored on the same windows. Synthetic data's fingerprint; a file's
    (`file_fingerprint`) hashes its cells instead, and records this one as `fingerprint_v1`.
    Hashed `chunk` windows at a time (the digest of the bytes one after another is the
    whole's): a wide file's targets in float64 would be gigabytes at once."""
    digest = hashlib.sha256()
    for index in split.chunks(chunk):
        target = split.take(index)[1].detach().double()  # [chunk, out_len, T]
        digest.update(data.to_raw(target, split.series_of(index)).cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


@dataclass
class FileTargets:
    """Where a split's targets come from in a file: `rows` [N, out_len] indices into `values`
    [R, C] (the cells as read, NaN where empty), its first `n_targets` columns forecast; `fill`
    (data.fill) makes the empty ones."""

    rows: np.ndarray
    values: np.ndarray
    n_targets: int
    fill: str


def file_fingerprint(targets: FileTargets, chunk_values: int = 2**22) -> str:
    """A short hash of the cells a split's windows are scored on, as the file holds them.

    Cells rather than the scaled targets: those pass through a scaler fitted on every column
    read (a run with exogenous columns fits its target's mean in another order of sums than a
    run without, 1e-14 apart) and through float32, so they differ where the windows do not.
    Empty cells are hashed as empty, with the fill that makes them (they differ by fill)."""
    rows, cells = targets.rows, targets.values[:, : targets.n_targets]
    digest = hashlib.sha256(f"{rows.shape[0]}x{rows.shape[1]}x{targets.n_targets}".encode())
    empty = False
    # [chunk, out_len, n_targets] at a time, 32 MiB of float64 (a digest of bytes one after
    # another is the whole's, so the chunk does not change it): Electricity's 321 targets
    # over 720 steps are 1.8 MB a window
    chunk = max(1, chunk_values // (rows.shape[1] * targets.n_targets))
    for start in range(0, len(rows), chunk):
        block = cells[rows[start : start + chunk]]
        gaps = np.isnan(block)
        empty = empty or bool(gaps.any())
        digest.update(np.where(gaps, np.nan, block).tobytes())  # one NaN's bytes for all
    if empty:
        digest.update(f"fill={targets.fill}".encode())
    return digest.hexdigest()[:16]


SCALED_UNITS = {
    "standard": "z-scores: each series' values minus its training rows' mean, over their std",
    "minmax": "each series' training rows' range mapped to [0, 1]",
}


def add_fingerprints(data: ForecastData, files: Mapping[str, FileTargets] | None = None) -> None:
    """Each evaluation split's info gets the fingerprint of its targets (`files`: per split,
    its cells in the file, hashed as they are, beside the former way as `fingerprint_v1`), and,
    for scaled CSV data, what the `*_scaled` metrics' units are."""
    for name, split in data.eval_splits().items():
        if files is not None and name in files:
            data.info[name]["fingerprint"] = file_fingerprint(files[name])
            data.info[name]["fingerprint_v1"] = fingerprint(split, data)
        else:
            data.info[name]["fingerprint"] = fingerprint(split, data)
        if data.scaled_by:
            data.info[name]["scaled_units"] = SCALED_UNITS[data.scaled_by]
