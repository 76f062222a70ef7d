"""The rules between options: each one a combination that every value allows alone but the
model, the data or the loop would reject together, refused in one line naming both keys. A
single option's type, allowed values and range are its own (schema.py), checked before these.
`cfg` is a resolved, current config as plain dicts."""

from __future__ import annotations

from collections.abc import Callable

from ..attention import AttentionOptions, attention_schema, carries_residual
from ..model.embedding import patch_shape
from ..model.families import family_options
from ..model.options import TIME, VARIATE, Site, attention_node
from ..model.positional import INSIDE_ATTENTION
from ..options import ConfigError
from ..probabilistic.quantiles import QuantileError, check_quantiles, interval_bounds

# group -> its rules, run right after that group's own options are checked (check.py), in
# the order written: a rule may read any group, but reports on the first key it names.
RULES: dict[str, list[Callable[[dict], None]]] = {}


def rule(group: str) -> Callable:
    def register(check: Callable[[dict], None]) -> Callable[[dict], None]:
        RULES.setdefault(group, []).append(check)
        return check

    return register


def _refuse(key: str, value, allowed: str) -> None:
    raise ConfigError(f"{key}={value!r} is not allowed: {allowed}")


def _conflict(key: str, value, other: str, other_value, why: str) -> None:
    raise ConfigError(f"{key}={value} conflicts with {other}={other_value}: {why}")


def _sites(cfg: dict) -> list[Site]:
    """The model family's attention positions (model/options.py), for windows of one channel
    (the config does not know the data's)."""
    return family_options(cfg).sites(cfg, 1)


def _attention(cfg: dict, site: Site) -> AttentionOptions:
    """The options of the backend serving `site`, as its backend's dataclass."""
    node = attention_node(cfg, site)[1]
    return attention_schema(node["name"])(**node)


def _backends(cfg: dict) -> list[tuple[str, AttentionOptions, list[Site]]]:
    """(config key, options, the sites it serves) of each backend the model builds."""
    found: dict[str, tuple[str, AttentionOptions, list[Site]]] = {}
    for site in _sites(cfg):
        key = attention_node(cfg, site)[0]
        found.setdefault(key, (key, _attention(cfg, site), []))[2].append(site)
    return list(found.values())


# ---------------------------------------------------------------- the model's shape
# (rules reading the family's attention positions run with the data group: after the window's
# own lengths are checked)


@rule("model")
def heads_divide_the_width(cfg: dict) -> None:
    d_model, n_heads = cfg["model"]["d_model"], cfg["model"]["n_heads"]
    if d_model % n_heads:
        _refuse("model.d_model", d_model, f"must be a multiple of model.n_heads={n_heads}")


@rule("embedding")
def patches_fit_the_window(cfg: dict) -> None:
    patch_len, stride = patch_shape(cfg)
    if (patch_len, stride) == (1, 1):  # a token per step: nothing to fit
        return
    in_len = cfg["data"]["in_len"]
    if patch_len > in_len:
        _refuse("embedding.patch_len", patch_len, f"must be in [1, data.in_len={in_len}]")
    if stride > patch_len:
        _refuse("embedding.stride", stride,
                f"must be in [1, embedding.patch_len={patch_len}] (no input step skipped)")


@rule("embedding")
def the_family_takes_the_other_groups(cfg: dict) -> None:
    """The model family's own rules (ModelOptions.check: e.g. the decoder's label_len, channel
    tokens without positions)."""
    family_options(cfg).check(cfg)


@rule("data")  # the family's tokens: after the window's own lengths are checked
def the_position_table_covers_the_tokens(cfg: dict) -> None:
    pos = cfg["pos_encoding"]
    if "max_len" not in pos:
        return
    needed, what = family_options(cfg).position_tokens(cfg)
    if pos["max_len"] < needed:
        _refuse("pos_encoding.max_len", pos["max_len"], f"must be >= {what} = {needed}")


