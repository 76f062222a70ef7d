"""Semantic config checks: one line naming the key, the value and what is allowed."""

import pytest
import torch
from omegaconf import OmegaConf

from seqforecast import build_model
from seqforecast.config import ConfigError, compose_config, validate_config

CSV_ARGS = "CSV"  # stands for a CSV run's required keys in the table below
BAD_VALUES = [  # (overrides, text the one-line message must contain)
    (["d_model=30"], "model.d_model=30 is not allowed: must be a multiple of model.n_heads=4"),
    (["n_heads=0"], "model.n_heads=0 is not allowed: must be >= 1"),
    (["block_size=-1"], "block_size=-1 is not allowed: must be >= 0"),
    (["attention=diff", "attention.block_size=-2"], "attention.block_size=-2"),
    (["attention=diff", "attention.lambda_mode=exp"], "attention.lambda_mode='exp'"),
    (["in_len=0"], "data.in_len=0 is not allowed: must be >= 1"),
    (["in_len=-5", "embedding=patch"], "data.in_len=-5 is not allowed: must be >= 1"),
    (["experiment=timexer", "data.path=x.csv", "in_len=168"],
     "data.in_len=168 conflicts with embedding.patch_len=16: model=timexer cuts the window into "
     "whole patches (the published code drops the last 8 steps unread); set "
     "embedding.patch_len and embedding.stride to a divisor of 168 (12, 14 or 21: "
     "embedding.patch_len=14 embedding.stride=14), or make data.in_len a multiple of 16"),
    (["out_len=0"], "data.out_len=0"),
    (["model.label_len=30"], "model.label_len=30"),
    (
        ["model.decoding=autoregressive", "model.label_len=0"],
        "model.label_len=0 is not allowed: must be in [1, data.in_len=24] for autoregressive",
    ),
    (
        ["model.decoding=beam"],
        "model.decoding='beam' is not allowed: choose one of oneshot, autoregressive",
    ),
    (
        ["model.instance_norm=batch"],
        "model.instance_norm='batch' is not allowed: choose one of none, last, revin",
    ),
    (["model.encoder_layers=0"], "model.encoder_layers=0"),
    (["model.dropout=1.5"], "model.dropout=1.5 is not allowed: must be in [0, 1)"),
    (["ffn.activation=swish"], "ffn.activation='swish' is not allowed: choose one of relu, gelu"),
    (["ffn.d_ff=0"], "ffn.d_ff=0"),
    (
        ["pos_encoding=rope", "d_model=12", "n_heads=4"],
        "pos_encoding=rope conflicts with model.d_model=12: rope rotates pairs of q/k channels",
    ),
    (
        ["attention=diff", "attention.distance_decay=true", "pos_encoding=relative"],
        "attention.distance_decay=true conflicts with pos_encoding=relative",
    ),
    (
        ["attention=diff", "attention.past_bias=true", "pos_encoding=rope"],
        "attention.past_bias=true conflicts with pos_encoding=rope",
    ),
    (
        ["attention=diff", "d_model=12", "n_heads=4"],
        "attention.head_layout=paper conflicts with model.d_model=12",
    ),
    (
        ["attention=diff", "pos_encoding=rope", "d_model=24", "n_heads=4"],
        "pos_encoding=rope conflicts with model.d_model=24: rope rotates pairs of q/k channels, "
        "and the q/k width per head, half of model.d_model/model.n_heads = 24/4 "
        "(attention.head_layout=paper) = 3, is odd",
    ),
    (["attention=diff", "attention.head_layout=narrow"], "attention.head_layout='narrow'"),
    (["attention=diff", "attention.decay_form=exp"], "attention.decay_form='exp'"),
    (["pos_encoding=relative", "pos_encoding.decay_form=exp"], "pos_encoding.decay_form='exp'"),
    (
        ["pos_encoding=learned", "pos_encoding.max_len=10"],
        "pos_encoding.max_len=10 is not allowed: must be >= data.in_len + data.out_len = 36",
    ),
    (["lr=0"], "trainer.lr=0.0 is not allowed: must be > 0"),
    (["epochs=-1"], "trainer.epochs=-1"),
    (["trainer.schedule=type9"], "trainer.schedule='type9' is not allowed: choose one of "
     "warmup_cosine, type3, type1, constant, onecycle"),
    (["trainer.optimizer=sgd"],
     "trainer.optimizer='sgd' is not allowed: choose one of adamw, adam"),
    (["trainer.pct_start=1.0"], "trainer.pct_start=1.0 is not allowed: must be in (0, 1)"),
    (["embedding=patch", "embedding.padding=middle"],
     "embedding.padding='middle' is not allowed: choose one of start, end"),
    (["embedding=patch", "embedding.padding=end", "model.label_len=8"],
     "embedding.padding=end conflicts with model.name=transformer"),
    (["pos_encoding=learned", "pos_encoding.init=zeros"],
     "pos_encoding.init='zeros' is not allowed: choose one of normal, uniform"),
    (["model=encoder", "model.attention_init=xavier"],
     "model.attention_init='xavier' is not allowed: choose one of mha, linear"),
    (["model=encoder", "model.attention_output_dropout=1.0"],
     "model.attention_output_dropout=1.0 is not allowed: must be in [0, 1)"),
    (["model=encoder", "model.res_attention=true", "pos_encoding=relative"],
     "model.res_attention=true conflicts: pos_encoding=relative adds its terms to the scores"),
    (["model=encoder", "model.res_attention=true", "attention=diff",
      "attention.talking_heads=true"],
     "model.res_attention=true conflicts: attention.talking_heads=true acts on the scores"),
    (["model=encoder", "embedding=patch", "pos_encoding=learned", "pos_encoding.max_len=1"],
     "pos_encoding.max_len=1 is not allowed: must be >= the encoder's tokens = 2"),
    (["batch_size=0"], "trainer.batch_size=0"),
    (["trainer.grad_clip=-1"], "trainer.grad_clip=-1.0"),
    (["trainer.warmup_frac=1.0"], "trainer.warmup_frac=1.0"),
    (["device=gpu"], "trainer.device='gpu' is not allowed: choose one of auto, cpu"),
    (["data.train_size=0"], "data.train_size=0"),
    (["data.slope_range=[2,1]"], "data.slope_range=[2.0, 1.0]"),
    (["data.noise=-0.1"], "data.noise=-0.1"),
    (["d_model=-8"], "model.d_model=-8"),
    (["seed=-1"], "seed=-1"),
    (["log.attention_every=-1"], "log.attention_every=-1"),
    (["in_len=0", "model.label_len=0"], "data.in_len=0"),
    (["seed=1000003"], "data.val_seed=1000003 is not allowed: must differ from seed"),
    (["embedding.name=nope"], "embedding.name='nope' is not allowed: choose one of point, patch"),
    (
        ["embedding=patch", "in_len=12"],
        "embedding.patch_len=16 is not allowed: must be in [1, data.in_len=12]",
    ),
    (
        ["embedding=patch", "embedding.stride=20", "in_len=48"],
        "embedding.stride=20 is not allowed: must be in [1, embedding.patch_len=16]",
    ),
    (
        ["embedding=patch", "model.label_len=4"],
        "model.label_len=4 conflicts with embedding.stride=8",
    ),
    (
        ["model.linear_path=arima"],
        "model.linear_path='arima' is not allowed: choose one of none, nlinear, dlinear",
    ),
    (
        ["model.linear_init=least_squares"],
        "model.linear_init=least_squares conflicts with model.linear_path=none",
    ),
    (["model.linear_path=dlinear", "model.decomposition_kernel=0"], "model.decomposition_kernel=0"),
    (
        [CSV_ARGS, "data.features=[t]", "model.channel_independent=true"],
        "model.channel_independent=true conflicts with data.features=['t']",
    ),
    ([CSV_ARGS, "data.season=[12, 12]"], "a list of distinct periods"),
    (
        [CSV_ARGS, "data.season=[12, 30]"],
        "data.season=[12, 30] is not allowed: a period in rows in [1, data.in_len=24]",
    ),
    ([CSV_ARGS, "data.season=-1"], "data.season=-1"),
    # calendar features: from the time column of one series
    ([CSV_ARGS, "data.time_features=true"],
     "data.time_features=true conflicts with data.time_column/columns=[None, 'series']"),
    ([CSV_ARGS, "data.time_freq=hour"], "data.time_freq='hour' is not allowed: choose one of "
     "s, min, h, d, w, m"),
    (["dataset=etth9"], "dataset=etth9 is not allowed: choose one of be, de, electricity, etth1, "
     "etth2, ettm1, ettm2, exchange, fr, illness, np, pjm, traffic, weather"),
    # channel tokens (model=itransformer): in no order
    (["embedding=variate"], "embedding=variate is not allowed: choose one of patch, point "
                            "(variate is now model=itransformer)"),
    (["model=itransformer"],
     "model=itransformer conflicts with pos_encoding=sinusoidal: its tokens are the channels, "
     "whose order means nothing; use pos_encoding=none"),
    (["model=itransformer", "pos_encoding=none", "embedding=patch"],
     "model=itransformer conflicts with embedding=patch"),
    (["model=itransformer", "pos_encoding=none", "attention=diff", "block_size=4"],
     "model=itransformer conflicts with attention.block_size=4: it assumes tokens along time; "
     "the encoder tokens are channels, in no order"),
    (["model=itransformer", "pos_encoding=none", "attention=diff", "attention.past_bias=true"],
     "model=itransformer conflicts with attention.past_bias=true"),
    (["model=itransformer", "pos_encoding=none", "model.channel_independent=true"],
     "model=itransformer conflicts with model.channel_independent=true"),
    # the literature's backends: what each says it cannot do
    (["model=itransformer", "pos_encoding=none", "attention=autocorrelation"],
     "model=itransformer conflicts with attention=autocorrelation: its lags roll the tokens "
     "along time, and its encoder tokens are channels, in no order"),
    (["model=itransformer", "pos_encoding=none", "attention=fourier"],
     "model=itransformer conflicts with attention=fourier: its modes are frequencies"),
    (["attention=fourier", "model.decoding=autoregressive"],
     "attention=fourier conflicts with model.decoding=autoregressive: a decoder step may read "
     "only the steps before it, and every Fourier mode mixes the whole window"),
    (["attention=autocorrelation", "model.decoding=autoregressive"],
     "attention=autocorrelation conflicts with model.decoding=autoregressive"),
    (["attention=probsparse", "model.decoding=autoregressive"],
     "attention=probsparse conflicts with model.decoding=autoregressive"),
    (["attention=flow", "model.decoding=autoregressive"],
     "attention=flow conflicts with model.decoding=autoregressive: a decoder step may read "
     "only the steps before it, and its flow is conserved over every query"),
    (["attention=flow", "attention.block_size=4"],
     "attention.block_size is not allowed: attention has no key block_size (its keys: "
     "dropout, bias, kernel, gate, eps, source_clamp)"),
    (["attention=flow", "pos_encoding=rope"],
     "pos_encoding=rope conflicts with attention=flow: flow attention takes no position module "
     "inside it, so rope would act nowhere"),
    (["attention=autocorrelation", "pos_encoding=relative"],
     "pos_encoding=relative conflicts with attention=autocorrelation"),
    (["model=encoder", "model.res_attention=true", "attention=flow"],
     "model.res_attention=true conflicts: flow attention has no q.k scores"),
    (["model=encoder", "model.res_attention=true", "attention=probsparse"],
     "model.res_attention=true conflicts: probsparse scores only its active queries"),
    (["attention=probsparse", "attention.factor=0"],
     "attention.factor=0 is not allowed: must be >= 1"),
    (["attention=probsparse", "attention.layout=informer"],
     "attention.layout='informer' is not allowed: choose one of paper, tslib"),
    (["attention=autocorrelation", "attention.factor=0.2"],
     "attention.factor=0.2 is not allowed: floor(factor ln "),
    (["attention=fourier", "attention.modes=0"], "attention.modes=0 is not allowed: must be >= 1"),
    (["attention=destationary", "attention.projector_hidden=[]"],
     "attention.projector_hidden=[] is not allowed: a list of one or more positive widths"),
    (["model=encoder", "model.res_attention=true", "attention=destationary"],
     "model.res_attention=true conflicts: its scores are rescaled by each window's tau"),
    (["attention=fourier", "attention.mode_select=highest"],
     "attention.mode_select='highest' is not allowed: choose one of random, lowest"),
    (["model=encoder", "model.final_norm=sometimes"],
     "model.final_norm='sometimes' is not allowed: choose one of auto, always, never"),
    # a quantile loss: its levels valid, the median (the point) among them, and every
    # interval level the run scores held by them
    (["loss=quantile", "loss.quantiles=[0.1,0.9]"],
     "loss.quantiles=[0.1, 0.9] is not allowed: include 0.5: the median is the point forecast"),
    (["loss=quantile", "loss.quantiles=[0.2,0.5,0.8]"],
     "loss.quantiles: interval level 0.8 needs the quantiles 0.1 and 0.9"),
    (["loss=quantile", "loss.quantiles=[0.5,0.1,0.9]"], "loss.quantiles: 0.5 comes before 0.1"),
    (["loss=quantile", "loss.quantiles=[0.1,0.5,0.5,0.9]"], "loss.quantiles: 0.5 is given twice"),
    (["loss=quantile", "loss.quantiles=[0.5,1.2]"], "loss.quantiles: 1.2 is outside (0, 1)"),
    (["loss=quantile", "loss.quantiles=[]"], "loss.quantiles: give at least one level"),
    (["intervals=adaptive"], "intervals.method=adaptive conflicts with data.name=sigmoid"),
    ([CSV_ARGS, "intervals=adaptive", "intervals.gamma=0"], "intervals.gamma=0"),
    ([CSV_ARGS, "intervals=adaptive", "intervals.quantiles=[0.1,0.5,0.8,0.9]",
      "intervals.levels=[0.8]"],
     "each level needs its mirror 1 - q (0.8 has none)"),
]


