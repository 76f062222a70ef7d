"""Semantic config checks: one line naming the key, the value and what is allowed."""

import pytest
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from seqforecast.config import ConfigError, compose_config, validate_config

BAD_VALUES = [  # (overrides, text the one-line message must contain)
    (["d_model=30"], "model.d_model=30 is not allowed: must be a multiple of model.n_heads=4"),
    (["n_heads=0"], "model.n_heads=0"),
    (["block_size=-1"], "block_size=-1 is not allowed: must be >= 0"),
    (["attention=diff", "attention.block_size=-2"], "attention.block_size=-2"),
    (["attention=diff", "attention.lambda_mode=exp"], "attention.lambda_mode='exp'"),
    (["in_len=0"], "model.label_len=8 is not allowed: must be in [0, data.in_len=0]"),
    (["out_len=0"], "data.out_len=0"),
    (["model.label_len=30"], "model.label_len=30"),
    (["model.decoding=autoregressive", "model.label_len=0"], "for autoregressive decoding"),
    (["model.decoding=beam"], "model.decoding='beam' is not allowed: choose one of oneshot"),
    (["model.instance_norm=batch"], "model.instance_norm='batch'"),
    (["model.encoder_layers=0"], "model.encoder_layers=0"),
    (["model.dropout=1.5"], "model.dropout=1.5 is not allowed: must be in [0, 1)"),
    (["ffn.activation=swish"], "ffn.activation='swish' is not allowed: choose one of relu"),
    (["ffn.d_ff=0"], "ffn.d_ff=0"),
    (["pos_encoding=rope", "d_model=12", "n_heads=4"], "rope needs an even head dim"),
    (["pos_encoding=learned", "pos_encoding.max_len=10"], "pos_encoding.max_len=10"),
    (["lr=0"], "trainer.lr=0.0 is not allowed: must be > 0"),
    (["epochs=0"], "trainer.epochs=0"),
    (["batch_size=0"], "trainer.batch_size=0"),
    (["trainer.grad_clip=-1"], "trainer.grad_clip=-1.0"),
    (["trainer.warmup_frac=1.0"], "trainer.warmup_frac=1.0"),
    (["device=gpu"], "trainer.device='gpu' is not allowed: choose one of auto, cpu"),
    (["data.train_size=0"], "data.train_size=0"),
    (["data.slope_range=[2,1]"], "data.slope_range=[2.0, 1.0]"),
    (["data.noise=-0.1"], "data.noise=-0.1"),
    (["seed=1000003"], "data.val_seed=1000003 is not allowed: must differ from seed"),
]


@pytest.mark.parametrize("overrides,message", BAD_VALUES, ids=lambda v: str(v))
def test_bad_values_name_the_key(overrides, message):
    cfg = compose_config(overrides)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_default_config_is_valid():
    validate_config(compose_config())
    for attention in ("vanilla", "einsum", "diff"):
        validate_config(compose_config([f"attention={attention}"]))


@pytest.mark.parametrize(
    "override,key",
    [
        ("d_model=abc", "d_model"),
        ("attention.foo=1", "attention.foo"),
        ("attention=nope", "attention"),
        ("model.bogus=3", "model.bogus"),
    ],
)
def test_types_and_keys_are_the_schemas_job(override, key):
    with pytest.raises((HydraException, OmegaConfBaseException)) as err:
        compose_config([override])
    assert key in str(err.value) + str(err.value.__cause__)
