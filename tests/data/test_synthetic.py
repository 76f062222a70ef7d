"""The generators against seed 002's definitions, written here time-major as the seed has them."""

import torch

from seqforecast import data


def seed_get_training_data(batch_size, input_sequence_length, output_sequence_length):
    """Seed 002's generator, as written there: [seq_len, batch] tensors."""
    i = input_sequence_length + output_sequence_length
    b = torch.linspace(-10, 0, i).unsqueeze(1).repeat(1, batch_size)
    t = torch.zeros(1, batch_size).uniform_(0, 2).int()
    b = t + b
    s = torch.sigmoid(b.float())
    return s[:input_sequence_length, :].unsqueeze(-1), s[-output_sequence_length:, :]


def seed_get_testing_data(input_sequence_length, output_sequence_length):
    b = torch.linspace(-5, 0, input_sequence_length).unsqueeze(1)
    s = torch.sigmoid(b.float())
    c = torch.linspace(0, 5, output_sequence_length)
    u = torch.sigmoid(c.float())
    return s.unsqueeze(-1), u.unsqueeze(-1)


def test_sigmoid_seed_matches_the_seed_draw_for_draw():
    torch.manual_seed(7)
    expected_src, expected_target = seed_get_training_data(16, 10, 5)
    torch.manual_seed(7)
    src, target = data.sigmoid_seed(16, 10, 5)
    # seed: src [in, B, 1], target [out, B]; ours batch-first with a feature axis
    # Same draws; values equal up to float rounding of the vectorised sigmoid.
    torch.testing.assert_close(src, expected_src.transpose(0, 1), rtol=0, atol=1e-7)
    torch.testing.assert_close(target[..., 0], expected_target.T, rtol=0, atol=1e-7)
    assert len({round(v, 6) for v in src[:, 0, 0].tolist()}) == 2  # two distinct curves only


def test_sigmoid_seed_with_a_generator_is_reproducible():
    a = data.sigmoid_seed(8, 6, 3, generator=torch.Generator().manual_seed(3))
    b = data.sigmoid_seed(8, 6, 3, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_test_curve_is_exactly_the_seeds():
    for in_len, out_len in ((24, 12), (7, 30)):
        expected_src, expected_target = seed_get_testing_data(in_len, out_len)
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


def test_sigmoid_values_follow_their_parameters():
    """Each series is amplitude * sigmoid(slope * (t - shift)) + offset on the test grid:
    recover the four parameters from 4 points and check every other point."""
    gen = torch.Generator().manual_seed(1)
    src, target = data.sigmoid(64, 24, 12, generator=gen)
    series = torch.cat([src, target], dim=1)[..., 0].double()
    grid = torch.cat([torch.linspace(-5, 0, 24), torch.linspace(0, 5, 12)]).double()
    assert series.min() >= -0.5 - 1e-6 and series.max() <= 1.5 + 0.5 + 1e-6
    # Increasing in t (slope > 0, amplitude > 0), flat where the grid repeats t = 0.
    steps = series.diff(dim=1)
    assert (steps[:, :23] > 0).all() and (steps[:, 24:] > 0).all()
    torch.testing.assert_close(series[:, 23], series[:, 24])
    gen = torch.Generator().manual_seed(1)
    slope = torch.empty(64, 1).uniform_(0.5, 2.0, generator=gen)
    shift = torch.empty(64, 1).uniform_(-3.0, 3.0, generator=gen)
    amplitude = torch.empty(64, 1).uniform_(0.5, 1.5, generator=gen)
    offset = torch.empty(64, 1).uniform_(-0.5, 0.5, generator=gen)
    expected = amplitude * torch.sigmoid(slope * (grid.float() - shift)) + offset
    torch.testing.assert_close(series.float(), expected, atol=1e-6, rtol=0)


def test_sigmoid_noise_has_the_requested_scale():
    gen = torch.Generator().manual_seed(2)
    clean = data.sigmoid(512, 24, 12, generator=gen)[0]
    gen = torch.Generator().manual_seed(2)
    noisy = data.sigmoid(512, 24, 12, generator=gen, noise=0.1)[0]
    assert abs((noisy - clean).std().item() - 0.1) < 0.005


def test_training_follows_the_seed_and_validation_is_fixed():
    cfg = dict(name="sigmoid", in_len=8, out_len=4, train_size=50, val_size=20, val_seed=99,
               slope_range=[0.5, 2], shift_range=[-3, 3], amplitude_range=[0.5, 1.5],
               offset_range=[-0.5, 0.5], noise=0.0)  # fmt: skip
    a = data.synthetic_data(cfg, seed=0, device=torch.device("cpu"))
    b = data.synthetic_data(cfg, seed=1, device=torch.device("cpu"))
    assert not torch.equal(a.train.src, b.train.src)
    assert torch.equal(a.val.src, b.val.src)
    assert a.n_features == 1 and len(a.test) == 1
    assert a.train.src.shape == (50, 8, 1) and a.val.target.shape == (20, 4, 1)
