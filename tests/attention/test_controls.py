"""The control arms at the attention position (normlin, learned_mixing, no_mixing, uniform,
zero) against references written from their definitions (OLinear's NormLin: Yue et al. 2025;
"Why Attention Fails"' mean, zero and identity arms: Liang et al. 2025, A in A @ v replaced),
and each in every model it declares it can serve, refused in one line where it cannot."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from seqforecast.attention import build_attention
from seqforecast.config import validate_config
from seqforecast.config.compose import compose_config
from seqforecast.model import build_model
from seqforecast.options import ConfigError
from seqforecast.training.probe import probe

D, H = 16, 4


def normlin_reference(attn, query_len, key_value):
    a = F.softplus(attn.weight)
    a = a / a.sum(-1, keepdim=True)  # rows summing to 1 (L1, positive entries)
    return attn.out_proj(a[:query_len] @ attn.v_proj(key_value))


@pytest.mark.parametrize("lengths", [(9, 9), (5, 9)])
def test_normlin_equals_olinears_definition(lengths):
    torch.manual_seed(0)
    q_len, k_len = lengths
    attn = build_attention("normlin", D, H, lengths=lengths)
    query, key_value = torch.randn(3, q_len, D), torch.randn(3, k_len, D, requires_grad=True)
    out, weights = attn(query, key_value, need_weights=True)
    ref = normlin_reference(attn, q_len, key_value)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, H, q_len))
    params = [key_value, *attn.parameters()]
    for a, b in zip(torch.autograd.grad(out.square().sum(), params),
                    torch.autograd.grad(ref.square().sum(), params), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert {n for n, _ in attn.named_parameters()} == {
        "weight", "v_proj.weight", "v_proj.bias", "out_proj.weight", "out_proj.bias"}
    with pytest.raises(ValueError, match="normlin attention cannot be causal"):
        attn(key_value, key_value, causal=True)


def test_normlin_drops_its_matrix_in_training_only():
    """Dropout on the mixing matrix: eval is the function without it (two calls equal, and
    equal to the definition), training draws a mask a call."""
    torch.manual_seed(3)
    attn = build_attention("normlin", D, H, lengths=(9, 9), dropout=0.5)
    x = torch.randn(3, 9, D)
    with torch.no_grad():
        ref = normlin_reference(attn, 9, x)
        first, second = attn.eval()(x, x)[0], attn(x, x)[0]
        torch.testing.assert_close(first, ref, rtol=1e-5, atol=1e-6,
                                   msg="eval mode must be the function without dropout")
        assert torch.equal(first, second), "eval mode must apply no dropout"
        dropped, again = attn.train()(x, x)[0], attn(x, x)[0]
    assert not torch.allclose(dropped, ref), "training mode drops"
    assert not torch.allclose(dropped, again), "a fresh mask a call"


def test_normlin_starts_at_the_identity_plus_standard_normal_noise():
    """OLinear's start, W = I + N(0, 1): over a 200 x 300 matrix, the diagonal's mean is 1 and
    the rest's 0 (within 4 standard errors), and W - I has a standard deviation of 1."""
    torch.manual_seed(4)
    q_len, k_len = 200, 300
    weight = build_attention("normlin", D, H, lengths=(q_len, k_len)).weight.detach()
    assert weight.shape == (q_len, k_len)
    eye = torch.eye(q_len, k_len, dtype=torch.bool)
    diagonal, rest = weight[eye], weight[~eye]
    assert abs(diagonal.mean().item() - 1) < 4 / q_len**0.5, f"diagonal mean {diagonal.mean()}"
    assert abs(rest.mean().item()) < 4 / rest.numel()**0.5, f"off-diagonal mean {rest.mean()}"
    noise = weight - torch.eye(q_len, k_len)
    assert abs(noise.std().item() - 1) < 0.02, f"std of W - I {noise.std()}"


