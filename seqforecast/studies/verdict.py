"""A study's verdict across cells: per model and value, against the model's reference value
(vanilla attention), over every cell that holds both.

Definitions are fev-bench's (Shchur et al. 2025, arXiv 2509.26468, autogluon/fev), each task a
cell, the error a cell's test MSE:

- win rate: the share of cells where the value's error is below the reference's, a tie (the
  same error to float rounding) counting one half;
- skill score: 1 - the geometric mean over cells of error ratios (value ÷ reference), each
  clipped to [0.01, 100] as fev-bench clips them: above 0 the value forecasts better than the
  reference, below 0 worse.

A cell's ratio is the geometric mean over its seeds of the paired per-seed ratios (the seeds
both have). The 95% intervals are a paired bootstrap over cells and seeds: cells drawn with
replacement, then within each cell its seeds with replacement, both errors of a seed kept
together (2000 draws, a fixed seed: the report is the same every time it is made). The sign
test (stats.sign_test) counts every seed of every cell. The verdict says "<reference> better"
where the skill score's interval lies below 0, "<value> better" where above, else "no
difference"; and on how many cells each paired interval lies beyond noise either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np

from ..stats import SAME, sign_test

DRAWS = 2000
CLIP = (0.01, 100.0)  # fev-bench's bounds on a task's error ratio


def _cell_ratio(seed_ratios: np.ndarray) -> float:
    """A cell's ratio: the geometric mean over its seeds."""
    return float(np.exp(np.log(seed_ratios).mean()))


def win_rate(ratios: Sequence[float]) -> float:
    wins = [0.5 if abs(math.log(r)) < SAME else float(r < 1) for r in ratios]
    return sum(wins) / len(wins)


def skill_score(ratios: Sequence[float]) -> float:
    clipped = np.clip(np.asarray(ratios, dtype=np.float64), *CLIP)
    return float(1.0 - np.exp(np.log(clipped).mean()))


def compare(cells: Mapping[str, Sequence[float]], *, draws: int = DRAWS,
            seed: int = 0) -> dict:
    """`cells`: {cell: its per-seed ratios (value ÷ reference)} -> win rate, skill score, their
    bootstrap intervals and the sign test."""
    names = [c for c, r in cells.items() if len(r)]
    per_seed = [np.asarray(cells[c], dtype=np.float64) for c in names]
    ratios = [_cell_ratio(r) for r in per_seed]
    result = {"cells": len(names), "pairs": sum(len(r) for r in per_seed),
              "win_rate": win_rate(ratios) if ratios else math.nan,
              "skill": skill_score(ratios) if ratios else math.nan,
              "win_rate_ci": [math.nan, math.nan], "skill_ci": [math.nan, math.nan],
              "sign_test": asdict(sign_test([float(x) for r in per_seed for x in r]))}
    if len(names) < 2:  # no spread over cells to draw from
        return result
    rng = np.random.default_rng(seed)
    wins, skills = np.empty(draws), np.empty(draws)
    for i in range(draws):
        drawn = []
        for c in rng.integers(0, len(names), len(names)):
            seeds = per_seed[c]
            drawn.append(_cell_ratio(seeds[rng.integers(0, len(seeds), len(seeds))]))
        wins[i], skills[i] = win_rate(drawn), skill_score(drawn)
    result["win_rate_ci"] = [float(np.quantile(wins, 0.025)), float(np.quantile(wins, 0.975))]
    result["skill_ci"] = [float(np.quantile(skills, 0.025)), float(np.quantile(skills, 0.975))]
    return result


def verdict(result: Mapping, reference: str, value: str) -> str:
    low, high = result["skill_ci"]
    if math.isnan(low):
        return "no interval (fewer than 2 cells)"
    if high < 0:
        return f"{reference} better"
    if low > 0:
        return f"{value} better"
    return "no difference"


def verdicts(report_cells: Sequence[Mapping], references: Mapping[str, str],
             axes: Mapping[str, str]) -> list[dict]:
    """Per model and value (the reference aside): its comparison over the report's cells (each
    cell entry's rows, `pair_ratios` per seed), the verdict, and the cells whose paired
    interval lies beyond noise each way."""
    found: dict[tuple[str, str], dict] = {}
    for entry in report_cells:
        for row in entry["rows"]:
            if row["value"] == entry["reference"] or not row["pair_ratios"]:
                continue
            slot = found.setdefault((entry["model"], row["value"]),
                                    {"ratios": {}, "lower": 0, "higher": 0})
            slot["ratios"][entry["cell"]] = list(row["pair_ratios"].values())
            verdict_words = row["ratio"]["verdict"]
            slot["lower"] += verdict_words.startswith("lower")
            slot["higher"] += verdict_words.startswith("higher")
    out = []
    for (model, value), slot in found.items():
        result = compare(slot["ratios"])
        reference = references[model]
        out.append({"model": model, "axis": axes.get(model, "time"), "value": value,
                    "reference": reference, **result,
                    "cells_lower": slot["lower"], "cells_higher": slot["higher"],
                    "verdict": verdict(result, reference, value)})
    return out
