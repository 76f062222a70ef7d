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
stack, `encoder`, runs along time; official PatchTST checkpoints load
(seqforecast/published/patchtst.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from ...attention import TIME, Site
from ..embedding import Tokenizer, patch_shape
from ..forecaster import ENCODER, WindowForecaster
from ..kit import Kit
from ..options import EncoderOptions
from .registry import register_family

# model.final_norm: a norm after the encoder stack; auto: after a pre-norm stack only
FINAL_NORM = {"auto": None, "always": True, "never": False}


@dataclass
class FlattenOptions(EncoderOptions):
    """`model=encoder`: the encoder-only model with a flatten head."""

    res_attention: bool = False  # residual attention (RealFormer): each encoder layer adds the
    # previous one's pre-softmax scores to its own (the published PatchTST: true)


@register_family("encoder", FlattenOptions)
class EncoderForecaster(WindowForecaster):
    TOKEN_AXIS = TIME  # the axis its tokens lie along (what its attention serves)

    @staticmethod
    def tokenizer(options: FlattenOptions, kit: Kit, channels: int) -> Tokenizer:
        """Its tokens: the window's patches (or steps) along time."""
        cfg = kit.cfg
        data, embedding = cfg["data"], cfg["embedding"]
        return Tokenizer(data["in_len"], 0, data["out_len"], *patch_shape(cfg),
                         embedding["padding"])

    def __init__(self, options: FlattenOptions, kit: Kit):
        inner = 1 if options.channel_independent else kit.n_features
        tokens = self.tokenizer(options, kit, inner)
        n = tokens.encoder_tokens
        site = Site(ENCODER, self.TOKEN_AXIS, n, n, options.encoder_layers,
                    residual=options.res_attention)
        # `linear`: every attention projection keeps nn.Linear's own initialisation, as the
        # published models' do.
        layers = kit.encoder_layers(site, linear_init=options.attention_init == "linear",
                                    attention_output_dropout=options.attention_output_dropout)
        super().__init__(options, kit, tokens=tokens, encoder_layers=layers,
                         input_encoding=kit.input_encoding(n, "the encoder's tokens"),
                         final_norm=FINAL_NORM[str(options.final_norm)],
                         res_attention=site.residual)
        self.head_dropout = kit.dropout(options.head_dropout)
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
