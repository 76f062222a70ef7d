"""The sliced FFN (seqforecast/native/ffn.py) equals the layer-by-layer FFN with the kernels'
dropout, mask included, forward and backward; and where it applies."""

import pytest
import torch

from seqforecast.model import kernel_set
from seqforecast.model.ffn import FeedForward
from seqforecast.native import ffn as native_ffn
from seqforecast.native.dropout import HashDropout

from .helpers import needs_kernels

pytestmark = needs_kernels


def _ffn(activation="gelu", p=0.3, bias=True, gated=False) -> FeedForward:
    """What the native kernel set builds for these options."""
    return kernel_set("native").ffn(8, 32, activation=activation, gated=gated, bias=bias,
                                    bias_gate=bias, dropout=p)


def _layer_by_layer(activation="gelu", p=0.3, bias=True) -> FeedForward:
    """The stock FFN over the kernels' dropout."""
    return FeedForward(8, 32, activation=activation, gated=False, bias=bias, bias_gate=bias,
                       dropout=HashDropout(p))


def _run(ffn, x, grad, seed=5):
    leaf = x.clone().requires_grad_()
    ffn.zero_grad()
    torch.manual_seed(seed)
    out = ffn(leaf)
    out.backward(grad)
    return out.detach(), [leaf.grad, *(p.grad.clone() for p in ffn.parameters())]


@pytest.mark.parametrize("activation", list(native_ffn.ACTIVATIONS))
@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("whole", [0, native_ffn.WHOLE_FLOATS], ids=["sliced", "small-whole"])
def test_sliced_ffn_equals_the_layer_by_layer_one(activation, p, bias, whole, monkeypatch):
    """Sliced, and (a hidden tensor of at most WHOLE_FLOATS values) op by op."""
    monkeypatch.setattr(native_ffn, "HIDDEN_FLOATS", 32 * 50)  # slices of 50 rows: 7 of them + 1
    monkeypatch.setattr(native_ffn, "WHOLE_FLOATS", whole)
    torch.manual_seed(0)
    sliced = _ffn(activation, p, bias).train()
    assert type(sliced) is native_ffn.SlicedFeedForward
    plain = _layer_by_layer(activation, p, bias)
    plain.load_state_dict(sliced.state_dict())
    x, grad = torch.randn(3, 121, 8), torch.randn(3, 121, 8)
    out, grads = _run(sliced, x, grad)
    expected, expected_grads = _run(plain.train(), x, grad)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)  # the same mask
    for mine, theirs in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)
    if p:  # the mask does act: another seed, another output
        assert not torch.allclose(_run(sliced, x, grad, seed=6)[0], out)


def test_without_a_backward_and_in_eval_mode_it_is_the_same_function(monkeypatch):
    monkeypatch.setattr(native_ffn, "HIDDEN_FLOATS", 32 * 50)
    monkeypatch.setattr(native_ffn, "WHOLE_FLOATS", 0)
    sliced = _ffn()
    plain = _layer_by_layer()
    plain.load_state_dict(sliced.state_dict())
    x = torch.randn(2, 77, 8)
    with torch.no_grad():
        torch.manual_seed(1)
        train_sliced = sliced(x)
        torch.manual_seed(1)
        torch.testing.assert_close(train_sliced, plain(x), rtol=1e-6, atol=1e-6)
        sliced.eval()
        expected = sliced.down(sliced.activation(sliced.up(x)))  # eval: no dropout at all
        torch.testing.assert_close(sliced(x), expected, rtol=1e-6, atol=1e-6)


def test_what_it_does_not_cover_keeps_the_stock_ffn():
    gated = _ffn(gated=True)
    assert type(gated) is FeedForward  # GLU, GEGLU, SwiGLU
    assert type(gated.dropout) is HashDropout  # the set's dropout all the same
    assert type(_ffn()) is native_ffn.SlicedFeedForward
