"""Training, validation and test data as tensors on the training device."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .scaling import Scaler
from .synthetic import GENERATORS, test_curve

# Arguments every generator takes from the caller rather than from the data config.
_CALL_ARGS = {"batch", "in_len", "out_len", "generator", "device"}


@dataclass
class Split:
    """Windows of one split: src [N, in_len, F] and target [N, out_len, F]."""

    src: Tensor
    target: Tensor

    def __len__(self) -> int:
        return self.src.shape[0]


EVAL_SPLITS = ("test", "test_curve", "val")  # reported, in this order


@dataclass
class ForecastData:
    """Everything a run trains and evaluates on, in model units.

    src tensors hold `n_features` channels, the `n_targets` forecast channels first; targets
    hold those `n_targets`. `test` is the held-out test set (never seen in training or
    selection); `val` is the selection set (early stopping, hyperparameter search);
    `test_curve` (synthetic data only) is seed 002's single curve, reported as its own row.
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

    def __post_init__(self):
        if self.probe is None:
            source = self.test_curve if self.test_curve is not None else self.test
            self.probe = Split(source.src[:1], source.target[:1])

    def eval_splits(self) -> dict[str, Split]:
        """The splits reported after training: test, test_curve (when there is one), val."""
        splits = {"test": self.test, "test_curve": self.test_curve, "val": self.val}
        return {name: splits[name] for name in EVAL_SPLITS if splits[name] is not None}

    @property
    def probe_name(self) -> str:
        return "test curve" if self.test_curve is not None else "newest test window"

    def to_raw(self, values: Tensor) -> Tensor:
        """Target values [..., n_targets] in model units -> the data's own units."""
        if self.scaler is None:
            return values
        return self.scaler.inverse(values, slice(0, self.n_targets))

    def squared_error_weights(self, device: torch.device) -> Tensor:
        """[n_targets] factors that turn a squared error in model units into the data's own
        units (scale² per target channel; ones when unscaled)."""
        if self.scaler is None:
            return torch.ones(self.n_targets, device=device)
        return self.scaler.scale[: self.n_targets].to(device, torch.float32).square()


def fingerprint(split: Split, data: ForecastData) -> str:
    """A short hash of a split's targets in the data's units: runs scored on equal
    fingerprints were scored on the same windows."""
    raw = data.to_raw(split.target.detach().double()).cpu().numpy()
    return hashlib.sha256(raw.tobytes()).hexdigest()[:16]


def generator_options(data_cfg: Mapping) -> dict:
    """The config values the chosen generator accepts as keyword arguments."""
    fn = GENERATORS[data_cfg["name"]]
    accepted = set(inspect.signature(fn).parameters) - _CALL_ARGS
    return {k: v for k, v in data_cfg.items() if k in accepted}


def synthetic_data(data_cfg: Mapping, seed: int, device: torch.device) -> ForecastData:
    """Three disjoint draws from the generator's family: training series from `seed`,
    validation (the selection set) from `val_seed`, the held-out test set from `test_seed`;
    plus seed 002's test curve as its own row.

    `sigmoid_seed` has only two distinct curves, so validation and test drawn from it would
    repeat the training curves: they come from the `sigmoid` family (its default ranges).

    Every draw is made on the CPU and then moved to `device`: a device's own generator draws
    other numbers, and the held-out set must be the same set on every machine."""
    name = data_cfg["name"]
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]

    def draw(generator: str, options: dict, size: int, seed_value: int) -> Split:
        gen = torch.Generator().manual_seed(seed_value)  # CPU: the same draw on any machine
        fn = GENERATORS[generator]
        src, target = fn(size, in_len, out_len, generator=gen, **options)
        return Split(src.to(device), target.to(device))

    options = {
        k: tuple(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
        for k, v in generator_options(data_cfg).items()
    }
    held_out, held_out_options, notes = name, options, []
    if name == "sigmoid_seed":
        held_out, held_out_options = "sigmoid", {}
        notes.append(
            "data=sigmoid_seed has two distinct training curves; validation and test are "
            "held-out series of the sigmoid family (default ranges)"
        )
    train = draw(name, options, data_cfg["train_size"], seed)
    val = draw(held_out, held_out_options, data_cfg["val_size"], data_cfg["val_seed"])
    test = draw(held_out, held_out_options, data_cfg["test_size"], data_cfg["test_seed"])
    curve = Split(*test_curve(in_len, out_len, device=device))
    data = ForecastData(
        train=train, val=val, test=test, test_curve=curve, n_features=train.src.shape[-1],
        notes=notes,
    )  # fmt: skip
    data.info = {
        "train": {"generator": name, "seed": seed, "series": len(train)},
        "val": {"generator": held_out, "seed": data_cfg["val_seed"], "series": len(val),
                "role": "selection (early stopping, search)"},
        "test": {"generator": held_out, "seed": data_cfg["test_seed"], "series": len(test),
                 "role": "held out"},
        "test_curve": {"series": 1, "role": "seed 002's test curve (one draw)"},
    }  # fmt: skip
    add_fingerprints(data)
    return data


def add_fingerprints(data: ForecastData) -> None:
    """Each evaluation split's info gets the fingerprint of its targets."""
    for name, split in data.eval_splits().items():
        data.info[name]["fingerprint"] = fingerprint(split, data)
