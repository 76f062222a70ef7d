"""The shared layers a family builds its model from, made from a composed config's groups.

A family's constructor receives a `Kit` and asks it for what it needs, in the order it needs it
(the order of the random draws, so a seed gives one model): an attention for each position of its
(`attention(site, layer)`: the `attention` group's backend with its kernel chosen, told its
depth, its place on the time axis and its tokens), FFNs (`ffn` group), encoder and decoder
layers, the encoding added to the embeddings (`pos_encoding`), the output (`loss`), and what the
backend asks the model to compute from each window (`side_inputs`). A family reads its own
options and nothing else of the config's `model` node.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from ..attention import Attention, attention_context, attention_schema, build_attention
from ..data.time_features import calendar_features
from ..probabilistic.outputs import build_output
from .ffn import FeedForward
from .layers import DecoderLayer, EncoderLayer
from .options import ModelOptions, Site, attention_node
from .positional import attention_position_factory, build_input_encoding


class Kit:
    def __init__(self, cfg: Mapping, options: ModelOptions, n_features: int, n_targets: int,
                 kernels: str = "torch"):
        """`cfg`: a composed config as plain values; `options`: its model node as the family's
        options; `n_features`: input channels (targets first, then covariates, then calendar
        features); `n_targets`: channels forecast; `kernels`: the run's set (torch or native)."""
        self.cfg, self.options = cfg, options
        self.n_features, self.n_targets, self.kernels = n_features, n_targets, kernels
        self.d_model, self.n_heads = options.d_model, options.n_heads
        self.in_len, self.out_len = cfg["data"]["in_len"], cfg["data"]["out_len"]
        self.n_marks = len(calendar_features(cfg["data"]))  # calendar features, last
        self._attention = dict(cfg["attention"])
        self._new_position = attention_position_factory(cfg["pos_encoding"], self.n_heads)

    @property
    def attention_options(self):
        """The attention group's node as its backend's options."""
        return attention_schema(self._attention["name"])(**self._attention)

    def attention(self, site: Site, layer: int, linear_init: bool = False) -> Attention:
        """The attention at `site`, depth `layer` (1-based) in its stack. `linear_init`: every
        projection keeps nn.Linear's own initialisation, as the published models' do (the
        backends' default is nn.MultiheadAttention's)."""
        _, node = attention_node(self.cfg, site)
        context = {"layer": layer, "cross_attention": site.cross,
                   "position": self._new_position(), "lengths": (site.q_len, site.k_len),
                   "window_keys": site.window_keys}
        accepted = attention_context(node["name"])
        context = {k: v for k, v in context.items() if k in accepted and v is not None}
        options = {k: v for k, v in node.items() if k != "name"}
        attn = build_attention(node["name"], self.d_model, self.n_heads,
                               kernels=self.kernels, residual=site.residual, **options, **context)
        if linear_init:
            for module in attn.modules():
                if isinstance(module, nn.Linear):
                    module.reset_parameters()
        return attn

    def ffn(self) -> FeedForward:
        ffn = self.cfg["ffn"]
        return FeedForward(self.d_model, ffn["d_ff"] or 4 * self.d_model,
                           activation=ffn["activation"], gated=ffn["gated"], bias=ffn["bias"],
                           bias_gate=ffn["bias_gate"], dropout=ffn["dropout"])

    def encoder_layers(self, site: Site, linear_init: bool = False,
                       attention_output_dropout: float = 0.0) -> list[EncoderLayer]:
        """The stack at `site`: its layers, each an attention and an FFN."""
        o = self.options
        return [EncoderLayer(self.attention(site, i, linear_init), self.ffn(), o.d_model,
                             o.dropout, o.norm_first, o.norm, attention_output_dropout)
                for i in range(1, site.layers + 1)]

    def decoder_layers(self, own: Site, cross: Site) -> list[DecoderLayer]:
        """The decoder's layers: self-attention at `own`, cross-attention at `cross`, an FFN."""
        o = self.options
        return [DecoderLayer(self.attention(own, i), self.attention(cross, i), self.ffn(),
                             o.d_model, o.dropout, o.norm_first, o.norm)
                for i in range(1, own.layers + 1)]

    def input_encoding(self) -> nn.Module:
        """What is added to the embeddings (`pos_encoding`): `forward(x, offset=0)`."""
        return build_input_encoding(self.cfg["pos_encoding"], self.d_model)

    def output(self):
        """What the model forecasts per step and target (`loss`: probabilistic/outputs.py)."""
        return build_output(self.cfg["loss"])

    def side_inputs(self, channels: int, in_len: int, tokens: int
                    ) -> tuple[str, nn.Module] | None:
        """What the backend asks the model to compute from each window (its name in the model
        and the module), or None (AttentionOptions.side_inputs)."""
        return self.attention_options.side_inputs(channels, in_len, tokens)

    @property
    def signed_maps(self) -> bool:
        """Whether a backend's weights can be negative (maps drawn centred on zero)."""
        nodes = [self._attention, self.cfg.get("variate_attention") or self._attention]
        return any(attention_schema(n["name"]).SIGNED_WEIGHTS for n in nodes)
