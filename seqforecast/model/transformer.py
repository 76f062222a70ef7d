"""The encoder-decoder forecaster: src [B, in_len, F] -> forecast [B, out_len, F].

Decoding, by config:
- `oneshot`: the decoder reads the last `label_len` observed values followed by `out_len`
  learned placeholder vectors and predicts every step at once (non-causal self-attention:
  the placeholders carry no future values).
- `autoregressive`: causal decoder self-attention. In training, with a target, teacher
  forcing: the decoder reads the last `label_len` observed values and the target shifted by
  one, and each position predicts the next value. Otherwise (evaluation, or no target), it
  generates one step at a time, feeding each prediction back in.

The encoder reads every input channel (`n_features`: targets first, then covariates); the
decoder reads and forecasts only the `n_targets` target channels, whose future values are the
only ones it can feed back. `instance_norm` (normalization.py) normalises each window and maps
the forecast back.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .layers import DecoderLayer, EncoderLayer
from .normalization import build_instance_norm

DECODING = ("oneshot", "autoregressive")


class ForecastTransformer(nn.Module):
    def __init__(
        self,
        *,
        n_features: int,
        n_targets: int = 1,
        d_model: int,
        in_len: int,
        out_len: int,
        label_len: int,
        decoding: str,
        instance_norm: str,
        encoder_layers: list[EncoderLayer],
        decoder_layers: list[DecoderLayer],
        input_encoding: nn.Module,
        norm_first: bool,
    ):
        super().__init__()
        if decoding not in DECODING:
            raise ValueError(f"decoding={decoding!r}; allowed: {', '.join(DECODING)}")
        if decoding == "autoregressive" and label_len < 1:
            raise ValueError("autoregressive decoding needs label_len >= 1")
        if not 1 <= n_targets <= n_features:
            raise ValueError(f"n_targets={n_targets} must be in [1, n_features={n_features}]")
        self.n_features = n_features
        self.n_targets = n_targets
        self.in_len = in_len
        self.out_len = out_len
        self.label_len = label_len
        self.decoding = decoding
        self.instance_norm = instance_norm
        self.norm = build_instance_norm(instance_norm, n_features)

        self.src_embed = nn.Linear(n_features, d_model)
        self.tgt_embed = nn.Linear(n_targets, d_model)
        self.placeholder = (
            nn.Parameter(torch.randn(d_model) * 0.02) if decoding == "oneshot" else None
        )
        self.input_encoding = input_encoding
        self.encoder = nn.ModuleList(encoder_layers)
        self.decoder = nn.ModuleList(decoder_layers)
        # Pre-norm stacks end un-normalised; close each with a LayerNorm (as nn.Transformer).
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, n_targets)

    def forward(
        self, src: Tensor, tgt: Tensor | None = None, return_attention: bool = False
    ) -> Tensor | tuple[Tensor, dict[str, list[Tensor]]]:
        """src [B, in_len, F] (tgt [B, out_len, T] for teacher forcing) -> [B, out_len, T].

        With `return_attention`, also a dict of per-layer weights [B, H, Lq, Lk]:
        `encoder`, `decoder_self`, `cross` (for generation, those of the last step).
        """
        if src.dim() != 3 or src.shape[1:] != (self.in_len, self.n_features):
            raise ValueError(
                f"src must be [batch, {self.in_len}, {self.n_features}], got {tuple(src.shape)}"
            )
        maps: dict[str, list[Tensor]] = {"encoder": [], "decoder_self": [], "cross": []}
        src, stats = self.norm.normalize(src)
        memory = self._encode(src, maps, return_attention)
        # The decoder starts from the last label_len observed target values: [B, label_len, T]
        known = src[:, src.shape[1] - self.label_len :, : self.n_targets]

        if self.decoding == "oneshot":
            forecast = self._decode(known, memory, maps, return_attention, placeholders=True)
        elif tgt is not None and self.training:
            # Teacher forcing: position label_len - 1 + t reads value t - 1 and predicts value t.
            shifted = self.norm.normalize_targets(tgt[:, :-1], stats)
            values = torch.cat([known, shifted], dim=1)
            forecast = self._decode(values, memory, maps, return_attention)[:, -self.out_len :]
        else:
            forecast = self._generate(known, memory, maps, return_attention)
        forecast = self.norm.denormalize_targets(forecast, stats)
        return (forecast, maps) if return_attention else forecast

    def _encode(self, src: Tensor, maps: dict, need_weights: bool) -> Tensor:
        x = self.input_encoding(self.src_embed(src))  # [B, in_len, d_model], steps 0..in_len-1
        for layer in self.encoder:
            x, weights = layer(x, need_weights=need_weights, start=0)
            maps["encoder"].append(weights)
        return self.encoder_norm(x)

    def _decode(
        self,
        values: Tensor,
        memory: Tensor,
        maps: dict,
        need_weights: bool,
        placeholders: bool = False,
    ) -> Tensor:
        """values [B, L, T] (+ out_len placeholders) -> predictions [B, L or out_len, T]."""
        x = self.tgt_embed(values)  # [B, L, d_model]
        if placeholders:
            fill = self.placeholder.expand(x.shape[0], self.out_len, -1)
            x = torch.cat([x, fill], dim=1)  # [B, label_len + out_len, d_model]
        # The decoder's first step sits label_len steps before the forecast on the time axis,
        # for the added encodings and the position modules inside attention alike (generation
        # keeps that start, so its steps are teacher forcing's).
        start = self.in_len - self.label_len
        x = self.input_encoding(x, offset=start)
        causal = self.decoding == "autoregressive"
        maps["decoder_self"], maps["cross"] = [], []
        for layer in self.decoder:
            x, self_weights, cross_weights = layer(
                x, memory, causal, need_weights, start=start, memory_start=0
            )
            maps["decoder_self"].append(self_weights)
            maps["cross"].append(cross_weights)
        out = self.head(self.decoder_norm(x))
        return out[:, -self.out_len :] if placeholders else out

    def _generate(self, known: Tensor, memory: Tensor, maps: dict, need_weights: bool) -> Tensor:
        values = known
        for _ in range(self.out_len):
            # Only the last step's maps are kept (the full prefix attends there).
            nxt = self._decode(values, memory, maps, need_weights)[:, -1:]
            values = torch.cat([values, nxt], dim=1)
        return values[:, self.label_len :]