@pytest.mark.parametrize("causal", [False, True])
def test_learned_mixing_is_a_parameter_matrix_a_head(causal):
    torch.manual_seed(1)
    attn = build_attention("learned_mixing", D, H, lengths=(8, 8))
    with torch.no_grad():
        attn.weight.normal_()
    x = torch.randn(2, 8, D, requires_grad=True)
    out, _ = attn(x, x, causal=causal)
    w = attn.weight.tril() if causal else attn.weight  # [H, Lq, Lk]
    v = attn.v_proj(x).view(2, 8, H, D // H).transpose(1, 2)
    ref = attn.out_proj((w @ v).transpose(1, 2).reshape(2, 8, D))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    if causal:  # the future does not move the past; a prefix reads the matrix's first rows
        changed = x.detach().clone()
        changed[:, 5:] += 3.0
        torch.testing.assert_close(attn(changed, changed, causal=True)[0][:, :5],
                                   out.detach()[:, :5])
        prefix = attn(x[:, :5], x[:, :5], causal=True)[0]
        torch.testing.assert_close(prefix, out[:, :5], rtol=1e-5, atol=1e-6)


def test_no_mixing_leaves_each_token_alone():
    torch.manual_seed(2)
    attn = build_attention("no_mixing", D, H)
    x = torch.randn(2, 6, D)
    out, weights = attn(x, x, need_weights=True)
    torch.testing.assert_close(out, attn.out_proj(attn.v_proj(x)))
    assert torch.equal(weights[0, 0], torch.eye(6))
    order = torch.tensor([3, 0, 5, 1, 4, 2])
    torch.testing.assert_close(attn(x[:, order], x[:, order])[0], out[:, order])
    assert not any(n.startswith(("q_proj", "k_proj")) for n, _ in attn.named_parameters())


def _fixed_matrix_reference(attn, q_len, key_value, a):
    """out_proj(A @ V) with the heads split, as the paper writes it: V [B, H, Lk, d]."""
    batch, k_len, _ = key_value.shape
    v = attn.v_proj(key_value).view(batch, k_len, H, -1).transpose(1, 2)
    out = (a @ v).transpose(1, 2).reshape(batch, q_len, D)
    return attn.out_proj(out)


@pytest.mark.parametrize("lengths", [(7, 7), (3, 7)])
def test_uniform_is_the_mean_of_the_values_over_the_keys(lengths):
    torch.manual_seed(4)
    q_len, k_len = lengths
    attn = build_attention("uniform", D, H)
    query, key_value = torch.randn(2, q_len, D), torch.randn(2, k_len, D, requires_grad=True)
    out, weights = attn(query, key_value, need_weights=True)
    ref = _fixed_matrix_reference(attn, q_len, key_value, torch.full((q_len, k_len), 1 / k_len))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    mean = attn.out_proj(attn.v_proj(key_value).mean(dim=1, keepdim=True)).expand_as(out)
    torch.testing.assert_close(out, mean, rtol=1e-5, atol=1e-6)  # the same for every query
    assert torch.equal(weights[0, 0], torch.full((q_len, k_len), 1 / k_len))
    params = [key_value, *attn.parameters()]
    for a, b in zip(torch.autograd.grad(out.square().sum(), params),
                    torch.autograd.grad(ref.square().sum(), params), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert {n for n, _ in attn.named_parameters()} == {
        "v_proj.weight", "v_proj.bias", "out_proj.weight", "out_proj.bias"}


def test_causal_uniform_is_the_mean_over_the_past_and_the_future_does_not_move_it():
    torch.manual_seed(5)
    attn = build_attention("uniform", D, H)
    x = torch.randn(2, 6, D)
    out = attn(x, x, causal=True)[0]
    values = attn.v_proj(x)
    running = values.cumsum(dim=1) / torch.arange(1, 7).view(1, 6, 1)  # mean of steps <= i
    torch.testing.assert_close(out, attn.out_proj(running), rtol=1e-5, atol=1e-6)
    later = x.clone()
    later[:, 4:] += 10.0
    torch.testing.assert_close(attn(later, later, causal=True)[0][:, :4], out[:, :4])


@pytest.mark.parametrize("causal", [False, True])
def test_zero_gives_the_output_projections_bias_alone(causal):
    torch.manual_seed(6)
    attn = build_attention("zero", D, H)
    query, key_value = torch.randn(2, 5, D), torch.randn(2, 5, D, requires_grad=True)
    out, weights = attn(query, key_value, causal=causal, need_weights=True)
    torch.testing.assert_close(out, attn.out_proj.bias.expand(2, 5, D))
    assert not weights.any()
    out.sum().backward()
    assert not key_value.grad.any()  # nothing of the input reaches the output


def test_the_fixed_matrix_arms_refuse_residual_attention_in_one_line():
    for arm in ("uniform", "zero"):
        with pytest.raises(ConfigError, match=f"^model.res_attention=true conflicts: "
                                              f"attention={arm} computes no q.k scores; set "
                                              f"model.res_attention=false$") as err:
            validate_config(compose_config([*TINY, "model=encoder", "model.res_attention=true",
                                            f"attention={arm}"]))
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["normlin", "learned_mixing"])
def test_a_matrix_of_another_size_is_refused_in_one_line(name):
    attn = build_attention(name, D, H, lengths=(8, 8))
    x = torch.randn(2, 10, D)
    with pytest.raises(ValueError, match=f"{name} was built for 8 queries over 8 keys .* got "
                                         f"10 over 10") as err:
        attn(x, x)
    assert "\n" not in str(err.value)


TINY = ["d_model=16", "n_heads=2", "data.train_size=32", "data.val_size=8", "data.test_size=8"]
MODELS = {
    "transformer": [],
    "autoregressive": ["model.decoding=autoregressive"],
    "encoder": ["model=encoder"],
    "itransformer": ["model=itransformer", "pos_encoding=none"],
    "timexer": ["model=timexer", "embedding=patch", "embedding.patch_len=4",
                "embedding.stride=4", "in_len=16"],
}
# (arm, model) -> the refusal's words; every other pair trains
REFUSED = {
    ("normlin", "autoregressive"): "attention=normlin conflicts with model.decoding="
                                   "autoregressive: a decoder step may read only the steps "
                                   "before it, and its normalised matrix mixes every token",
    ("no_mixing", "transformer"): "attention=no_mixing conflicts with model=transformer: its "
                                  "cross position is cross-attention",
    ("no_mixing", "autoregressive"): "attention=no_mixing conflicts with model=transformer",
    ("no_mixing", "timexer"): "attention=no_mixing conflicts with model=timexer: its exogenous "
                              "position is cross-attention",
}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("arm", ["normlin", "learned_mixing", "no_mixing", "uniform", "zero"])
def test_each_arm_trains_where_it_serves_and_is_refused_in_one_line_elsewhere(arm, model):
    cfg = compose_config([*TINY, f"attention={arm}", *MODELS[model]])
    if (arm, model) in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[(arm, model)]) as err:
            validate_config(cfg)
        assert "\n" not in str(err.value)
        return
    validate_config(cfg)
    torch.manual_seed(0)
    net = build_model(cfg, 1, 1, "torch")
    x, y = torch.randn(4, cfg.data.in_len, 1), torch.randn(4, cfg.data.out_len, 1)
    loss = (net(x, y) - y).square().mean()
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)
    with torch.no_grad():
        assert torch.isfinite(net.eval()(x)).all()  # generation too, where it decodes
    # the run's attention figures: every map it shows is finite rows of weights
    _, maps = probe(net, x[:1])
    assert maps and all(np.isfinite(m.weights).all() for m in maps)