@rule("pos_encoding")
def attention_and_positions_agree(cfg: dict) -> None:
    """What each backend says of its options (attention/base.py's AttentionOptions) against
    the model's width and the positional encoding."""
    pos, model = cfg["pos_encoding"]["name"], cfg["model"]
    d_model, n_heads = model["d_model"], model["n_heads"]
    nodes = {key: cfg.get(key) for key in ("attention", "variate_attention")}
    for group, node in ((key, node) for key, node in nodes.items() if node):
        attention = attention_schema(node["name"])(**node)
        conflict = attention.shape_conflict(d_model, n_heads)
        if conflict:
            key, why = conflict
            _conflict(f"{group}.{key}", getattr(attention, key), "model.d_model", d_model, why)
        if pos in INSIDE_ATTENTION and not attention.INSIDE_POSITIONS:
            _conflict("pos_encoding", pos, group, attention.name,
                      f"{attention.name} attention has no q.k scores for {pos} to act in; use "
                      f"sinusoidal, learned or none")
        own = attention.position_terms()
        if own and pos in INSIDE_ATTENTION:
            _conflict(f"{group}.{own[0]}", "true", "pos_encoding", pos,
                      f"both would put a position module inside {attention.name} attention; "
                      f"use pos_encoding=relative alone (it has distance_decay and past_bias) "
                      f"or set {group}.{own[0]}=false")
        width, how = attention.qk_width(d_model // n_heads)
        if pos == "rope" and width % 2:
            head = f"model.d_model/model.n_heads = {d_model}/{n_heads}"
            _conflict("pos_encoding", "rope", "model.d_model", d_model,
                      f"rope rotates pairs of q/k channels, and the q/k width per head, "
                      f"{how.format(head=head)} = {width}, is odd")


@rule("data")
def the_backend_can_serve_the_model(cfg: dict) -> None:
    """What each backend says it cannot do (AttentionOptions' CAUSAL, MIXES_QUERIES, TIME_AXIS
    and its time-axis options) against what each of the family's attention positions asks of
    it (model/options.py's Site)."""
    family, sites = cfg["model"]["name"], _sites(cfg)
    # a family with both axes can take another backend at its variate positions
    both_axes = {site.axis for site in sites} == {TIME, VARIATE}
    for site in sites:
        group, attention = attention_node(cfg, site)[0], _attention(cfg, site)
        # a step generated from the steps before it: causal self-attention, and cross-attention
        # where each query is its own
        why = ((type(attention).CAUSAL if site.causal else None)
               or (type(attention).MIXES_QUERIES if site.stepwise else None))
        if why:
            key, _, value = site.stepwise.partition("=")
            _conflict(group, attention.name, key, value,
                      f"a decoder step may read only the steps before it, and {why}; use "
                      f"model.decoding=oneshot or a backend that can be causal")
        if site.cross and type(attention).CROSS:
            _conflict(group, attention.name, "model", family,
                      f"its {site.stack} position is cross-attention, and "
                      f"{type(attention).CROSS}")
        if site.axis == VARIATE:
            apart = (f"; keep it on the time axis and give the {site.stack} tokens another "
                     f"backend: attention@variate_attention=vanilla"
                     if both_axes and group == "attention" else "")
            if attention.TIME_AXIS:
                _conflict("model", family, group, attention.name,
                          f"{attention.TIME_AXIS}, and its {site.stack} tokens are channels, "
                          f"in no order{apart}")
            for key, value in attention.time_axis():
                _conflict("model", family, f"{group}.{key}", str(value).lower(),
                          f"it assumes tokens along time; the {site.stack} tokens are "
                          f"channels, in no order{apart}")
    variate = cfg.get("variate_attention")
    if variate and VARIATE not in {site.axis for site in sites}:
        _conflict("variate_attention", variate["name"], "model", family,
                  "its attention has no variate-axis position; drop variate_attention")
    side = variate and attention_schema(variate["name"])(**variate).side_inputs(1, 1, 1)
    if side and variate["name"] != cfg["attention"]["name"]:
        _conflict("variate_attention", variate["name"], "attention", cfg["attention"]["name"],
                  f"{variate['name']} attention reads what the model computes from each window "
                  f"for the attention group's backend; use attention={variate['name']}")


@rule("data")
def the_gate_has_heads_to_gate(cfg: dict) -> None:
    """attention.gate on a backend whose output is not one block per head."""
    for group, attention, _ in _backends(cfg):
        why = attention.gate_conflict() if str(attention.gate) != "none" else None
        if why:
            _conflict(f"{group}.gate", attention.gate, group, attention.name,
                      f"the gate scales each head's output, and {why}")


@rule("data")
def residual_attention_can_carry_the_scores(cfg: dict) -> None:
    for _, attention, sites in _backends(cfg):
        if any(site.residual for site in sites):
            why = carries_residual(attention, cfg["pos_encoding"]["name"])
            if why:
                raise ConfigError(f"model.res_attention=true conflicts: {why}")


@rule("data")
def the_backend_fits_the_tokens(cfg: dict) -> None:
    """What a backend needs of the fewest tokens a layer it serves reads (autocorrelation's
    lags, fourier's modes: AttentionOptions.token_conflict)."""
    for group, attention, sites in _backends(cfg):
        if attention.TIME_AXIS and any(site.axis == VARIATE for site in sites):
            continue  # refused with its own line
        fewest = min(n for site in sites for n in (site.q_len, site.k_len) if n)
        conflict = attention.token_conflict(fewest)
        if conflict:
            key, why = conflict
            _refuse(f"{group}.{key}", getattr(attention, key), why)


@rule("embedding")
def a_linear_path_to_fit_and_no_covariates_to_ignore(cfg: dict) -> None:
    model = cfg["model"]
    if model["linear_init"] == "least_squares" and model["linear_path"] == "none":
        _conflict("model.linear_init", "least_squares", "model.linear_path", "none",
                  "there is no linear path to fit; set model.linear_path=nlinear or dlinear")
    data = cfg["data"]  # covariates and calendar features: CSV data's only
    read = ("features" if data.get("features") else
            "time_features" if data.get("time_features") else None)
    if model["channel_independent"] and read:
        _conflict("model.channel_independent", "true", f"data.{read}",
                  "true" if read == "time_features" else data[read],
                  f"each channel is forecast from its own past, so covariates would be ignored; "
                  f"drop data.{read} or set model.channel_independent=false")


# ---------------------------------------------------------------- data


@rule("data")
def three_disjoint_synthetic_draws(cfg: dict) -> None:
    data, seed = cfg["data"], cfg["seed"]
    if data["name"] == "csv":
        return
    # Training from seed, selection from val_seed, test from test_seed.
    if data["val_seed"] == seed:
        _refuse("data.val_seed", data["val_seed"],
                f"must differ from seed={seed} (validation series differ from training)")
    if data["test_seed"] in (seed, data["val_seed"]):
        _refuse("data.test_seed", data["test_seed"],
                f"must differ from seed={seed} and data.val_seed={data['val_seed']} "
                f"(test series differ from training and validation)")


@rule("data")
def csv_columns_and_borders(cfg: dict) -> None:
    """One series (data.target), a long panel (+ data.id_column) or a wide one (data.targets);
    seasons inside the window; explicit borders both or neither."""
    data = cfg["data"]
    if data["name"] != "csv":
        return
    target, targets, id_column = data["target"], data["targets"], data["id_column"]
    if targets is None:
        if target is None:
            raise ConfigError(
                "data.target is required (the column to forecast): set data.target=<value>, or "
                "data.targets=[a, b] / data.targets=all for one series per column")
        if target in data["features"]:
            _refuse("data.features", data["features"], f"must not repeat the target {target!r}")
    else:
        if target is not None:
            _conflict("data.target", target, "data.targets", targets,
                      "name the columns to forecast once: data.targets for several")
        if id_column:
            _conflict("data.id_column", id_column, "data.targets", targets,
                      "a long panel (id column) forecasts data.target; wide format names its "
                      "series in data.targets")
        both = [c for c in data["features"] if targets != "all" and c in targets]
        if both:  # an exogenous series is read, never forecast (targets=all leaves it out)
            _conflict("data.features", data["features"], "data.targets", targets,
                      f"{', '.join(map(repr, both))} cannot be both forecast and exogenous")
    if id_column:
        if id_column == target or id_column in data["features"]:
            _conflict("data.id_column", id_column, "data.target/features",
                      [target, *data["features"]],
                      "the id column names each row's series; it cannot be forecast or read")
        if data["columns"] == "channels":
            _conflict("data.columns", "channels", "data.id_column", id_column,
                      "a long panel has one target; channels of one series are wide columns "
                      "(data.targets)")
        if data["time_column"] is None:
            _refuse("data.time_column", None,
                    "a long panel (data.id_column) needs the time column ordering each series")
    panel = id_column or (targets and data["columns"] == "series")
    if panel and data["fill"] == "interpolate":
        _conflict("data.fill", "interpolate", "data.id_column/targets", id_column or targets,
                  "a panel's windows share one buffer of rows; use data.fill=ffill")
    season = data["season"]  # its form checked by its schema; here, inside the window
    if any(p > data["in_len"] for p in (season if isinstance(season, list) else [season])):
        _refuse("data.season", season,
                f"a period in rows in [1, data.in_len={data['in_len']}], or a list of distinct "
                f"periods (e.g. [48, 336]: a seasonal naive each); 0 = no seasonal baseline")
    if (data["val_start"] is None) != (data["test_start"] is None):
        _refuse("data.val_start", data["val_start"],
                "give data.val_start and data.test_start together, or neither")
    if data["time_features"] and (data["time_column"] is None or panel):
        _conflict("data.time_features", "true", "data.time_column/columns",
                  [data["time_column"], data["columns"]], "calendar features are read from the "
                  "time column of one series (a wide file: data.columns=channels)")


@rule("trainer")
def scaled_units_need_scaled_data(cfg: dict) -> None:
    data = cfg["data"]
    if cfg["trainer"]["select_on"] == "mse_scaled" and (
            data["name"] != "csv" or data["scale"] == "none"):
        _conflict("trainer.select_on", "mse_scaled", "data.name/data.scale",
                  [data["name"], data.get("scale")],
                  "only CSV data scaled on its training rows (data.scale=standard or minmax) "
                  "has scaled units; select on mse")


# ---------------------------------------------------------------- intervals and the loss


def check_intervals(intervals: dict, data_name: str) -> None:
    """intervals' levels (valid quantiles holding every interval level asked for) and the
    adaptive method's needs; ConfigError in one line (evaluate's intervals= uses it too)."""
    if intervals["method"] == "none":
        return
    if intervals["method"] == "adaptive" and data_name != "csv":
        _conflict("intervals.method", "adaptive", "data.name", data_name,
                  "adaptive intervals learn from the test windows in time order; synthetic "
                  "series are independent draws: use intervals=split")
    levels = _quantile_rule("intervals.", check_quantiles, intervals["quantiles"])
    if not intervals["levels"]:
        _refuse("intervals.levels", intervals["levels"],
                "give at least one central interval level, e.g. [0.8, 0.95]")
    for level in intervals["levels"]:
        _quantile_rule("intervals.levels: ", interval_bounds, levels, level)
    if intervals["method"] == "adaptive":
        unpaired = [q for q in levels if not any(abs(q + p - 1.0) < 1e-9 for p in levels)]
        if unpaired:
            _refuse("intervals.quantiles", list(levels),
                    f"intervals.method=adaptive adapts central intervals: each level needs its "
                    f"mirror 1 - q ({unpaired[0]} has none)")


@rule("intervals")
def intervals_hold_their_levels(cfg: dict) -> None:
    check_intervals(cfg["intervals"], cfg["data"]["name"])


@rule("loss")
def quantiles_hold_the_median_and_the_intervals(cfg: dict) -> None:
    loss, intervals = cfg["loss"], cfg["intervals"]
    if loss["name"] != "quantile":
        return
    levels = _quantile_rule("loss.", check_quantiles, loss["quantiles"])
    if 0.5 not in levels:
        _refuse("loss.quantiles", list(levels), "include 0.5: the median is the point forecast")
    if intervals["method"] == "none":
        return
    for level in intervals["levels"]:
        _quantile_rule("loss.quantiles: ", interval_bounds, levels, level, then=(
            " (intervals.levels asks for it; add the levels to loss.quantiles or change "
            "intervals.levels)"))


def _quantile_rule(key: str, check: Callable, *args, then: str = ""):
    """check(*args) (probabilistic/quantiles.py); its refusal as one line, `key` before it."""
    try:
        return check(*args)
    except QuantileError as err:
        raise ConfigError(f"{key}{err}{then}") from None