@pytest.mark.parametrize("overrides,message", BAD_VALUES, ids=lambda v: str(v))
def test_bad_values_name_the_key(overrides, message):
    if CSV_ARGS in overrides:
        overrides = ["data=csv", "data.path=x.csv", "data.target=y", *overrides[1:]]
    with pytest.raises(ConfigError) as err:  # composition refuses a type or a Choice itself
        validate_config(compose_config(overrides))
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
        ("lr=fast", "lr"),
        ("epochs=1.5", "epochs"),
        ("model.norm_first=maybe", "model.norm_first"),
        ("attention.foo=1", "attention.foo"),
        ("attention=nope", "attention"),
        ("pos_encoding=bogus", "pos_encoding"),
        ("ffn=swishy", "ffn"),
        ("data=sines", "data"),
        ("model.bogus=3", "model.bogus"),
    ],
)
def test_types_and_keys_are_the_schemas_job(override, key):
    with pytest.raises(ConfigError) as err:
        compose_config([override])
    assert str(err.value).startswith(key) and "is not allowed" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_list_written_without_brackets_says_how_to_write_it():
    """`data.features=a,b` outside --multirun: Hydra's hint (a list is [a,b]) in the one line."""
    with pytest.raises(ConfigError) as err:
        compose_config(["data=csv", "data.features=load_forecast,wind"])
    assert str(err.value).startswith("data.features=load_forecast,wind is ambiguous: write "
                                     "data.features=[load_forecast,wind] for a list, add "
                                     "--multirun to sweep over its values")
    assert "\n" not in str(err.value)


