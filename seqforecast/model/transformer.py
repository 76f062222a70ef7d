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
only ones it can feed back. What the encoder-decoder shares with every forecaster (instance
normalisation, tokens, the encoder, the linear path) is in forecaster.py.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .forecaster import WindowForecaster
from .layers import DecoderLayer, make_norm

DECODING = ("oneshot", "autoregressive")


class ForecastTransformer(WindowForecaster):
    def __init__(
        self,
        *,
        d_model: int,
        decoding: str,
        decoder_layers: list[DecoderLayer],
        norm_first: bool,
        norm: str,
        **shared,
    ):
        """`shared`: WindowForecaster's arguments (n_features, in_len, label_len, ...)."""
        super().__init__(d_model=d_model, norm_first=norm_first, norm=norm, **shared)
        label_len = self.label_len
        if decoding not in DECODING:
            raise ValueError(f"decoding={decoding!r}; allowed: {', '.join(DECODING)}")
        if decoding == "autoregressive" and label_len < 1:
            raise ValueError("autoregressive decoding needs label_len >= 1")
        self.decoding = decoding
        stride, inner_targets = self.tokens.stride, self.inner_targets
        self.tgt_embed = nn.Linear(stride * inner_targets, d_model)
        self.placeholder = (
            nn.Parameter(torch.randn(d_model) * 0.02) if decoding == "oneshot" else None
        )
        self.decoder = nn.ModuleList(decoder_layers)
        self.decoder_norm = make_norm(norm, d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, stride * self.inner_outputs)  # K values per target
        self._attach_linear_path(self.head)

    def _forecast(
        self, src: Tensor, tgt: Tensor | None, stats, maps: dict, need_weights: bool,
        factors=None,
    ) -> Tensor:
        memory = self._encode(src, maps, need_weights, factors)
        n_targets = self.inner_targets
        # The decoder starts from the last label_len observed target values: [B, label_len, T]
        known = src[:, src.shape[1] - self.label_len :, :n_targets]
        stride, out_tokens = self.tokens.stride, self.tokens.output_tokens

        if self.decoding == "oneshot":
            forecast = self._decode(known, memory, maps, need_weights, factors,
                                    placeholders=True)
        elif tgt is not None and self.training:
            # Teacher forcing: each decoder token reads the chunk before it and predicts its
            # own, so the inputs are the known chunks and all output chunks but the last.
            shifted = self.norm.normalize_targets(tgt[:, : (out_tokens - 1) * stride], stats)
            values = torch.cat([known, shifted], dim=1)
            forecast = self._decode(values, memory, maps, need_weights, factors)
            forecast = forecast[:, -out_tokens * stride :]
        else:
            forecast = self._generate(known, memory, maps, need_weights, factors)
        return forecast[:, : self.out_len]  # [B, out_len, T * K]

    def _decode(
        self,
        values: Tensor,
        memory: Tensor,
        maps: dict,
        need_weights: bool,
        factors=None,
        placeholders: bool = False,
    ) -> Tensor:
        """values [B, k * stride, T] (+ output placeholders) -> predictions, a chunk per
        token: [B, k * stride, T * K], or [B, output_tokens * stride, T * K] with placeholders
        (K values per target: the output's parameters)."""
        x = self.tgt_embed(self.tokens.chunk(values))  # [B, k, d_model]
        if placeholders:
            out_tokens = self.tokens.output_tokens
            fill = self.placeholder.expand(x.shape[0], out_tokens, -1)
            x = torch.cat([x, fill], dim=1)  # [B, label tokens + output tokens, d_model]
        # The decoder's first token sits label_len steps before the forecast on the time axis,
        # for the added encodings and the position modules inside attention alike (generation
        # keeps that start, so its steps are teacher forcing's).
        start = self.tokens.decoder_start
        x = self.input_encoding(x, offset=start)
        causal = self.decoding == "autoregressive"
        maps["decoder_self"], maps["cross"] = [], []
        for layer in self.decoder:
            x, self_weights, cross_weights = layer(
                x, memory, causal, need_weights, start=start, memory_start=0, factors=factors
            )
            maps["decoder_self"].append(self_weights)
            maps["cross"].append(cross_weights)
        out = self.tokens.unchunk(self.head(self.decoder_norm(x)))  # [B, tokens * stride, T * K]
        return out[:, -self.tokens.output_tokens * self.tokens.stride :] if placeholders else out

    def _fed_back(self, predicted: Tensor) -> Tensor:
        """What generation feeds back: predicted [B, stride, T * K] in normalised units -> the
        point [B, stride, T] (a probabilistic output's median or mean)."""
        if self.output.n_params == 1:
            return predicted
        output = self.output
        return output.point(output.constrain(predicted.unflatten(-1, (-1, output.n_params))))

    def _generate(self, known: Tensor, memory: Tensor, maps: dict, need_weights: bool,
                  factors=None) -> Tensor:
        values, predicted = known, []
        stride = self.tokens.stride
        for _ in range(self.tokens.output_tokens):
            # One chunk of `stride` steps a time. Only the last step's maps are kept (the
            # full prefix attends there).
            nxt = self._decode(values, memory, maps, need_weights, factors)[:, -stride:]
            predicted.append(nxt)  # [B, stride, T * K]
            values = torch.cat([values, self._fed_back(nxt)], dim=1)
        return torch.cat(predicted, dim=1)
