"""The native kernels' dropout (seqforecast/native/dropout.c through native/dropout.py): its
rate, unbiasedness, gradient, seeding, slices and independence."""

import pytest
import torch

from seqforecast.native.dropout import dropout, keep_mask, mask_scale

from .helpers import needs_kernels

pytestmark = needs_kernels


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_kernels_dropout_drops_at_its_rate_without_bias(p):
    torch.manual_seed(0)
    x = torch.ones(1000, 1000, requires_grad=True)
    y = dropout(x, p, training=True)
    kept = y != 0
    n = kept.numel()
    assert abs((1 - kept.float().mean().item()) - p) < 4 * (p * (1 - p) / n) ** 0.5
    assert y.mean().item() == pytest.approx(1.0, abs=4 * (p / (1 - p) / n) ** 0.5)
    scale = y[kept].unique()
    assert len(scale) == 1 and scale.item() == pytest.approx(1 / (1 - p), rel=1e-4)
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # the gradient is the mask, scaled
    torch.manual_seed(0)
    torch.testing.assert_close(dropout(torch.ones(1000, 1000), p, True), y.detach())  # seeded
    assert dropout(x, p, training=False) is x


def test_a_slice_of_a_kernel_dropout_mask_is_the_same_bits_as_the_whole():
    """Masks are drawn by element index (the kernel's hash), so the sliced FFN's forward and
    backward, drawing slices, see the mask a whole draw would."""
    mask = keep_mask((300, 70), 0.3)
    x = torch.randn(300, 70)
    whole = mask_scale(x, mask, mask.scale)
    parts = [mask_scale(x[i : i + 7], mask.rows(slice(i, i + 7)), mask.scale)
             for i in range(0, 300, 7)]
    assert torch.equal(torch.cat(parts), whole)
    assert torch.equal(mask.rows(slice(7, 14)).apply_(x[7:14].clone()),
                       mask_scale(x[7:14], mask.rows(slice(7, 14)), 1.0))
    assert (whole == 0).float().mean().item() == pytest.approx(0.3, abs=0.02)


def test_the_kernels_dropout_masks_are_independent_between_elements():
    torch.manual_seed(1)
    kept = dropout(torch.ones(400_000), 0.5, training=True) != 0
    for gap in (1, 16, 128):  # neighbours: consecutive indices, a vector of 16
        a, b = kept[:-gap].float(), kept[gap:].float()
        assert abs((a * b).mean().item() - 0.25) < 0.005
    # ... and between calls: torch's generator advances and seeds the next stream anew
    again = (dropout(torch.ones(400_000), 0.5, training=True) != 0).float()
    assert abs((kept.float() * again).mean().item() - 0.25) < 0.005
