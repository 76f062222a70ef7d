"""The generators against the original design's definitions, written here time-major as the
design documents have them."""

import pytest
import torch

from seqforecast import data


def design_get_training_data(batch_size, input_sequence_length, output_sequence_length):
    """The original design's generator, as written there: [seq_len, batch] tensors."""
    i = input_sequence_length + output_sequence_length
    b = torch.linspace(-10, 0, i).unsqueeze(1).repeat(1, batch_size)
    t = torch.zeros(1, batch_size).uniform_(0, 2).int()
    b = t + b
    s = torch.sigmoid(b.float())
    return s[:input_sequence_length, :].unsqueeze(-1), s[-output_sequence_length:, :]


def design_get_testing_data(input_sequence_length, output_sequence_length):
    b = torch.linspace(-5, 0, input_sequence_length).unsqueeze(1)
    s = torch.sigmoid(b.float())
    c = torch.linspace(0, 5, output_sequence_length)
    u = torch.sigmoid(c.float())
    return s.unsqueeze(-1), u.unsqueeze(-1)


def test_sigmoid_pair_matches_the_design_draw_for_draw():
    torch.manual_seed(7)
    expected_src, expected_target = design_get_training_data(16, 10, 5)
    torch.manual_seed(7)
    src, target = data.sigmoid_pair(16, 10, 5)
    # design: src [in, B, 1], target [out, B]; ours batch-first with a feature axis
    # Same draws; values equal up to float rounding of the vectorised sigmoid.
    torch.testing.assert_close(src, expected_src.transpose(0, 1), rtol=0, atol=1e-7)
    torch.testing.assert_close(target[..., 0], expected_target.T, rtol=0, atol=1e-7)
    assert len({round(v, 6) for v in src[:, 0, 0].tolist()}) == 2  # two distinct curves only


