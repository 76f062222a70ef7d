"""The encoder-only forecaster with a flatten head, PatchTST's design (Nie et al. 2023, "A Time
Series is Worth 64 Words"): src [B, in_len, F] -> forecast [B, out_len, T] (`model=encoder`;
the published PatchTST is this family with `experiment=patchtst`'s options).

The encoder reads the window's tokens (patches with `embedding=patch`), and a flatten head
maps every token's output at once to the whole horizon: the encoder's output [B, N, d_model]
is flattened to [B, N * d_model] and projected to out_len steps per target channel. There is
no decoder: nothing is generated step by step and no placeholder tokens are learned; each
horizon step reads every input token through one linear map.

Everything before the head (instance normalisation, tokens, positions, the encoder with any
attention backend and FFN) and after it (the linear path, channel independence) is shared
with every family (forecaster.py). PatchTST's own setting is channel independence (each
channel its own window: `model.channel_independent=true`, or a wide CSV panel whose columns are
independent series), RevIN, patches 16/8 and BatchNorm (`model.norm=batch`). Its one attention
stack, `encoder`, runs along time; official PatchTST checkpoints load (official/patchtst.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch import Tensor, nn

from ...data.time_features import calendar_features
from ..embedding import Tokenizer, patch_shape
from ..flops import count_parts
from ..forecaster import ENCODER, WindowForecaster
from ..kit import Kit
from ..options import EncoderOptions, Site
from .registry import register_family

# model.final_norm: a norm after the encoder stack; auto: after a pre-norm stack only
FINAL_NORM = {"auto": None, "always": True, "never": False}


@dataclass
class FlattenOptions(EncoderOptions):
    """`model=encoder`: the encoder-only model with a flatten head."""

    res_attention: bool = False  # residual attention (RealFormer): each encoder layer adds the
    # previous one's pre-softmax scores to its own (the published PatchTST: true)

    def tokenizer(self, cfg: Mapping, n_features: int):
        data, embedding = cfg["data"], cfg["embedding"]
        return Tokenizer(data["in_len"], 0, data["out_len"], *patch_shape(cfg),
                         embedding["padding"])

    def sites(self, cfg, n_features):
        tokens = self.tokenizer(cfg, n_features).encoder_tokens
        return [Site(ENCODER, self.TOKEN_AXIS, tokens, tokens, self.encoder_layers,
                     residual=self.res_attention)]

    def position_tokens(self, cfg) -> tuple[int, str]:
        return self.tokenizer(cfg, 1).encoder_tokens, "the encoder's tokens"

    def head_flops(self, tokens: int, inner_t: int, out_len: int) -> int:
        """Every encoder token's output flattened, projected to the horizon."""
        return 2 * tokens * self.d_model * out_len * inner_t

    def forward_flops(self, cfg, n_features, n_targets, pairs="seen"):
        inner_f, inner_t = (1, 1) if self.channel_independent else (n_features, n_targets)
        tokens = self.tokenizer(cfg, inner_f)
        n = tokens.encoder_tokens
        embeddings = 2 * self.d_model * n * tokens.token_width(inner_f)
        head = self.head_flops(n, inner_t, cfg["data"]["out_len"])
        windows = n_targets if self.channel_independent else 1
        series = (inner_f - len(calendar_features(cfg["data"])), n)
        return count_parts(cfg, self, self.sites(cfg, n_features), embeddings, head, inner_t,
                           windows, pairs, series)


@register_family("encoder", FlattenOptions)
class EncoderForecaster(WindowForecaster):
    # Whose official checkpoints load into it (model.official_weights): official/__init__.py
    PUBLISHED = "PatchTST"

    def __init__(self, options: FlattenOptions, kit: Kit):
        site = options.sites(kit.cfg, kit.n_features)[0]
        # `linear`: every attention projection keeps nn.Linear's own initialisation, as the
        # published models' do.
        layers = kit.encoder_layers(site, linear_init=options.attention_init == "linear",
                                    attention_output_dropout=options.attention_output_dropout)
        inner = 1 if options.channel_independent else kit.n_features
        super().__init__(options, kit, tokens=options.tokenizer(kit.cfg, inner),
                         encoder_layers=layers, input_encoding=kit.input_encoding(),
                         final_norm=FINAL_NORM[str(options.final_norm)],
                         res_attention=site.residual)
        self.head_dropout = nn.Dropout(options.head_dropout)
        self.head = self._make_head(options.d_model)
        self.attach_linear_path(self.head)

    def _make_head(self, d_model: int) -> nn.Linear:
        # [B, N * d_model] -> every step of the horizon, for every target channel (K values
        # each for a probabilistic output: inner_outputs = T * K)
        return nn.Linear(self.tokens.encoder_tokens * d_model, self.out_len * self.inner_outputs)

    def _forecast(self, src, tgt, stats, side, need_weights):
        memory, maps = self.encode(src, side, need_weights)  # [B, N, d_model]
        return self._read_out(self.head_dropout(memory)), {ENCODER: maps}  # [B, out_len, T * K]

    def _read_out(self, memory: Tensor) -> Tensor:
        flat = memory.flatten(1)  # [B, N * d_model]
        return self.head(flat).view(len(memory), self.out_len, self.inner_outputs)

    def load_official(self, state_dict: Mapping) -> None:
        """An official PatchTST state dict into this model, or OfficialWeightsError."""
        from ..official.patchtst import load_patchtst_weights

        load_patchtst_weights(self, state_dict)

