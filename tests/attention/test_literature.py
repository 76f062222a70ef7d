"""The forecasting literature's backends (flow, probsparse, autocorrelation, fourier): equal to
their papers' equations (literature_reference.py) in outputs and gradients, self and cross,
masked and not; causal where they claim it; refusing in one line what they cannot do."""

import pytest
import torch

from seqforecast.attention import build_attention

from . import literature_reference as ref
from .helpers import randomize_

D_MODEL, HEADS = 16, 4


def _build(name, **options):
    return randomize_(build_attention(name, D_MODEL, HEADS, **options)).double()


def _heads(attn, x, proj):
    return attn.split(getattr(attn, f"{proj}_proj")(x))


def _through(attn, out):
    """The reference's heads [B, H, L, d] through the backend's output projection."""
    return attn.out_proj(attn.merge(out))


def _assert_same(attn, run, reference, inputs):
    """Outputs and the gradients of a random projection of them, to 1e-10 (float64)."""
    out = run(*inputs)
    expected = reference(*inputs)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    weight = torch.randn_like(out)
    got = torch.autograd.grad((out * weight).sum(), inputs)
    want = torch.autograd.grad((expected * weight).sum(), inputs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-8, atol=1e-10)


def _inputs(q_len, k_len, cross):
    query = torch.randn(2, q_len, D_MODEL, dtype=torch.float64, requires_grad=True)
    if not cross:
        return (query,)
    return query, torch.randn(2, k_len, D_MODEL, dtype=torch.float64, requires_grad=True)


# ---------------------------------------------------------------- equal to the equations


