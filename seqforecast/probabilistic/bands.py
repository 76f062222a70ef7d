"""The model's conformal bands, kept with its run for `predict`: bands.json in the run dir.

At the end of training the kept model's split-conformal offsets (conformal.py), per horizon
step and target in model units (the data's scaled units), are written for each interval level;
`predict` adds them to a new forecast and maps the bounds to the data's units like the point.
A level the validation windows cannot bound (too few of them) is an open band: +-inf.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
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

    def around(self, point: Tensor) -> dict[float, tuple[Tensor, Tensor]]:
        """point [B, out_len, targets] (model units) -> {level: (lower, upper)} alike."""
        found = {}
        for level in self.levels:
            name = level_name(level)
            lower = point + self.lower[name].to(point)
            upper = point + self.upper[name].to(point)
            found[level] = lower, upper
        return found


def write_bands(run_dir: Path, conformal: SplitConformal, levels: Sequence[float],
                checkpoint: str = "best") -> None:  # fmt: skip
    from ..training.files import atomic_write_text  # (training imports this package)

    bounds = {}
    for level in levels:
        tail = (1.0 - level) / 2.0
        bounds[level_name(level)] = {"lower": conformal.offset(tail).tolist(),
                                     "upper": conformal.offset(1.0 - tail).tolist()}  # fmt: skip
    payload = {
        "what": "split-conformal offsets of the kept model's forecast, per horizon step and "
                "target, in model units (the data's scaled units); predict adds them",
        "checkpoint": checkpoint,
        "calibration_windows": conformal.n,
        "levels": list(levels),
        "bounds": bounds,
    }  # fmt: skip
    atomic_write_text(run_dir / FILE, json.dumps(payload) + "\n")


def read_bands(run_dir: Path) -> Bands | None:
    path = run_dir / FILE
    if not path.is_file():
        return None
    payload = json.loads(path.read_text())
    as_tensor = lambda rows: torch.tensor(rows, dtype=torch.float64)  # noqa: E731 (inf kept)
    bounds = payload["bounds"]
    return Bands(
        levels=[float(v) for v in payload["levels"]],
        lower={k: as_tensor(v["lower"]) for k, v in bounds.items()},
        upper={k: as_tensor(v["upper"]) for k, v in bounds.items()},
        windows=int(payload["calibration_windows"]),
        checkpoint=payload["checkpoint"],
    )


def is_open(bands: Bands) -> bool:
    """Whether some level has no finite bound (too few calibration windows)."""
    return any(not math.isfinite(v) for t in (*bands.lower.values(), *bands.upper.values())
               for v in t.flatten().tolist())  # fmt: skip