LITERATURE = ("flow", "probsparse", "autocorrelation", "fourier", "destationary")


def _combinations():
    """Every attention x position encoding x the diff options that interact with positions,
    at head widths that are even, odd, and odd once halved. Each (position, attention) is
    composed once; the shapes (root shorthands the groups interpolate) and the options are set
    on copies of it."""
    shapes = [(16, 2), (12, 4), (24, 4)]  # head width 8; 3 (odd); 6 (halved: 3, odd)
    diff_options = [
        {"head_layout": layout, "distance_decay": decay, "past_bias": bias, "decay_form": form,
         "block_size": block}
        for layout in ("paper", "wide") for decay in (False, True) for bias in (False, True)
        for form in ("alibi", "reciprocal") for block in (0, 4)
        if decay or form == "alibi"  # the decay form matters only with a decay
    ]
    for pos in ("sinusoidal", "learned", "none", "relative", "rope"):
        base = ["experiment=quick", f"pos_encoding={pos}"]
        for attention in ("vanilla", "einsum", *LITERATURE, "diff"):
            composed = compose_config([*base, f"attention={attention}"])
            for d_model, heads in shapes:
                for options in diff_options if attention == "diff" else [{}]:
                    cfg = composed.copy()
                    OmegaConf.update(cfg, "d_model", d_model)
                    OmegaConf.update(cfg, "n_heads", heads)
                    for key, value in options.items():
                        OmegaConf.update(cfg, f"attention.{key}", value)
                    yield cfg


