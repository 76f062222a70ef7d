"""The shared layers a family builds its model from, made from a composed config's groups.

A family's constructor receives a `Kit` and asks it for what it needs, in the order it needs it
(the order of the random draws, so a seed gives one model): an attention for each layer of each
of its positions (`attention(site, layer)`: the `attention` group's backend, or
`variate_attention`'s at a variate site, told its site and given the position module
`pos_encoding` puts inside attention, its kernel chosen), FFNs (`ffn` group), encoder and
decoder layers, the encoding added to the embeddings (`input_encoding`), the output (`loss`),
and what its backends ask the model to compute from each window (`side_inputs`). Every piece
with a kernel of its own (dropout, the FFN, the residual blocks) comes from the run's kernel
set (parts.py). A family reads its own options and nothing else of the config's `model` node.

Building is the check: a component refuses, in its constructor, what it cannot be (a backend its
site, a table too short for the positions, ...), in one line naming the keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from ..attention import VARIATE, Attention, Site, build_attention
from ..attention.site import conflict
from ..data import data_source
from ..options import refuse
from ..probabilistic.outputs import build_output
from .ffn import FeedForward
from .layers import DecoderLayer, EncoderLayer
from .options import ModelOptions
from .parts import kernel_set
from .positional import build_positions


class Kit:
    def __init__(self, cfg: Mapping, options: ModelOptions, n_features: int, n_targets: int,
                 kernels: str = "torch", trains_on: str | None = None):
        """`cfg`: a composed config as plain values; `options`: its model node as the family's
        options; `n_features`: input channels (targets first, then covariates, then calendar
        features); `n_targets`: channels forecast; `kernels`: the run's set (torch or native);
        `trains_on`: the device type the run trains on (None: a saved run evaluated)."""
        if options.d_model % options.n_heads:
            raise refuse("model.d_model", options.d_model,
                         f"must be a multiple of model.n_heads={options.n_heads}")
        self.cfg, self.options = cfg, options
        self.n_features, self.n_targets, self.kernels = n_features, n_targets, kernels
        self.trains_on = trains_on
        self.parts = kernel_set(kernels)
        self.d_model, self.n_heads = options.d_model, options.n_heads
        self.in_len, self.out_len = cfg["data"]["in_len"], cfg["data"]["out_len"]
        # the last channels, read as they are (no instance norm): static covariates and
        # calendar features; before them those known in advance (their last out_len steps
        # the horizon's values), which a decoder may read for the steps it forecasts
        source = data_source(cfg["data"])
        self.n_marks = len(source.plain_channels())
        plain = n_features - self.n_marks
        self.known = slice(plain - len(source.known_ahead()), plain)
        data = cfg["data"]  # what the data adds beside its series, as (key, value), or None
        self.covariates = (("data.features", data["features"]) if data.get("features") else
                           ("data.futr", data["futr"]) if data.get("futr") else
                           ("data.static", data["static"]) if data.get("static") else
                           ("data.time_features", "true") if self.n_marks else None)
        self.positions = build_positions(cfg["pos_encoding"])
        self.built: list[Attention] = []  # every attention, in the order built
        self.sites: list[Site] = []  # the family's attention positions, as it asked for them

    def attention(self, site: Site, layer: int, linear_init: bool = False) -> Attention:
        """The attention at `site`, depth `layer` (1-based) in its stack. `linear_init`: every
        projection keeps nn.Linear's own initialisation, as the published models' do (the
        backends' default is nn.MultiheadAttention's)."""
        key, node = self._node(site)
        if site not in self.sites:
            self.sites.append(site)
        apart = ""
        if site.axis == VARIATE and key == "attention" and self._has_time_axis():
            apart = (f"; keep it on the time axis and give the {site.stack} tokens another "
                     f"backend: attention@variate_attention=vanilla")
        placed = site._replace(layer=layer, key=key, model=self.options.name, apart=apart)
        options = {k: v for k, v in node.items() if k != "name"}
        attn = build_attention(node["name"], self.d_model, self.n_heads, kernels=self.kernels,
                               trains_on=self.trains_on,
                               site=placed, position=self.positions.inside(self.n_heads),
                               **options)
        if linear_init:
            for module in attn.modules():
                if isinstance(module, nn.Linear):
                    module.reset_parameters()
        self.built.append(attn)
        return attn

    def _node(self, site: Site) -> tuple[str, Mapping]:
        """(its config key, the node) of the backend serving `site`: `variate_attention` at a
        variate-axis position where it is set, else the attention group's."""
        node = self.cfg.get("variate_attention") if site.axis == VARIATE else None
        return ("variate_attention", node) if node else ("attention", self.cfg["attention"])

    def _has_time_axis(self) -> bool:
        """Whether the family has built a time-axis position (so its variate positions can
        take another backend)."""
        return any(site.axis != VARIATE for site in self.sites)

    def check_used(self) -> None:
        """After the family is built: a config node it never read is refused, not dropped
        (variate_attention where the model has no variate-axis position)."""
        node = self.cfg.get("variate_attention")
        if node and not any(attn.site.key == "variate_attention" for attn in self.built):
            raise conflict("variate_attention", node["name"], "model", self.options.name,
                           "its attention has no variate-axis position; drop "
                           "variate_attention")

    def ffn(self) -> FeedForward:
        ffn = self.cfg["ffn"]
        return self.parts.ffn(self.d_model, ffn["d_ff"] or 4 * self.d_model,
                              activation=ffn["activation"], gated=ffn["gated"],
                              bias=ffn["bias"], bias_gate=ffn["bias_gate"],
                              dropout=ffn["dropout"])

    def dropout(self, p: float) -> nn.Module:
        return self.parts.dropout(p)

    def residual(self, dropout: float, norm_first: bool, norm: str) -> nn.Module:
        return self.parts.residual(self.d_model, dropout, norm_first, norm)

    def encoder_layers(self, site: Site, linear_init: bool = False,
                       attention_output_dropout: float = 0.0) -> list[EncoderLayer]:
        """The stack at `site`: its layers, each an attention and an FFN."""
        o = self.options
        return [EncoderLayer(self.attention(site, i, linear_init), self.ffn(), o.d_model,
                             o.dropout, o.norm_first, o.norm, attention_output_dropout,
                             parts=self.parts)
                for i in range(1, site.layers + 1)]

    def decoder_layers(self, own: Site, cross: Site) -> list[DecoderLayer]:
        """The decoder's layers: self-attention at `own`, cross-attention at `cross`, an FFN."""
        o = self.options
        return [DecoderLayer(self.attention(own, i), self.attention(cross, i), self.ffn(),
                             o.d_model, o.dropout, o.norm_first, o.norm, parts=self.parts)
                for i in range(1, own.layers + 1)]

    def input_encoding(self, positions: int, what: str) -> nn.Module:
        """What is added to the embeddings (`pos_encoding`), `forward(x, offset=0)`, for tokens
        that take `positions` positions (`what`: how the family counts them)."""
        return self.positions.input_encoding(self.d_model, positions, what, self.parts)

    def output(self):
        """What the model forecasts per step and target (`loss`: probabilistic/outputs.py)."""
        return build_output(self.cfg["loss"], self.cfg.get("intervals"))

    def side_inputs(self, channels: int, in_len: int, tokens: int
                    ) -> tuple[str, nn.Module] | None:
        """What the backends built so far ask the model to compute from each window (its
        name in the model and the module), or None (Attention.side_inputs). `tokens`: the
        window's own tokens, 0 where no layer reading the inputs has them for keys."""
        readers = [attn for attn in self.built
                   if type(attn).side_inputs is not Attention.side_inputs]
        if not readers:
            return None
        if not any(attn.site.window_keys for attn in readers):
            tokens = 0
        return readers[0].side_inputs(channels, in_len, tokens)

    @property
    def signed_maps(self) -> bool:
        """Whether a backend's weights can be negative (maps drawn centred on zero)."""
        return any(attn.signed_weights for attn in self.built)
