"""FLOPs counted from the model (model/flops.py): torch's FlopCounterMode on the explicit
attention paths, for every family and every backend a config allows, and not fooled by the
fused kernel the counter sees as 0 FLOPs on the CPU."""

import copy
import functools

import pytest
import torch
from omegaconf import OmegaConf
from torch.utils.flop_counter import FlopCounterMode

from seqforecast import build_model
from seqforecast.attention import available_attention
from seqforecast.config import ConfigError, compose_config, validate_config
from seqforecast.model.flops import forward_flops, training_flops

SMALL = ["experiment=quick", "d_model=16", "n_heads=2", "in_len=24", "out_len=8",
         "model.label_len=8", "ffn.d_ff=32"]
# family -> (its overrides, input channels, target channels)
FAMILIES = {
    "transformer": (SMALL, 1, 1),
    "encoder": (["model=encoder", "d_model=16", "n_heads=2", "in_len=24", "out_len=8",
                 "ffn.d_ff=32", "embedding=patch", "embedding.patch_len=8",
                 "embedding.stride=4"], 1, 1),
    "itransformer": (["experiment=itransformer", "data.path=x.csv", "in_len=24", "out_len=8",
                      "d_model=16", "n_heads=2", "ffn.d_ff=32"], 3 + 4, 3),
    "timexer": (["experiment=timexer", "data.path=x.csv", "in_len=32", "out_len=8",
                 "d_model=16", "n_heads=2", "ffn.d_ff=32", "embedding.patch_len=8",
                 "embedding.stride=8"], 3 + 4, 3),
}


def _config(family: str, attention: str, *extra: str):
    overrides, n_features, n_targets = FAMILIES[family]
    checked = _checked(family, attention, *extra)
    if isinstance(checked, ConfigError):
        raise copy.copy(checked)
    return copy.deepcopy(checked), n_features, n_targets


@functools.cache
def _checked(family: str, attention: str, *extra: str) -> dict | ConfigError:
    """The resolved config or its refusal, composed and validated once a process (the count of
    backends below checks the very configs the count above skips or counts)."""
    try:
        cfg = compose_config([*FAMILIES[family][0], f"attention={attention}", *extra])
        validate_config(cfg)
    except ConfigError as refused:
        return refused
    return OmegaConf.to_container(cfg, resolve=True)


def _counted(cfg, n_features, n_targets, return_attention=False) -> int:
    """The counter over one window of the model a run builds (one: an einsum's contraction
    order, so its count, may follow the batch)."""
    torch.manual_seed(0)
    model = build_model(cfg, n_features, n_targets).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(torch.randn(1, cfg["data"]["in_len"], n_features),
                    return_attention=return_attention)
    forecast = out[0] if return_attention else out
    assert forecast.shape == (1, cfg["data"]["out_len"], n_targets)
    assert torch.isfinite(forecast).all()
    return counter.get_total_flops()


@pytest.mark.parametrize("attention", available_attention())
@pytest.mark.parametrize("family", FAMILIES)
def test_flops_are_the_counters_on_the_explicit_path(family, attention):
    """Every family x backend a config allows: the count equals the counter's on the model a
    run trains (its kernel named explicit), part by part summing to the total."""
    try:
        cfg, n_features, n_targets = _config(family, attention, "attention.kernel=explicit")
    except ConfigError:
        pytest.skip(f"model={family} refuses attention={attention} (tested elsewhere)")
    flops = forward_flops(cfg, n_features, n_targets)
    assert flops["total"] == _counted(cfg, n_features, n_targets) > 0
    assert sum(v for k, v in flops.items() if k != "total") == flops["total"]
    assert training_flops(cfg, n_features, n_targets) == 3 * flops["total"]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_counted_with_most_backends(family):
    """The skips above are refusals, not a family left uncounted."""
    allowed = []
    for attention in available_attention():
        try:
            _config(family, attention, "attention.kernel=explicit")
            allowed.append(attention)
        except ConfigError:
            pass
    assert {"vanilla", "einsum", "diff", "sigmoid"} <= set(allowed), allowed


def test_the_counter_misses_the_fused_kernel_and_the_count_does_not():
    cfg, n_features, n_targets = _config("transformer", "vanilla")
    fused = _counted(cfg, n_features, n_targets)  # the default kernel: sdpa where it serves
    assert fused < forward_flops(cfg)["total"] == _counted(cfg, 1, 1, return_attention=True)


def test_block_local_windows_count_what_they_multiply():
    """diff with block windows computes each query's padded 3-block window: its encoder costs
    less than dense attention's at 4 blocks, and grows linearly with the length."""
    def encoder(in_len, block):
        cfg, _, _ = _config("encoder", "diff", f"in_len={in_len}", "embedding=point",
                            f"block_size={block}")
        return forward_flops(cfg)["encoder"]

    assert encoder(64, 8) < encoder(64, 0)
    dense = encoder(256, 0) - encoder(128, 0)
    windowed = encoder(256, 8) - encoder(128, 8)
    assert windowed < dense / 2
