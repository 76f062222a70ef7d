"""Statistics over seeds: mean ± std, and the paired ratio of two variants with a 95% interval.

The paired ratio compares two groups of runs on the seeds they share: for each seed s, the
ratio r_s = metric_group(s) / metric_reference(s). The ratios' geometric mean is reported with
a 95% Student-t interval on the log ratios (a paired t-test on log scale): pairing removes the
part of the noise both variants share (the same training series, the same initial draw of
the data), and the log makes the interval symmetric for ratios. With n seeds the interval has
n - 1 degrees of freedom; below 2 shared seeds there is no interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Two-sided 95% quantiles of Student's t (the 0.975 quantile) for 1..30 degrees of freedom.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)
_Z975 = 1.959964
# Log ratios this close to 0 on every seed are one forecast scored twice (e.g. a model kept at
# its NLinear start against NLinear): equal, not "lower beyond noise" by float rounding.
SAME = 1e-6


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (table to 30, then the
    Cornish-Fisher expansion around the normal, accurate to 1e-4 there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass
class Summary:
    mean: float
    std: float  # sample standard deviation (n - 1); nan for one value
    n: int


def summarize(values: Sequence[float]) -> Summary:
    n = len(values)
    if n == 0:
        return Summary(math.nan, math.nan, 0)
    mean = math.fsum(values) / n
    if n == 1:
        return Summary(mean, math.nan, 1)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return Summary(mean, math.sqrt(var), n)


@dataclass
class PairedRatio:
    n: int  # seeds both groups have
    ratio: float  # geometric mean of the per-seed ratios
    low: float  # 95% interval (nan below 2 seeds)
    high: float

    @property
    def verdict(self) -> str:
        if self.n < 2:
            return "no interval (fewer than 2 shared seeds)"
        if self.high < 1:
            return "lower (beyond noise)"
        if self.low > 1:
            return "higher (beyond noise)"
        return "within noise"


def paired_ratio(group: Mapping[int, float], reference: Mapping[int, float]) -> PairedRatio:
    """{seed: value} of a group and of the reference -> their paired ratio on shared seeds."""
    seeds = sorted(set(group) & set(reference))
    logs = [math.log(group[s] / reference[s]) for s in seeds if group[s] > 0 < reference[s]]
    n = len(logs)
    if n == 0:
        return PairedRatio(0, math.nan, math.nan, math.nan)
    if all(abs(v) < SAME for v in logs):  # the same numbers but for float rounding
        return PairedRatio(n, 1.0, 1.0, 1.0)
    centre = summarize(logs)
    if n < 2:
        return PairedRatio(n, math.exp(centre.mean), math.nan, math.nan)
    half = t_quantile_975(n - 1) * centre.std / math.sqrt(n)
    return PairedRatio(
        n, math.exp(centre.mean), math.exp(centre.mean - half), math.exp(centre.mean + half)
    )


@dataclass
class SignTest:
    below: int  # pairs whose ratio is below 1 (the variant's error lower)
    above: int
    ties: int  # ratios within float rounding of 1: left out of the test
    p: float  # two-sided exact binomial p-value of below vs above under "either is as likely"

    @property
    def n(self) -> int:
        return self.below + self.above


def sign_test(ratios: Sequence[float]) -> SignTest:
    """The sign test over paired ratios (every seed of every cell: pairs need not share a scale,
    only a direction). Ties are dropped, as is usual; with none left p is 1."""
    below = sum(r < 1 and abs(math.log(r)) >= SAME for r in ratios)
    above = sum(r > 1 and abs(math.log(r)) >= SAME for r in ratios)
    n = below + above
    tail = sum(math.comb(n, k) for k in range(min(below, above) + 1)) / 2**n
    return SignTest(below, above, len(ratios) - n, min(1.0, 2 * tail))
