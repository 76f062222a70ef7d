"""FLOPs by formula: equal to torch's FlopCounterMode where it counts correctly (the explicit
attention paths), and not fooled by the fused kernel it counts as 0 on CPU."""

import pytest
import torch
from omegaconf import OmegaConf
from torch.utils.flop_counter import FlopCounterMode

from seqforecast import build_model
from seqforecast.attention import attention_schema
from seqforecast.attention.cost import attention_pairs, block_pairs
from seqforecast.config import compose_config
from seqforecast.model.flops import forward_flops

SMALL = ["experiment=quick", "d_model=32", "n_heads=4", "in_len=24", "out_len=8",
         "model.label_len=8", "model.encoder_layers=2", "model.decoder_layers=2"]


def counted(cfg, return_attention: bool) -> int:
    model = build_model(cfg).eval()
    src = torch.randn(3, cfg["data"]["in_len"], 1)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(src, return_attention=return_attention)
    return counter.get_total_flops() // 3  # per window


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["attention=einsum"],
        ["attention=diff"],
        ["attention=diff", "attention.head_layout=wide"],
        ["attention=diff", "block_size=4"],
        ["attention=diff", "block_size=8", "attention.head_layout=wide"],
        ["ffn=swiglu", "model.linear_path=nlinear"],
        ["embedding=patch", "embedding.patch_len=8", "embedding.stride=4"],
    ],
)
def test_formula_equals_the_counter_on_explicit_paths(extra):
    cfg = OmegaConf.to_container(compose_config([*SMALL, *extra]), resolve=True)
    # Asking for the weights runs every attention explicitly: every product is a matmul.
    assert forward_flops(cfg, pairs="computed")["total"] == counted(cfg, return_attention=True)


@pytest.mark.parametrize("attention", ["vanilla", "diff"])
def test_formula_equals_the_counter_for_the_published_patchtst(attention):
    """End padding (one more patch) and residual attention (layer l scores with l layers' q
    and k) counted as the explicit path computes them."""
    cfg = OmegaConf.to_container(compose_config([
        "experiment=patchtst", "data.path=x.csv", "in_len=48", "out_len=8", "d_model=16",
        "n_heads=4", "embedding.patch_len=8", "embedding.stride=4", f"attention={attention}"]),
        resolve=True)
    model = build_model(cfg, 2, 2).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randn(3, 48, 2), return_attention=True)
    assert forward_flops(cfg, 2, 2, pairs="computed")["total"] == counter.get_total_flops() // 3


def test_the_counter_misses_the_fused_kernel_and_the_formula_does_not():
    cfg = OmegaConf.to_container(compose_config(SMALL), resolve=True)
    fused, explicit = counted(cfg, False), counted(cfg, True)
    cores = forward_flops(cfg, pairs="computed")["attention_cores"]
    assert fused == explicit - cores  # the fused call counted as 0
    assert forward_flops(cfg)["total"] > fused


def test_pairs_each_query_sees():
    assert attention_pairs(4, 4, causal=True, block_size=0) == 1 + 2 + 3 + 4
    assert attention_pairs(4, 6, causal=False, block_size=0) == 24
    # Block 2, causal: query i sees i's block up to itself and the whole block before.
    assert block_pairs(6, 2, causal=True) == 1 + 2 + 3 + 4 + 3 + 4
    # Not causal: previous, own and next block, clipped to the sequence.
    assert block_pairs(6, 2, causal=False) == 4 + 4 + 6 + 6 + 4 + 4
    # Long sequences: block-local work grows linearly, full causal quadratically.
    assert block_pairs(4096, 16, True) < attention_pairs(4096, 4096, True, 0) / 50


@pytest.mark.parametrize("attention", ["flow", "probsparse", "destationary"])
@pytest.mark.parametrize("model", [SMALL, ["model=encoder", "d_model=32", "n_heads=4",
                                           "in_len=24", "out_len=8", "model.encoder_layers=2"]])
def test_each_literature_backend_counts_its_own_mixing(attention, model):
    """Their own paths are their only ones: the counter sees every product (de-stationary
    attention's factor learners included)."""
    cfg = OmegaConf.to_container(compose_config([*model, f"attention={attention}"]),
                                 resolve=True)
    assert forward_flops(cfg)["total"] == counted(cfg, return_attention=False)


def test_fft_mechanisms_grow_as_l_log_l():
    """Auto-Correlation and Fourier count their FFTs (which the counter does not see) by
    formula: 4x the tokens costs about 4.8x at 1024 -> 4096, not the 16x of dense attention."""
    for name in ("autocorrelation", "fourier"):
        options = attention_schema(name)()
        short, long = (options.core_flops(n, n, 16, False) for n in (1024, 4096))
        assert 4 < long / short < 6, name
    dense = attention_schema("vanilla")()
    assert dense.core_flops(4096, 4096, 16, False) == 16 * dense.core_flops(1024, 1024, 16, False)


def test_channel_tokens_are_counted_as_channels():
    """iTransformer: a token per channel (and calendar feature) of in_len values, a head per
    target channel; equal to the counter on its explicit path."""
    cfg = OmegaConf.to_container(compose_config([
        "experiment=itransformer", "data.path=x.csv", "in_len=32", "out_len=8", "d_model=16",
        "n_heads=4", "ffn.d_ff=32"]), resolve=True)
    model = build_model(cfg, 7 + 4, 7).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randn(3, 32, 11), return_attention=True)
    flops = forward_flops(cfg, 11, 7, pairs="computed")
    assert flops["total"] == counter.get_total_flops() // 3
    assert flops["embeddings"] == 2 * 16 * 11 * 32  # 11 tokens of 32 values