@pytest.mark.parametrize("causal,cross", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("clamp", [True, False])
def test_flow_is_flowformers_equations(causal, cross, clamp):
    attn = _build("flow", source_clamp=clamp)
    inputs = _inputs(9, 7, cross)

    def run(query, memory=None):
        memory = query if memory is None else memory
        return attn(query, memory, causal=causal)[0]

    def reference(query, memory=None):
        memory = query if memory is None else memory
        out = ref.flow(_heads(attn, query, "q"), _heads(attn, memory, "k"),
                       _heads(attn, memory, "v"), causal, clamp)
        return _through(attn, out)

    _assert_same(attn, run, reference, inputs)


@pytest.mark.parametrize("causal,cross", [(False, False), (True, False), (False, True)])
def test_probsparse_is_informers_equations_with_the_same_sampled_keys(causal, cross):
    attn = _build("probsparse", factor=2, leaky_mask=causal)
    q_len, k_len = 24, 30 if cross else 24
    sampled = torch.randint(k_len, (q_len, 2 * 4))  # c ceil(ln 30) = 2 * 4 keys per query
    attn.sample_keys = lambda *_: sampled
    inputs = _inputs(q_len, k_len, cross)

    def run(query, memory=None):
        memory = query if memory is None else memory
        return attn(query, memory, causal=causal)[0]

    def reference(query, memory=None):
        memory = query if memory is None else memory
        out = ref.probsparse(_heads(attn, query, "q"), _heads(attn, memory, "k"),
                             _heads(attn, memory, "v"), sampled, 2, causal)
        return _through(attn, out)

    _assert_same(attn, run, reference, inputs)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("k_len", [20, 14, 26])  # self; cross with fewer and more keys
def test_autocorrelation_is_autoformers_equations(training, k_len):
    attn = _build("autocorrelation", factor=1.5).train(training)
    cross = k_len != 20
    inputs = _inputs(20, k_len, cross)

    def run(query, memory=None):
        return attn(query, query if memory is None else memory)[0]

    def reference(query, memory=None):
        memory = query if memory is None else memory
        out = ref.autocorrelation(_heads(attn, query, "q"), _heads(attn, memory, "k"),
                                  _heads(attn, memory, "v"), 1.5, training)
        return _through(attn, out)

    _assert_same(attn, run, reference, inputs)


@pytest.mark.parametrize("select", ["random", "lowest"])
def test_fourier_block_is_fedformers_equations(select):
    attn = _build("fourier", modes=5, mode_select=select, lengths=(22, 22))
    if select == "lowest":
        assert attn.modes_q.tolist() == [0, 1, 2, 3, 4]

    def reference(query):
        weight = torch.complex(attn.weight_real, attn.weight_imag)
        return _through(attn, ref.fourier_self(_heads(attn, query, "q"), weight, attn.modes_q))

    _assert_same(attn, lambda q: attn(q, q)[0], reference, _inputs(22, 22, False))


@pytest.mark.parametrize("activation", ["tanh", "softmax"])
def test_fourier_cross_attention_is_fedformers_equations(activation):
    attn = _build("fourier", modes=4, activation=activation, lengths=(18, 13),
                  cross_attention=True)

    def reference(query, memory):
        weight = torch.complex(attn.weight_real, attn.weight_imag)
        out = ref.fourier_cross(_heads(attn, query, "q"), _heads(attn, memory, "k"), weight,
                                attn.modes_q, attn.modes_k, activation, D_MODEL)
        return _through(attn, out)

    _assert_same(attn, lambda q, m: attn(q, m)[0], reference, _inputs(18, 13, True))


@pytest.mark.parametrize("causal,cross,with_delta", [(False, False, True), (True, False, False),
                                                    (False, True, True)])
def test_destationary_is_the_papers_equations(causal, cross, with_delta):
    """With the model's factors as the call's side input; keys that are not the window's own
    (the decoder's self-attention: window_keys=False) take tau alone, whatever delta holds."""
    from seqforecast.attention import AttentionCall
    from seqforecast.attention.destationary import Factors

    attn = _build("destationary", window_keys=with_delta)
    k_len = 11 if cross else 9
    tau = torch.rand(2, dtype=torch.float64) + 0.5
    delta = torch.randn(2, k_len, dtype=torch.float64)
    factors = Factors(tau, delta)

    def run(query, memory=None):
        memory = query if memory is None else memory
        return attn.attend(query, memory, AttentionCall(causal=causal, side=factors)).out

    def reference(query, memory=None):
        memory = query if memory is None else memory
        out = ref.destationary(_heads(attn, query, "q"), _heads(attn, memory, "k"),
                               _heads(attn, memory, "v"), tau, delta if with_delta else None,
                               causal)
        return _through(attn, out)

    _assert_same(attn, run, reference, _inputs(9, k_len, cross))


def test_the_code_layouts_read_heads_as_steps():
    """probsparse layout=tslib and fourier layout=code: the [B, H, L, d] output read as
    [B, L, H d] without a transpose, as the published layers do; paper: transposed."""
    x = torch.randn(2, 12, D_MODEL, dtype=torch.float64)
    for name, options in (("probsparse", {"layout": "tslib"}),
                          ("fourier", {"layout": "code", "lengths": (12, 12), "modes": 3})):
        code = _build(name, **options).eval()
        paper = _build(name, **{**options, "layout": "paper"}).eval()
        paper.load_state_dict(code.state_dict())
        captured = {}
        for side, attn in (("code", code), ("paper", paper)):
            attn.out_proj.register_forward_hook(
                lambda m, i, o, side=side, seen=captured: seen.update({side: i[0]}))
            attn(x, x)
        heads = captured["paper"].view(2, 12, HEADS, -1).transpose(1, 2)  # [B, H, L, d]
        if name == "probsparse":
            torch.testing.assert_close(captured["code"], heads.reshape(2, 12, D_MODEL))
        else:  # FourierBlock's [B, H, d, L]
            torch.testing.assert_close(captured["code"],
                                       heads.transpose(2, 3).reshape(2, 12, D_MODEL))


# ---------------------------------------------------------------- what each can and cannot do


def _past_moves(attn, t: int) -> bool:
    """Whether outputs up to step t move when the inputs after it change (causal calls)."""
    x = torch.randn(2, 16, D_MODEL, dtype=torch.float64)
    changed = x.clone()
    changed[:, t + 1:] = torch.randn_like(changed[:, t + 1:]) * 3
    before, after = attn(x, x, causal=True)[0], attn(changed, changed, causal=True)[0]
    assert not torch.allclose(after[:, t + 1:], before[:, t + 1:])  # the future did change
    return not torch.allclose(after[:, : t + 1], before[:, : t + 1], atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", ["flow", "destationary"])
@pytest.mark.parametrize("t", [0, 6, 14])
def test_causal_backends_ignore_the_future(name, t):
    assert not _past_moves(_build(name).eval(), t)


def test_the_published_masked_probsparse_is_not_causal():
    """Why probsparse declares it cannot be causal: under Informer's mask a past output still
    moves with the future (the active queries are picked among all, by keys from all)."""
    attn = _build("probsparse", factor=1, leaky_mask=True).eval()
    assert any(_past_moves(attn, t) for t in (4, 8, 12))


@pytest.mark.parametrize("name,causal", [("flow", False), ("flow", True),
                                         ("probsparse", False), ("probsparse", True),
                                         ("autocorrelation", False)])
def test_weights_are_what_each_output_takes_of_each_value(name, causal):
    """The maps a backend gives (TensorBoard's) are its function: out = weights @ v."""
    attn = _build(name, **({"leaky_mask": True} if name == "probsparse" else {})).eval()
    x = torch.randn(2, 15, D_MODEL, dtype=torch.float64)
    out, weights = attn(x, x, causal=causal, need_weights=True)
    assert weights.shape == (2, HEADS, 15, 15)
    torch.testing.assert_close(_through(attn, weights @ _heads(attn, x, "v")), out)
    if causal:
        assert (weights.triu(1) == 0).all()


def test_probsparse_evaluation_is_one_function_and_training_follows_the_seed():
    attn = _build("probsparse", factor=1).eval()
    x = torch.randn(2, 40, D_MODEL, dtype=torch.float64)
    torch.testing.assert_close(attn(x, x)[0], attn(x, x)[0], rtol=0, atol=0)
    attn.train()
    torch.manual_seed(3)
    first = attn(x, x)[0]
    torch.manual_seed(3)
    torch.testing.assert_close(attn(x, x)[0], first, rtol=0, atol=0)


def test_fourier_modes_follow_the_seed_and_are_kept_in_checkpoints():
    def modes(seed):
        torch.manual_seed(seed)
        return build_attention("fourier", 8, 2, modes=6, lengths=(40, 40)).modes_q.tolist()

    assert modes(1) == modes(1) and modes(1) != modes(2)
    assert len(modes(1)) == 6 and all(0 <= m < 20 for m in modes(1))
    attn = build_attention("fourier", 8, 2, modes=6, lengths=(40, 40))
    assert "modes_q" in attn.state_dict()
    assert build_attention("fourier", 8, 2, modes=50, lengths=(40, 40)).modes_q.numel() == 20


@pytest.mark.parametrize("name", ["flow", "probsparse", "autocorrelation", "destationary"])
def test_dropout_only_in_training(name):
    attn = _build(name, dropout=0.5)
    x = torch.randn(2, 12, D_MODEL, dtype=torch.float64)
    attn.eval()
    first = attn(x, x)[0]
    without = _build(name)
    without.load_state_dict(attn.state_dict())
    torch.testing.assert_close(without.eval()(x, x)[0], first)
    attn.train()
    torch.manual_seed(0)
    trained = attn(x, x)[0]
    without.train()
    torch.manual_seed(0)
    assert not torch.allclose(trained, without(x, x)[0])


@pytest.mark.parametrize("name,message", [
    ("autocorrelation", "autocorrelation attention cannot be causal: its lags wrap around"),
    ("probsparse", "probsparse attention cannot be causal: its active queries are chosen"),
    ("fourier", "fourier attention cannot be causal: every Fourier mode mixes"),
])
def test_a_backend_that_cannot_be_causal_says_so(name, message):
    options = {"lengths": (8, 8)} if name == "fourier" else {}
    attn = build_attention(name, 8, 2, **options)
    x = torch.randn(1, 8, 8)
    with pytest.raises(ValueError, match=message):
        attn(x, x, causal=True)


@pytest.mark.parametrize("name", ["flow", "probsparse", "autocorrelation"])
def test_padding_and_residual_scores_are_refused(name):
    from seqforecast.attention import AttentionCall, ResidualQK

    attn = build_attention(name, 8, 2)
    x = torch.randn(1, 8, 8)
    with pytest.raises(ValueError, match=f"{name} attention takes no key padding mask"):
        attn(x, x, key_padding_mask=torch.zeros(1, 8, dtype=torch.bool))
    with pytest.raises(ValueError, match="built for a stack without residual attention"):
        attn.attend(x, x, AttentionCall(residual=ResidualQK()))


@pytest.mark.parametrize("name,options,message", [
    ("probsparse", {"factor": 0}, r"factor=0 is not allowed: must be >= 1"),
    ("probsparse", {"layout": "informer"}, "layout='informer' is not allowed: choose one of "
                                           "paper, tslib"),
    ("autocorrelation", {"factor": 0.0}, r"factor=0.0 is not allowed: must be > 0"),
    ("fourier", {"modes": 0, "lengths": (8, 8)}, "modes=0 is not allowed: must be >= 1"),
    ("flow", {"top_k": 3}, "attention 'flow' has no option.*top_k; allowed: dropout, bias, "
                           "kernel, gate, eps, source_clamp"),
])
def test_bad_options_are_one_line(name, options, message):
    with pytest.raises(ValueError, match=message):
        build_attention(name, 8, 2, **options)
