"""data=sigmoid and data=sigmoid_pair: synthetic sigmoid series (synthetic.py), three disjoint
draws (training from `seed`, selection from `val_seed`, the held-out test set from `test_seed`)
and the reference test curve as its own row."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from omegaconf import MISSING

from ..options import Check, at_least, option, positive, refuse
from .sources import DataSource, data_source, register_source
from .splits import ForecastData, Split, add_fingerprints
from .synthetic import GENERATORS, test_curve

low_high = Check(lambda v: len(v) == 2 and v[0] <= v[1], "must be [low, high] with low <= high")
# Arguments every generator takes from the caller rather than from the data config.
_CALL_ARGS = {"batch", "in_len", "out_len", "generator", "device"}


@dataclass
class SigmoidPairOptions:  # data=sigmoid_pair: linspace(-10, 0) shifted by 0 or 1
    name: str = "sigmoid_pair"
    in_len: int = option(MISSING, positive)  # ${in_len}
    out_len: int = option(MISSING, positive)  # ${out_len}
    train_size: int = option(2048, positive)  # training series, drawn from `seed`
    val_size: int = option(256, positive)  # the selection set: early stopping, search
    val_seed: int = 1000003  # fixed, distinct from seed
    test_size: int = option(8192, positive)  # the held-out test set (8192: one run's test MSE
    # moves < 5% between test seeds; scripts/test_set_noise.py)
    test_seed: int = 2000003  # fixed, distinct from seed and val_seed


@dataclass
class SigmoidOptions(SigmoidPairOptions):  # data=sigmoid: random sigmoids on the test curve's
    # grid (synthetic.py)
    name: str = "sigmoid"
    slope_range: list[float] = option([0.5, 2.0], low_high, factory=True)
    shift_range: list[float] = option([-3.0, 3.0], low_high, factory=True)
    amplitude_range: list[float] = option([0.5, 1.5], low_high, factory=True)
    offset_range: list[float] = option([-0.5, 0.5], low_high, factory=True)
    noise: float = option(0.0, at_least(0.0))  # std of Gaussian noise added to every value


@register_source("sigmoid", SigmoidOptions)
class SigmoidSeries(DataSource):
    """Series of the test curve's family: validation and test are drawn from it too."""

    held_out = "sigmoid"  # the generator validation and test series are drawn from
    notes: tuple[str, ...] = ()

    def check(self, root: Mapping) -> None:
        data, seed = self.cfg, root["seed"]
        # Training from seed, selection from val_seed, test from test_seed.
        if data["val_seed"] == seed:
            raise refuse("data.val_seed", data["val_seed"], f"must differ from seed={seed} "
                         f"(validation series differ from training)")
        if data["test_seed"] in (seed, data["val_seed"]):
            raise refuse("data.test_seed", data["test_seed"],
                         f"must differ from seed={seed} and data.val_seed={data['val_seed']} "
                         f"(test series differ from training and validation)")

    def build(self, seed, device, saved=None, allow_changed=False) -> ForecastData:
        return synthetic_data(self.cfg, seed, device)


@register_source("sigmoid_pair", SigmoidPairOptions)
class SigmoidPair(SigmoidSeries):
    """The original design's two curves. Validation and test drawn from them would repeat the
    training curves: they are held-out series of the sigmoid family (its default ranges)."""

    notes = ("data=sigmoid_pair has two distinct training curves; validation and test are "
             "held-out series of the sigmoid family (default ranges)",)


def generator_options(data_cfg: Mapping) -> dict:
    """The config values the chosen generator accepts as keyword arguments."""
    fn = GENERATORS[data_cfg["name"]]
    accepted = set(inspect.signature(fn).parameters) - _CALL_ARGS
    return {k: v for k, v in data_cfg.items() if k in accepted}


def synthetic_data(data_cfg: Mapping, seed: int, device: torch.device) -> ForecastData:
    """Three disjoint draws: training series from `seed` (the config's generator), validation
    (the selection set) from `val_seed` and the held-out test set from `test_seed` (the
    source's held-out generator); plus the reference test curve as its own row.

    Every draw is made on the CPU and then moved to `device`: a device's own generator draws
    other numbers, and the held-out set must be the same set on every machine."""
    name = data_cfg["name"]
    source = type(data_source(data_cfg))
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
    # the held-out draws take the config's options only from the config's own generator
    held_out = source.held_out
    held_out_options = options if held_out == name else {}
    train = draw(name, options, data_cfg["train_size"], seed)
    val = draw(held_out, held_out_options, data_cfg["val_size"], data_cfg["val_seed"])
    test = draw(held_out, held_out_options, data_cfg["test_size"], data_cfg["test_seed"])
    curve = Split(*test_curve(in_len, out_len, device=device))
    data = ForecastData(
        train=train, val=val, test=test, test_curve=curve, n_features=train.src.shape[-1],
        notes=list(source.notes),
    )
    data.info = {
        "train": {"generator": name, "seed": seed, "series": len(train)},
        "val": {"generator": held_out, "seed": data_cfg["val_seed"], "series": len(val),
                "role": "selection (early stopping, search)"},
        "test": {"generator": held_out, "seed": data_cfg["test_seed"], "series": len(test),
                 "role": "held out"},
        "test_curve": {"series": 1, "role": "the reference sigmoid curve (one series)"},
    }
    add_fingerprints(data)
    return data
