"""Calendar features (data.time_features): the published timeF values, appended after the
columns of every window's inputs (never scaled), and refused where no time column orders one
series."""

from datetime import datetime

import numpy as np
import pytest
import torch

from seqforecast.data import csv_data
from seqforecast.data.time_features import BY_FREQ, feature_names, time_features

from .helpers import csv_config


def test_the_values_are_the_published_timef():
    """TSLib's utils/timefeatures.py at --freq h: hour/23, dayofweek/6, (day-1)/30,
    (dayofyear-1)/365, each minus 0.5 (2016-07-01 is a Friday, day 183 of a leap year)."""
    times = [datetime(2016, 7, 1, 0), datetime(2016, 7, 1, 23), datetime(2016, 12, 31, 12)]
    features = time_features(times, "h")
    expected = [[-0.5, 4 / 6 - 0.5, -0.5, 182 / 365 - 0.5],
                [0.5, 4 / 6 - 0.5, -0.5, 182 / 365 - 0.5],
                [12 / 23 - 0.5, 5 / 6 - 0.5, 0.5, 365 / 365 - 0.5]]
    np.testing.assert_allclose(features, expected, rtol=0, atol=1e-15)
    assert feature_names("h") == ["time:hour", "time:weekday", "time:day", "time:yearday"]
    for freq in BY_FREQ:  # every feature within [-0.5, 0.5] over a year of 10-minute steps
        year = [datetime(2020, 1, 1) + (datetime(2020, 1, 1, 0, 10) - datetime(2020, 1, 1)) * i
                for i in range(0, 52704, 97)]
        values = time_features(year, freq)
        assert values.shape[1] == len(BY_FREQ[freq])
        assert values.min() >= -0.5 and values.max() <= 0.5


@pytest.fixture
def hourly(tmp_path):
    path = tmp_path / "hourly.csv"
    rows = ["date,a,b"] + [f"2024-03-{1 + h // 24:02d} {h % 24:02d}:00:00,{h % 7},{(h * 3) % 11}"
                           for h in range(24 * 20)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_each_window_carries_its_steps_features_after_its_columns(hourly):
    cfg = csv_config(path=str(hourly), targets="all", columns="channels", time_column="date",
                     in_len=12, out_len=4, time_features=True)
    plain = csv_data({**cfg, "time_features": False}, torch.device("cpu"))
    data = csv_data(cfg, torch.device("cpu"))
    assert data.n_features == 2 + 4 and data.n_targets == 2
    assert data.state["time_features"] == feature_names("h")
    for split in ("train", "val", "test"):
        ours, theirs = getattr(data, split), getattr(plain, split)
        assert torch.equal(ours.src[..., :2], theirs.src)
        assert torch.equal(ours.target, theirs.target)
    # the first training window reads rows 0-11: hours 0-11 of 2024-03-01 (a Friday)
    first = data.train.src[0, :, 2:]
    expected = time_features([datetime(2024, 3, 1, h) for h in range(12)], "h")
    assert torch.allclose(first.double(), torch.from_numpy(expected), atol=1e-7)
