"""Summaries over seeds and the paired ratio interval."""

import math
import random

import pytest

from seqforecast.stats import paired_ratio, sign_test, summarize, t_quantile_975


@pytest.mark.parametrize(
    "df,expected",  # published 0.975 quantiles of Student's t
    [(1, 12.7062), (4, 2.7764), (9, 2.2622), (30, 2.0423), (40, 2.0211), (60, 2.0003),
     (120, 1.9799), (10**6, 1.9600)],
)
def test_t_quantiles(df, expected):
    assert t_quantile_975(df) == pytest.approx(expected, abs=2e-4)


def test_summary_is_mean_and_sample_std():
    s = summarize([1.0, 2.0, 6.0])
    assert (s.mean, s.n) == (3.0, 3)
    assert s.std == pytest.approx(math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + (6 - 3) ** 2) / 2))
    assert math.isnan(summarize([4.0]).std) and summarize([]).n == 0


def test_paired_ratio_by_hand():
    """Ratios 2 and 4 on two shared seeds (seed 9 is the group's alone, and left out)."""
    result = paired_ratio({0: 2.0, 1: 8.0, 9: 100.0}, {0: 1.0, 1: 2.0, 5: 1.0})
    logs = [math.log(2), math.log(4)]
    mean = sum(logs) / 2
    sd = abs(logs[1] - logs[0]) / math.sqrt(2)
    half = 12.7062 * sd / math.sqrt(2)
    assert result.n == 2
    assert result.ratio == pytest.approx(math.sqrt(8))  # the geometric mean of 2 and 4
    assert result.low == pytest.approx(math.exp(mean - half), rel=1e-4)
    assert result.high == pytest.approx(math.exp(mean + half), rel=1e-4)
    assert result.verdict == "within noise"


def test_verdicts():
    better = paired_ratio({s: 0.5 * (1 + 0.01 * s) for s in range(5)}, dict.fromkeys(range(5), 1.0))
    assert better.high < 1 and better.verdict == "lower (beyond noise)"
    worse = paired_ratio({s: 2.0 + 0.01 * s for s in range(5)}, dict.fromkeys(range(5), 1.0))
    assert worse.low > 1 and worse.verdict == "higher (beyond noise)"
    single = paired_ratio({0: 2.0}, {0: 1.0})
    assert single.ratio == 2.0 and math.isnan(single.low)
    assert single.verdict.startswith("no interval")
    assert paired_ratio({0: 1.0}, {1: 1.0}).n == 0


def test_the_interval_covers_the_true_ratio_95_percent_of_the_time():
    """Five seeds, log-normal noise shared by both groups plus each group's own: the interval
    holds the true ratio (1.3) in about 95% of 4000 simulated comparisons."""
    rng = random.Random(0)
    hits, trials = 0, 4000
    for _ in range(trials):
        shared = [rng.gauss(0, 0.5) for _ in range(5)]
        reference = {s: math.exp(shared[s] + rng.gauss(0, 0.2)) for s in range(5)}
        group = {s: 1.3 * math.exp(shared[s] + rng.gauss(0, 0.2)) for s in range(5)}
        result = paired_ratio(group, reference)
        hits += result.low <= 1.3 <= result.high
    assert 0.935 <= hits / trials <= 0.965


def test_ratios_equal_but_for_float_rounding_are_equal_not_beyond_noise():
    nlinear = {0: 0.3702, 1: 0.3702, 2: 0.3702}
    same = paired_ratio({0: 0.37020001, 1: 0.37020002, 2: 0.3702}, nlinear)
    assert (same.ratio, same.low, same.high) == (1.0, 1.0, 1.0)
    assert same.verdict == "within noise"
    apart = paired_ratio({0: 0.371, 1: 0.372, 2: 0.3715}, nlinear)
    assert apart.verdict == "higher (beyond noise)"


def _sign_p_by_enumeration(below: int, above: int) -> float:
    """Every equally likely sign pattern of n pairs, counted: those at least as unbalanced."""
    n = below + above
    extreme = max(below, above)
    hits = sum(1 for pattern in range(2**n)
               if max(bin(pattern).count("1"), n - bin(pattern).count("1")) >= extreme)
    return hits / 2**n


@pytest.mark.parametrize("below,above", [(12, 0), (5, 1), (3, 3), (9, 3), (0, 7), (1, 0)])
def test_sign_test_equals_the_enumerated_binomial(below, above):
    test = sign_test([0.9] * below + [1.1] * above)
    assert (test.below, test.above, test.ties) == (below, above, 0)
    assert test.p == pytest.approx(_sign_p_by_enumeration(below, above))


def test_sign_test_drops_ties_and_reads_only_the_direction():
    test = sign_test([0.5, 0.99, 1.0, 1.0 + 1e-9, 3.0])
    assert (test.below, test.above, test.ties, test.n) == (2, 1, 2, 3)
    assert sign_test([1.0, 1.0]).p == 1.0
