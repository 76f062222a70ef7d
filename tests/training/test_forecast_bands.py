"""The forecast figure shades the model's conformal bands, widest first, each labelled."""

import numpy as np
from matplotlib.collections import PolyCollection

from seqforecast.training.figures import forecast_figure


def test_the_bands_are_shaded_between_their_bounds():
    point = np.linspace(1.0, 2.0, 6)
    bands = {0.8: (point - 0.2, point + 0.3), 0.95: (point - 0.5, point + 0.6)}
    fig = forecast_figure(np.zeros(10), point, {"model": point}, "t", bands)
    ax = fig.axes[0]
    shaded = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert [c.get_label() for c in shaded] == ["model 95% band", "model 80% band"]
    for collection, level in zip(shaded, (0.95, 0.8), strict=True):
        ys = collection.get_paths()[0].vertices[:, 1]
        lower, upper = bands[level]
        assert np.isclose(ys.min(), lower.min()) and np.isclose(ys.max(), upper.max())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "model 80% band" in legend and "model 95% band" in legend
    plain = forecast_figure(np.zeros(10), point, {"model": point}, "t")
    assert not [c for c in plain.axes[0].collections if isinstance(c, PolyCollection)]