def test_the_gate_is_refused_where_there_are_no_heads():
    with pytest.raises(ConfigError, match="attention.gate=headwise conflicts with "
                                          "attention=normlin: the gate scales each head's"):
        validate_config(compose_config([*TINY, "model=encoder", "attention=normlin",
                                        "attention.gate=headwise"]))
    validate_config(compose_config([*TINY, "model=encoder", "attention=learned_mixing",
                                    "attention.gate=elementwise"]))


@pytest.mark.parametrize("arm", ["normlin", "learned_mixing"])
@pytest.mark.parametrize("targets", [1, 3])  # MS: one target, the others exogenous; M: all
def test_a_matrix_at_timexers_exogenous_position_fits_its_tokens(arm, targets):
    """The position's sizes are the data's: the window's global tokens (one a target) over the
    exogenous tokens (the other series, or all of them, and the calendar features)."""
    cfg = compose_config([*TINY, *MODELS["timexer"], "attention=vanilla",
                          f"attention@variate_attention={arm}"])
    validate_config(cfg)
    net = build_model(cfg, 3, targets, "torch")
    x, y = torch.randn(4, cfg.data.in_len, 3), torch.randn(4, cfg.data.out_len, targets)
    (net(x, y) - y).square().mean().backward()
    layer = net.attention_stacks()["exogenous"][0]
    exogenous = 3 if targets == 3 else 2
    assert (layer.q_len, layer.k_len) == (targets, exogenous)
