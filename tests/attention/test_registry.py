"""Building backends by name, and the errors a caller sees for bad options and inputs."""

from dataclasses import fields

import pytest
import torch

from seqforecast.attention import (
    DifferentialAttention,
    EinsumAttention,
    VanillaAttention,
    attention_schema,
    available_attention,
    build_attention,
    takes_position,
)


def test_every_backend_is_registered_by_name():
    assert {"vanilla", "einsum", "diff"} <= set(available_attention())
    assert isinstance(build_attention("vanilla", 8, 2), VanillaAttention)
    assert isinstance(build_attention("einsum", 8, 2), EinsumAttention)
    assert isinstance(build_attention("diff", 8, 2), DifferentialAttention)


def test_projection_names_match_multihead_attention():
    for name in ("vanilla", "einsum"):
        names = {n for n, _ in build_attention(name, 8, 2).named_parameters()}
        assert names == {f"{p}_proj.{w}" for p in "qkv" for w in ("weight", "bias")} | {
            "out_proj.weight",
            "out_proj.bias",
        }


@pytest.mark.parametrize(
    "name,d_model,heads,options,message",
    [
        ("nope", 8, 2, {}, "unknown attention 'nope'; allowed: .*diff.*einsum.*vanilla"),
        ("vanilla", 30, 4, {}, "d_model=30 must be a positive multiple of n_heads=4"),
        ("vanilla", 8, 0, {}, "n_heads=0 must be a positive integer"),
        ("vanilla", 8, 2, {"block_size": 4}, "has no option.*block_size; allowed: dropout, bias"),
        ("diff", 8, 2, {"lambda_mode": "exp"},
         "lambda_mode='exp' is not allowed: choose one of scalar, reparam"),
        ("diff", 8, 2, {"block_size": -1}, "block_size=-1 is not allowed: must be >= 0"),
        ("diff", 12, 4, {}, "the paper layout halves each head's q/k, and d_model/n_heads = "
                            "12/4 = 3 is odd"),
        ("einsum", 8, 2, {"dropout": 1.0}, r"dropout=1.0 is not allowed: must be in \[0, 1\)"),
    ],
)
def test_bad_options_name_the_key_and_what_is_allowed(name, d_model, heads, options, message):
    with pytest.raises(ValueError, match=message):
        build_attention(name, d_model, heads, **options)


def test_options_are_the_backends_dataclass_and_positions_its_signature():
    diff = {f.name for f in fields(attention_schema("diff"))}
    assert {"block_size", "talking_heads", "dropout", "bias"} <= diff
    assert [f.name for f in fields(attention_schema("vanilla"))] == ["name", "dropout", "bias",
                                                                     "kernel", "gate"]
    takes = {name for name in available_attention() if takes_position(name)}
    assert takes == {"vanilla", "einsum", "sigmoid", "diff"}


def test_the_python_api_defaults_are_the_configs():
    """build_attention's defaults are the options' dataclass, which the config composes."""
    from seqforecast.config import compose_config

    composed = compose_config(["attention=diff"]).attention
    built = build_attention("diff", 16, 4)
    assert built.block_size == composed.block_size and built.lambda_mode == composed.lambda_mode
    assert (built.q_proj.bias is None) == (not composed.bias)


@pytest.mark.parametrize("name", ["vanilla", "einsum", "diff"])
def test_bad_inputs_say_what_shape_is_expected(name):
    attn = build_attention(name, 8, 2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"must be \[batch, length, 8\]"):
        attn(x[0], x)
    with pytest.raises(ValueError, match="d_model=8"):
        attn(torch.randn(2, 5, 6), x)
    with pytest.raises(ValueError, match="batch sizes differ"):
        attn(x, x[:1])
    with pytest.raises(
        ValueError, match=r"key_padding_mask must be a bool tensor \[batch=2, key_len=5\]"
    ):
        attn(x, x, key_padding_mask=torch.zeros(2, 5))
