"""Training, validation and test data as tensors on the training device."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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


@dataclass
class ForecastData:
    """Everything a run trains and evaluates on, in model units.

    src tensors hold `n_features` channels, the `n_targets` forecast channels first; targets
    hold those `n_targets`. `probe` is the one window the figures show (the test curve, or
    the newest test window). `scaler` maps model units back to the data's own (None: they
    are the same); `state` is what predicting on new data needs (columns, scaler, times).
    """

    train: Split
    val: Split
    test: Split
    n_features: int
    n_targets: int = 1
    probe: Split | None = None
    scaler: Scaler | None = None
    state: dict | None = None
    test_name: str = "test curve"  # what the test split is, in tables and figure titles

    def __post_init__(self):
        if self.probe is None:
            self.probe = Split(self.test.src[:1], self.test.target[:1])

    def to_raw(self, values: Tensor) -> Tensor:
        """Target values [..., n_targets] in model units -> the data's own units."""
        if self.scaler is None:
            return values
        return self.scaler.inverse(values, slice(0, self.n_targets))


def generator_options(data_cfg: Mapping) -> dict:
    """The config values the chosen generator accepts as keyword arguments."""
    fn = GENERATORS[data_cfg["name"]]
    accepted = set(inspect.signature(fn).parameters) - _CALL_ARGS
    return {k: v for k, v in data_cfg.items() if k in accepted}


def synthetic_data(data_cfg: Mapping, seed: int, device: torch.device) -> ForecastData:
    """Generate the training set from `seed`, validation from the fixed `val_seed`."""
    fn = GENERATORS[data_cfg["name"]]
    options = {
        k: tuple(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
        for k, v in generator_options(data_cfg).items()
    }
    in_len, out_len = data_cfg["in_len"], data_cfg["out_len"]

    def draw(size: int, seed_value: int) -> Split:
        gen = torch.Generator(device=device).manual_seed(seed_value)
        src, target = fn(size, in_len, out_len, generator=gen, device=device, **options)
        return Split(src, target)

    train = draw(data_cfg["train_size"], seed)
    val = draw(data_cfg["val_size"], data_cfg["val_seed"])
    test = Split(*test_curve(in_len, out_len, device=device))
    return ForecastData(train=train, val=val, test=test, n_features=train.src.shape[-1])