@pytest.mark.slow
def test_whatever_validation_accepts_builds_and_runs_and_the_rest_is_one_line():
    """Validation first: a combination the builder (or the first forward pass) would reject
    is caught by validate_config, in one line naming both keys."""
    accepted = refused = 0
    for cfg in _combinations():
        try:
            validate_config(cfg)
        except ConfigError as err:
            message = str(err)
            assert "\n" not in message and " conflicts with " in message, message
            refused += 1
            continue
        model = build_model(cfg).eval()
        with torch.no_grad():
            out = model(torch.randn(1, cfg.data.in_len, 1))
        assert out.shape == (1, cfg.data.out_len, 1) and out.isfinite().all()
        accepted += 1
    assert accepted > 100 and refused > 20


def test_a_composed_node_is_merged_into_its_schema_again_only_where_it_could_differ():
    """validate_config skips merging a composed config's nodes into their schemas (OmegaConf
    checked them when they were set); a node opened to keys of its own, or its plain copy, is
    merged and refused as before."""
    cfg = compose_config(["experiment=quick"])
    validate_config(cfg)
    OmegaConf.set_struct(cfg.attention, False)
    cfg.attention.foo = 1
    for config in (cfg, OmegaConf.to_container(cfg)):
        with pytest.raises(ConfigError) as err:
            validate_config(config)
        assert str(err.value).startswith("foo is not allowed") and "\n" not in str(err.value)


def test_a_missing_value_is_named_also_where_another_key_interpolates_it():
    cfg = compose_config(["data=csv"])
    for interpolating in (False, True):  # resolving it fails: the missing value is named
        if interpolating:
            OmegaConf.set_struct(cfg, False)
            cfg.log_path = "${data.path}"
        with pytest.raises(ConfigError) as err:
            validate_config(cfg)
        assert str(err.value) == ("data.path is required (the CSV file to read): "
                                  "set data.path=<value>")