def test_sigmoid_pair_with_a_generator_is_reproducible():
    a = data.sigmoid_pair(8, 6, 3, generator=torch.Generator().manual_seed(3))
    b = data.sigmoid_pair(8, 6, 3, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_test_curve_is_exactly_the_designs():
    for in_len, out_len in ((24, 12), (7, 30)):
        expected_src, expected_target = design_get_testing_data(in_len, out_len)
        src, target = data.test_curve(in_len, out_len)
        assert src.shape == (1, in_len, 1) and target.shape == (1, out_len, 1)
        torch.testing.assert_close(src[0], expected_src[:, 0], rtol=0, atol=0)
        torch.testing.assert_close(target[0, :, 0], expected_target[:, 0], rtol=0, atol=0)


def test_sigmoid_family_contains_the_test_curve():
    fixed = dict(
        slope_range=(1, 1), shift_range=(0, 0), amplitude_range=(1, 1), offset_range=(0, 0)
    )
    src, target = data.sigmoid(5, 24, 12, generator=torch.Generator().manual_seed(0), **fixed)
    curve_src, curve_target = data.test_curve(24, 12)
    torch.testing.assert_close(src, curve_src.expand(5, -1, -1), atol=1e-6, rtol=0)
    torch.testing.assert_close(target, curve_target.expand(5, -1, -1), atol=1e-6, rtol=0)


GRID = torch.cat([torch.linspace(-5, 0, 24), torch.linspace(0, 5, 12)]).double()
PINNED = dict(slope_range=(1, 1), shift_range=(0, 0), amplitude_range=(1, 1), offset_range=(0, 0))


def _draw(n=512, **ranges):
    """n series with every parameter pinned to the test curve's except those in `ranges`:
    [n, 36] values on the grid, float64."""
    gen = torch.Generator().manual_seed(1)
    src, target = data.sigmoid(n, 24, 12, generator=gen, **{**PINNED, **ranges})
    return torch.cat([src, target], dim=1)[..., 0].double()


def _recovered_in_range(values, low, high):
    """One value per series, spread over [low, high] (uniform draws: near both ends)."""
    assert values.min() >= low - 1e-4 and values.max() <= high + 1e-4
    assert values.min() < low + 0.05 * (high - low) and values.max() > high - 0.05 * (high - low)
    assert abs(values.mean().item() - (low + high) / 2) < 0.08 * (high - low)


@pytest.mark.parametrize(
    "param,bounds", [("slope", (0.5, 2.0)), ("shift", (-3.0, 3.0)),
                     ("amplitude", (0.5, 1.5)), ("offset", (-0.5, 0.5))],
)
def test_each_parameter_enters_the_curve_as_documented_and_spans_its_range(param, bounds):
    """amplitude * sigmoid(slope * (t - shift)) + offset: with the other three pinned to the
    test curve's, the free one is recovered at every grid point by inverting the formula, and
    must be the same along each series (a series is one curve) and drawn over its range."""
    series = _draw(**{f"{param}_range": bounds})
    t = GRID[None, :].expand_as(series)
    # The logit is ill-conditioned where the float32 sigmoid saturates: use points inside.
    usable = torch.ones_like(series, dtype=torch.bool)
    if param == "slope":  # logit(y) = slope * t
        usable = (series > 0.02) & (series < 0.98) & (t != 0)
        recovered = torch.logit(series) / t
    elif param == "shift":  # logit(y) = t - shift
        usable = (series > 0.02) & (series < 0.98)
        recovered = t - torch.logit(series)
    elif param == "amplitude":
        recovered = series / torch.sigmoid(t)
    else:
        recovered = series - torch.sigmoid(t)
    recovered = torch.where(usable, recovered, torch.nan)
    assert usable.sum(dim=1).min() >= 5
    per_series = recovered.nanmean(dim=1)
    spread = (recovered - per_series[:, None]).abs().nan_to_num(0.0)
    assert spread.max() < 2e-4
    _recovered_in_range(per_series, *bounds)


def test_every_series_is_one_increasing_sigmoid_on_the_test_grid():
    series = _draw(n=64, **{k: v for k, v in (("slope_range", (0.5, 2.0)),
                                               ("shift_range", (-3.0, 3.0)))})
    steps = series.diff(dim=1)
    assert (steps[:, :23] > 0).all() and (steps[:, 24:] > 0).all()
    torch.testing.assert_close(series[:, 23], series[:, 24])  # the grid repeats t = 0


def test_sigmoid_noise_has_the_requested_scale():
    gen = torch.Generator().manual_seed(2)
    clean = data.sigmoid(512, 24, 12, generator=gen)[0]
    gen = torch.Generator().manual_seed(2)
    noisy = data.sigmoid(512, 24, 12, generator=gen, noise=0.1)[0]
    assert abs((noisy - clean).std().item() - 0.1) < 0.005


SIGMOID = dict(name="sigmoid", in_len=8, out_len=4, train_size=50, val_size=20, val_seed=99,
               test_size=300, test_seed=123, slope_range=[0.5, 2], shift_range=[-3, 3],
               amplitude_range=[0.5, 1.5], offset_range=[-0.5, 0.5], noise=0.0)


def _series(split):
    return {tuple(row) for row in torch.cat([split.src, split.target], 1)[..., 0].tolist()}


def test_training_follows_the_seed_validation_and_test_are_fixed_held_out_draws():
    a = data.synthetic_data(SIGMOID, seed=0, device=torch.device("cpu"))
    b = data.synthetic_data(SIGMOID, seed=1, device=torch.device("cpu"))
    assert not torch.equal(a.train.src, b.train.src)
    assert torch.equal(a.val.src, b.val.src) and torch.equal(a.test.src, b.test.src)
    assert a.n_features == 1
    assert a.train.src.shape == (50, 8, 1) and a.val.target.shape == (20, 4, 1)
    assert a.test.src.shape == (300, 8, 1) and a.test.target.shape == (300, 4, 1)
    # Three disjoint draws: no series appears in two of them.
    train, val, test = _series(a.train), _series(a.val), _series(a.test)
    assert len(test) == 300 and not (train & val or train & test or val & test)
    # The test curve is its own split, and the probe the figures show.
    assert list(a.eval_splits()) == ["test", "test_curve", "val"]
    assert len(a.test_curve) == 1 and torch.equal(a.probe.src, a.test_curve.src)
    assert a.info["test"]["fingerprint"] == b.info["test"]["fingerprint"]
    other = data.synthetic_data({**SIGMOID, "test_seed": 124}, 0, torch.device("cpu"))
    assert other.info["test"]["fingerprint"] != a.info["test"]["fingerprint"]


def test_sigmoid_pair_validates_and_tests_on_held_out_sigmoid_family_series():
    cfg = dict(name="sigmoid_pair", in_len=8, out_len=4, train_size=64, val_size=20,
               val_seed=99, test_size=300, test_seed=123)
    seeded = data.synthetic_data(cfg, seed=0, device=torch.device("cpu"))
    assert len(_series(seeded.train)) == 2  # two distinct curves
    assert not (_series(seeded.val) | _series(seeded.test)) & _series(seeded.train)
    family = data.synthetic_data({**SIGMOID, "train_size": 64}, 0, torch.device("cpu"))
    assert len(_series(seeded.test)) == 300
    # The sigmoid family at its default ranges, drawn from the same held-out seeds.
    src, target = data.sigmoid(300, 8, 4, generator=torch.Generator().manual_seed(123))
    assert torch.equal(seeded.test.src, src) and torch.equal(seeded.test.target, target)
    assert torch.equal(seeded.test.src, family.test.src)
    assert any("held-out series of the sigmoid family" in note for note in seeded.notes)
