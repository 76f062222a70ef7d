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

from .embedding import Tokenizer
from .layers import DecoderLayer, EncoderLayer
from .linear_path import LinearPath
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
        patch_len: int = 1,
        stride: int = 1,
        linear_path: str = "none",
        decomposition_kernel: int = 25,
        channel_independent: bool = False,
    ):
        super().__init__()
        if decoding not in DECODING:
            raise ValueError(f"decoding={decoding!r}; allowed: {', '.join(DECODING)}")
        if decoding == "autoregressive" and label_len < 1:
            raise ValueError("autoregressive decoding needs label_len >= 1")
        if not 1 <= n_targets <= n_features:
            raise ValueError(f"n_targets={n_targets} must be in [1, n_features={n_features}]")
        if channel_independent and n_features != n_targets:
            raise ValueError(
                f"channel_independent forecasts every channel from its own past: "
                f"n_features={n_features} must equal n_targets={n_targets} (no covariates)"
            )
        self.n_features = n_features
        self.n_targets = n_targets
        self.channel_independent = channel_independent
        # Inside the model, a channel-independent window is one channel. [B * C, L, 1]
        inner_features, inner_targets = (1, 1) if channel_independent else (n_features, n_targets)
        self.in_len = in_len
        self.out_len = out_len
        self.label_len = label_len
        self.decoding = decoding
        self.instance_norm = instance_norm
        self.norm = build_instance_norm(instance_norm, inner_features)
        self.tokens = Tokenizer(in_len, label_len, out_len, patch_len, stride)

        self.src_embed = nn.Linear(patch_len * inner_features, d_model)
        self.tgt_embed = nn.Linear(stride * inner_targets, d_model)
        self.placeholder = (
            nn.Parameter(torch.randn(d_model) * 0.02) if decoding == "oneshot" else None
        )
        self.input_encoding = input_encoding
        self.encoder = nn.ModuleList(encoder_layers)
        self.decoder = nn.ModuleList(decoder_layers)
        # Pre-norm stacks end un-normalised; close each with a LayerNorm (as nn.Transformer).
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, stride * inner_targets)
        self.linear_path = (
            LinearPath(linear_path, in_len, out_len, decomposition_kernel)
            if linear_path != "none"
            else None
        )
        if self.linear_path is not None:
            # The Transformer starts at zero and learns what the linear path misses.
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

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
        if self.channel_independent:
            batch = src.shape[0]
            src = _fold(src)
            tgt = _fold(tgt) if tgt is not None else None
        maps: dict[str, list[Tensor]] = {"encoder": [], "decoder_self": [], "cross": []}
        src, stats = self.norm.normalize(src)
        memory = self._encode(src, maps, return_attention)
        n_targets = src.shape[2] if self.channel_independent else self.n_targets
        # The decoder starts from the last label_len observed target values: [B, label_len, T]
        known = src[:, src.shape[1] - self.label_len :, :n_targets]
        stride, out_tokens = self.tokens.stride, self.tokens.output_tokens

        if self.decoding == "oneshot":
            forecast = self._decode(known, memory, maps, return_attention, placeholders=True)
        elif tgt is not None and self.training:
            # Teacher forcing: each decoder token reads the chunk before it and predicts its
            # own, so the inputs are the known chunks and all output chunks but the last.
            shifted = self.norm.normalize_targets(tgt[:, : (out_tokens - 1) * stride], stats)
            values = torch.cat([known, shifted], dim=1)
            forecast = self._decode(values, memory, maps, return_attention)
            forecast = forecast[:, -out_tokens * stride :]
        else:
            forecast = self._generate(known, memory, maps, return_attention)
        forecast = forecast[:, : self.out_len]  # [B, out_len, T]
        if self.linear_path is not None:
            forecast = forecast + self.linear_path(src[..., :n_targets])
        forecast = self.norm.denormalize_targets(forecast, stats)
        if self.channel_independent:
            forecast = _unfold(forecast, batch)
        return (forecast, maps) if return_attention else forecast

    @torch.no_grad()
    def fit_linear_path(self, src: Tensor, target: Tensor) -> None:
        """Least-squares fit of the linear path on training windows src [N, in_len, F],
        target [N, out_len, T], in the units it reads (the instance-normalised window)."""
        if self.linear_path is None:
            raise ValueError("this model has no linear path (model.linear_path=none)")
        if self.channel_independent:
            src, target = _fold(src), _fold(target)
        n_targets = target.shape[2]
        normalized, stats = self.norm.normalize(src)
        self.linear_path.fit_least_squares(
            normalized[..., :n_targets], self.norm.normalize_targets(target, stats)
        )

    def token_spans(self, decoder_tokens: int) -> tuple[list, list]:
        """([first, last] step of each encoder token, the same for the decoder's first
        `decoder_tokens` tokens): the labels of attention maps."""
        return self.tokens.encoder_spans(), self.tokens.decoder_spans(decoder_tokens)

    def _encode(self, src: Tensor, maps: dict, need_weights: bool) -> Tensor:
        # [B, encoder_tokens, d_model], tokens 0..encoder_tokens-1 on the time axis
        x = self.input_encoding(self.src_embed(self.tokens.encoder_input(src)))
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
        """values [B, k * stride, T] (+ output placeholders) -> predictions, a chunk per
        token: [B, k * stride, T], or [B, output_tokens * stride, T] with placeholders."""
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
                x, memory, causal, need_weights, start=start, memory_start=0
            )
            maps["decoder_self"].append(self_weights)
            maps["cross"].append(cross_weights)
        out = self.tokens.unchunk(self.head(self.decoder_norm(x)))  # [B, tokens * stride, T]
        return out[:, -self.tokens.output_tokens * self.tokens.stride :] if placeholders else out

    def _generate(self, known: Tensor, memory: Tensor, maps: dict, need_weights: bool) -> Tensor:
        values = known
        stride = self.tokens.stride
        for _ in range(self.tokens.output_tokens):
            # One chunk of `stride` steps a time. Only the last step's maps are kept (the
            # full prefix attends there).
            nxt = self._decode(values, memory, maps, need_weights)[:, -stride:]
            values = torch.cat([values, nxt], dim=1)
        return values[:, self.label_len :]


def _fold(x: Tensor) -> Tensor:
    """[B, L, C] -> [B * C, L, 1]: each channel its own series."""
    return x.transpose(1, 2).reshape(-1, x.shape[1], 1)


def _unfold(x: Tensor, batch: int) -> Tensor:
    """[B * C, L, 1] -> [B, L, C]."""
    return x.reshape(batch, -1, x.shape[1]).transpose(1, 2)
