"""The model's conformal bands, kept with its run for `predict`: bands.json in the run dir.

At the end of training the kept model's split-conformal offsets (conformal.py), per horizon
step and target in model units (the data's scaled units), are written for each interval level;
`predict` adds them to a new forecast and maps the bounds to the data's units like the point.
A level the validation windows cannot bound (too few of them) is an open band: +-inf.

A run with `intervals=adaptive` also keeps, per series, the half-width its adaptive intervals
(ACI) reached once every test truth had arrived: the band of a forecast from the end of the
data on (`Bands.ahead`). The split offsets stay, for the final figure's test windows and for a
series the run never saw.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .conformal import SplitConformal
from .sums import level_name

FILE = "bands.json"


@dataclass
class Bands:
    levels: list[float]
    lower: dict[str, Tensor]  # level name -> [out_len, targets] offsets, model units
    upper: dict[str, Tensor]
    windows: int  # calibration windows
    checkpoint: str
    # intervals=adaptive: level name -> [series, out_len, targets] half-widths after the test
    radius: dict[str, Tensor] | None = None
    adapted_windows: int = 0  # the test windows they adapted through

    def around(self, point: Tensor) -> dict[float, tuple[Tensor, Tensor]]:
        """point [B, out_len, targets] (model units) -> {level: (lower, upper)} alike: the split
        bands (calibrated on the validation windows)."""
        found = {}
        for level in self.levels:
            name = level_name(level)
            lower = point + self.lower[name].to(point)
            upper = point + self.upper[name].to(point)
            found[level] = lower, upper
        return found

    def ahead(self, point: Tensor, series: Tensor | None = None) -> dict[float, tuple[Tensor,
                                                                                      Tensor]]:
        """The bands of forecasts from the end of the data on: point [B, out_len, targets]
        (model units) of the run's series `series` [B] (its index among the run's series; None:
        the first, -1: one it never saw) -> {level: (lower, upper)}. An adaptive run's
        half-widths where it has them for the series (NaN: a series without test windows),
        else the split offsets."""
        found = self.around(point)
        if self.radius is None:
            return found
        index = torch.zeros(len(point), dtype=torch.long) if series is None else series.long()
        known = (index >= 0)[:, None, None]  # [B, 1, 1]
        for level, (lower, upper) in found.items():
            radius = self.radius[level_name(level)].to(point)[index.clamp_min(0)]  # [B, H, T]
            adapted = known & radius.isfinite()
            found[level] = (torch.where(adapted, point - radius, lower),
                            torch.where(adapted, point + radius, upper))
        return found


def write_bands(run_dir: Path, conformal: SplitConformal, levels: Sequence[float],
                checkpoint: str = "best", radius: Mapping[float, Tensor] | None = None,
                adapted_windows: int = 0) -> None:
    """bands.json: the split offsets at each level; `radius`, an adaptive run's half-widths by
    coverage ([series, out_len, targets], from `Evaluator.adaptive_radius`)."""
    from ..training.files import atomic_write_text  # (training imports this package)

    bounds = {}
    for level in levels:
        tail = (1.0 - level) / 2.0
        bounds[level_name(level)] = {"lower": conformal.offset(tail).tolist(),
                                     "upper": conformal.offset(1.0 - tail).tolist()}
    payload = {
        "what": "split-conformal offsets of the kept model's forecast, per horizon step and "
                "target, in model units (the data's scaled units); predict adds them",
        "checkpoint": checkpoint,
        "calibration_windows": conformal.n,
        "levels": list(levels),
        "bounds": bounds,
    }
    if radius:
        payload["adaptive"] = {
            "what": "per series, the half-width of the adaptive (ACI) interval once every test "
                    "truth had arrived, per horizon step and target, model units; predict "
                    "centres it on a forecast from the end of the data",
            "test_windows": adapted_windows,
            "radius": {level_name(level): _radius_at(radius, level).tolist() for level in levels},
        }
    atomic_write_text(run_dir / FILE, json.dumps(payload) + "\n")


def _radius_at(radius: Mapping[float, Tensor], level: float) -> Tensor:
    for coverage, found in radius.items():
        if math.isclose(coverage, level, abs_tol=1e-9):
            return found
    raise ValueError(f"no adaptive interval at level {level}")


def read_bands(run_dir: Path) -> Bands | None:
    path = run_dir / FILE
    if not path.is_file():
        return None
    payload = json.loads(path.read_text())
    as_tensor = lambda rows: torch.tensor(rows, dtype=torch.float64)  # noqa: E731 (inf kept)
    bounds = payload["bounds"]
    adaptive = payload.get("adaptive")
    return Bands(
        levels=[float(v) for v in payload["levels"]],
        lower={k: as_tensor(v["lower"]) for k, v in bounds.items()},
        upper={k: as_tensor(v["upper"]) for k, v in bounds.items()},
        windows=int(payload["calibration_windows"]),
        checkpoint=payload["checkpoint"],
        radius=None if adaptive is None else {k: as_tensor(v)
                                              for k, v in adaptive["radius"].items()},
        adapted_windows=0 if adaptive is None else int(adaptive["test_windows"]),
    )


def is_open(bands: Bands) -> bool:
    """Whether some level has no finite bound (too few calibration windows)."""
    return any(not math.isfinite(v) for t in (*bands.lower.values(), *bands.upper.values())
               for v in t.flatten().tolist())
