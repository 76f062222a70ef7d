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


def test_a_probabilistic_models_own_interval_is_drawn_dotted():
    point = np.linspace(1.0, 2.0, 6)
    fig = forecast_figure(np.zeros(10), point, {"model": point}, "t", None,
                          (point - 1.0, point + 1.5))
    dotted = [line for line in fig.axes[0].lines if line.get_linestyle() == ":"]
    assert len(dotted) == 2
    np.testing.assert_allclose(dotted[0].get_ydata(), point - 1.0)
    np.testing.assert_allclose(dotted[1].get_ydata(), point + 1.5)
    assert "model's own 80%" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_own_interval_is_the_models_own_quantiles_and_none_for_a_point_model():
    import torch

    from seqforecast import build_model
    from seqforecast.config import compose_config
    from seqforecast.training.monitor import own_interval

    window = torch.randn(1, 24, 1)
    point = build_model(compose_config(["loss=mse"]))
    assert own_interval(point, window, 1) is None
    model = build_model(compose_config(["loss=quantile"]))
    lower, upper = own_interval(model, window, 1)
    params = model.eval()(window, distribution=True)
    levels = model.output.levels
    torch.testing.assert_close(lower, params[..., levels.index(0.1)])
    torch.testing.assert_close(upper, params[..., levels.index(0.9)])
    narrow = build_model(compose_config(["loss=quantile", "loss.quantiles=[0.25,0.5,0.75]",
                                         "intervals.levels=[0.5]"]))
    assert own_interval(narrow, window, 1) is None  # no 0.1 and 0.9 to draw
