"""The encoder-decoder's decoder reads the covariates known in advance (data.futr) over the
steps it forecasts: its known-values embedding trains, moves the forecast, and sits on the token
that forecasts each chunk, so teacher forcing on a generated forecast gives that forecast back."""

import pytest
import torch

from seqforecast.model import build_model

from .helpers import forward_backward, validated

IN, OUT = 12, 5  # OUT not a multiple of the chunks' stride: the last chunk padded


def futr_config(*extra):
    """y, temp (past), load (known ahead): a CSV's channels; no file is read to build."""
    return validated("data=csv", "data.path=unused.csv", "data.target=y",
                     "data.features=[temp]", "data.futr=[load]", f"in_len={IN}",
                     f"out_len={OUT}", "model.label_len=4", "model.d_model=16",
                     "model.n_heads=2", "model.linear_path=none", "model.linear_init=zero",
                     "model.dropout=0", "attention_dropout=0", *extra)


@pytest.mark.parametrize("decoding", ["oneshot", "autoregressive"])
@pytest.mark.parametrize("stride", [1, 2])
def test_the_decoder_reads_the_known_values_and_trains_them(decoding, stride):
    patches = ["embedding=patch", f"embedding.patch_len={stride}", f"embedding.stride={stride}"]
    torch.manual_seed(0)
    model = build_model(futr_config(f"model.decoding={decoding}", *patches), 3, 1)
    assert model.known == slice(2, 3) and model.known_embed.in_features == stride
    forward_backward(model, features=3)  # every weight, the known values' embedding too
    model.eval()
    src = torch.randn(2, IN, 3)
    with torch.no_grad():
        forecast = model(src)
        torch.nn.init.zeros_(model.known_embed.weight)
        torch.nn.init.zeros_(model.known_embed.bias)
        assert not torch.allclose(model(src), forecast)  # the decoder's own read of them


@pytest.mark.parametrize("stride", [1, 2])
def test_teacher_forcing_on_a_generated_forecast_gives_it_back(stride):
    """Each chunk's known values reach the token that predicts it in both modes: teacher
    forcing fed the generated steps forecasts exactly them."""
    torch.manual_seed(0)
    model = build_model(futr_config("model.decoding=autoregressive", "embedding=patch",
                                    f"embedding.patch_len={stride}",
                                    f"embedding.stride={stride}"), 3, 1)
    src = torch.randn(2, IN, 3)
    with torch.no_grad():
        generated = model.eval()(src)
        forced = model.train()(src, generated)
    torch.testing.assert_close(forced, generated, rtol=1e-5, atol=1e-5)


def test_without_known_columns_the_decoder_has_no_such_part():
    model = build_model(validated("model.d_model=16", "model.n_heads=2"), 1, 1)
    assert model.known_embed is None


@pytest.mark.parametrize("training", [True, False], ids=["teacher forcing", "generation"])
def test_a_chunks_known_values_reach_its_forecast_and_no_earlier_one(training):
    """Autoregressive, point tokens: the known values of step k, changed in the decoder's read
    only (the encoder's window as it was), move the forecast of step k and leave steps < k."""
    torch.manual_seed(0)
    model = build_model(futr_config("model.decoding=autoregressive"), 3, 1).train(training)
    src, target = torch.randn(2, IN, 3), torch.randn(2, OUT, 1)
    own = model._known_ahead
    # a change along no single direction: a layer norm takes a token's mean away
    delta = torch.randn(model.known_embed.out_features)
    with torch.no_grad():
        forecast = model(src, target)
        for k in range(OUT):
            def changed(window, k=k):
                ahead = own(window).clone()
                ahead[:, k] += delta
                return ahead
            model._known_ahead = changed
            moved = model(src, target)
            model._known_ahead = own
            torch.testing.assert_close(moved[:, :k], forecast[:, :k])
            assert not torch.allclose(moved[:, k], forecast[:, k]), f"step {k}"
