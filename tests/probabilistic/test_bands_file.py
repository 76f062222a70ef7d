"""bands.json: the split offsets predict adds, and an adaptive run's half-widths per series,
written and read back; a forecast from the end of the data gets the adaptive band of its
series, and the split one where the run has none for it."""

import math

import torch

from seqforecast.probabilistic import SplitConformal
from seqforecast.probabilistic.bands import read_bands, write_bands

H, T = 4, 2


def test_an_adaptive_runs_bands_hold_a_half_width_per_series(tmp_path):
    g = torch.Generator().manual_seed(0)
    conformal = SplitConformal(torch.randn(50, H, T, generator=g, dtype=torch.float64))
    radius = {0.8: torch.rand(3, H, T, generator=g, dtype=torch.float64) + 0.5,
              0.95: torch.rand(3, H, T, generator=g, dtype=torch.float64) + 2.0}
    radius[0.8][2] = math.nan  # a series with no test windows
    radius[0.95][2] = math.nan
    write_bands(tmp_path, conformal, [0.8, 0.95], radius=radius, adapted_windows=120)
    bands = read_bands(tmp_path)
    assert bands.adapted_windows == 120 and bands.windows == 50
    point = torch.randn(4, H, T, generator=g, dtype=torch.float64)
    series = torch.tensor([1, 0, -1, 2])  # seen, seen, never seen, seen without test windows
    ahead, split = bands.ahead(point, series), bands.around(point)
    for level in (0.8, 0.95):
        lower, upper = ahead[level]
        for row, s in enumerate(series.tolist()):
            if s in (0, 1):  # symmetric, the series' own half-width
                torch.testing.assert_close(upper[row] - point[row], radius[level][s])
                torch.testing.assert_close(point[row] - lower[row], radius[level][s])
            else:  # the split offsets
                torch.testing.assert_close(lower[row], split[level][0][row])
                torch.testing.assert_close(upper[row], split[level][1][row])
    # a split run's file has no half-widths: ahead is around
    write_bands(tmp_path, conformal, [0.8])
    plain = read_bands(tmp_path)
    assert plain.radius is None
    torch.testing.assert_close(plain.ahead(point)[0.8][1], plain.around(point)[0.8][1])
