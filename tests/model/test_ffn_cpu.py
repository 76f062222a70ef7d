"""The cache-sized CPU FFN equals the layer-by-layer FFN, dropout mask included."""

import pytest
import torch

from seqforecast.model import ffn_cpu
from seqforecast.model.ffn import FeedForward


def _run(ffn, x, grad, sliced: bool, monkeypatch, seed=5):
    with monkeypatch.context() as patch:
        if not sliced:
            patch.setattr(ffn_cpu, "applies", lambda *args: False)
        leaf = x.clone().requires_grad_()
        ffn.zero_grad()
        torch.manual_seed(seed)
        out = ffn(leaf)
        out.backward(grad)
        return out.detach(), [leaf.grad, *(p.grad.clone() for p in ffn.parameters())]


@pytest.mark.parametrize("activation", list(ffn_cpu.ACTIVATIONS))
@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kernel", ["1", "0"])  # the mask by seqforecast/native/dropout.c or torch
def test_sliced_ffn_equals_the_layer_by_layer_one(activation, p, bias, kernel, monkeypatch):
    monkeypatch.setenv("SEQFORECAST_NATIVE", kernel)
    monkeypatch.setattr(ffn_cpu, "HIDDEN_FLOATS", 32 * 50)  # slices of 50 rows: 7 of them + 1
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, activation, dropout=p, bias=bias).train()
    x, grad = torch.randn(3, 121, 8), torch.randn(3, 121, 8)
    out, grads = _run(ffn, x, grad, True, monkeypatch)
    expected, expected_grads = _run(ffn, x, grad, False, monkeypatch)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)  # the same mask
    for mine, theirs in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)
    if p:  # the mask does act: another seed, another output
        assert not torch.allclose(_run(ffn, x, grad, True, monkeypatch, seed=6)[0], out)


def test_without_a_backward_and_in_eval_mode_it_is_the_same_function(monkeypatch):
    monkeypatch.setattr(ffn_cpu, "HIDDEN_FLOATS", 32 * 50)
    ffn = FeedForward(8, 32, "gelu", dropout=0.3)
    x = torch.randn(2, 77, 8)
    torch.manual_seed(1)
    with torch.no_grad():
        sliced = ffn(x)
    monkeypatch.setattr(ffn_cpu, "applies", lambda *args: False)
    torch.manual_seed(1)
    with torch.no_grad():
        torch.testing.assert_close(sliced, ffn(x), rtol=1e-6, atol=1e-6)
        ffn.eval()
        plain = ffn.down(ffn.activation(ffn.up(x)))  # eval: no dropout at all
        torch.testing.assert_close(ffn(x), plain)
    monkeypatch.undo()
    with torch.no_grad():
        torch.testing.assert_close(ffn(x), plain, rtol=1e-6, atol=1e-6)


def test_what_it_does_not_cover_takes_the_layer_by_layer_path():
    assert ffn_cpu.applies(torch.zeros(2, 8), "gelu")
    with torch.autocast("cpu", torch.bfloat16):  # trainer.precision=bf16: autocast's casts
        assert not ffn_cpu.applies(torch.zeros(2, 8), "gelu")
        ffn = FeedForward(8, 32, "gelu", dropout=0.3).train()
        assert torch.isfinite(ffn(torch.randn(2, 5, 8))).all()
    assert not ffn_cpu.applies(torch.zeros(2, 8, dtype=torch.float64), "gelu")
    assert not ffn_cpu.applies(torch.zeros(2, 8), "swish")
    assert not ffn_cpu.applies(torch.zeros(2, 8, device="meta"), "gelu")
