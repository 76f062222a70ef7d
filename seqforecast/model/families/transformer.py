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
only ones it can feed back, and the covariates known in advance (`data.futr`) over the steps it
forecasts: each token that forecasts an output chunk adds an embedding of that chunk's known
values (one-shot: the chunk's placeholder; autoregressive: the token before the chunk, which
predicts it, so teacher forcing and generation read the same). What the encoder-decoder shares
with every forecaster (instance normalisation, tokens, the encoder, the linear path) is in
forecaster.py.

Its attention stacks: `encoder`, `decoder_self` and `cross` (the decoder's queries over the
encoder's tokens), all along time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ...attention import TIME, AttentionCall, Site
from ...options import ConfigError, choice, count, option, positive, refuse
from ..embedding import Tokenizer, check_patches, patch_shape
from ..forecaster import ENCODER, WindowForecaster
from ..kit import Kit
from ..layers import make_norm
from ..options import ModelOptions
from .registry import register_family

DECODER_SELF, CROSS = "decoder_self", "cross"  # its decoder's stacks
Decoding = choice("Decoding", ("oneshot", "autoregressive"))


@dataclass
class TransformerOptions(ModelOptions):
    """`model=transformer`: the encoder-decoder."""

    decoder_layers: int = option(1, positive)
    decoding: Decoding = Decoding.oneshot  # oneshot | autoregressive
    label_len: int = option(8, count)  # observed steps the decoder starts from (<= in_len)


def _tokenizer(options: TransformerOptions, kit: Kit) -> Tokenizer:
    """The encoder's tokens and the decoder's chunks; ConfigError in one line for a label_len
    or patches the decoder cannot read."""
    cfg = kit.cfg
    in_len, embedding = cfg["data"]["in_len"], cfg["embedding"]
    low = 1 if options.decoding == "autoregressive" else 0
    if not low <= options.label_len <= in_len:
        raise refuse("model.label_len", options.label_len,
                     f"must be in [{low}, data.in_len={in_len}]"
                     + (" for autoregressive decoding" if low else ""))
    patch_len, stride = patch_shape(cfg)
    check_patches(patch_len, stride, in_len)
    if embedding["padding"] == "end" and (patch_len, stride) != (1, 1):
        raise ConfigError(
            "embedding.padding=end conflicts with model.name=transformer: patches past the "
            "window's end are PatchTST's; the encoder-decoder's time axis needs patches "
            "ending at in_len (embedding.padding=start)")
    if options.label_len % stride:
        raise ConfigError(
            f"model.label_len={options.label_len} conflicts with embedding.stride={stride}: "
            f"the decoder reads the last label_len steps in chunks of stride steps; make "
            f"label_len a multiple of stride")
    return Tokenizer(in_len, options.label_len, cfg["data"]["out_len"], patch_len, stride,
                     embedding["padding"])


@register_family("transformer", TransformerOptions)
class ForecastTransformer(WindowForecaster):
    def __init__(self, options: TransformerOptions, kit: Kit):
        tokens = _tokenizer(options, kit)
        enc, dec = tokens.encoder_tokens, tokens.label_tokens + tokens.output_tokens  # one-shot
        # Generating step by step, a decoder step may read only the steps before it.
        stepwise = ("model.decoding=autoregressive" if options.decoding == "autoregressive"
                    else None)
        encoder_layers = kit.encoder_layers(Site(ENCODER, TIME, enc, enc,
                                                 options.encoder_layers))
        # The decoder's layers are drawn before the input encoding (a learned one draws too): a
        # seed gives the weights it gave before the encoder-only model shared this builder.
        decoder_layers = kit.decoder_layers(
            Site(DECODER_SELF, TIME, dec, dec, options.decoder_layers, causal=bool(stepwise),
                 stepwise=stepwise, window_keys=False),
            Site(CROSS, TIME, dec, enc, options.decoder_layers, cross=True, stepwise=stepwise))
        data = kit.cfg["data"]
        super().__init__(options, kit, tokens=tokens, encoder_layers=encoder_layers,
                         input_encoding=kit.input_encoding(data["in_len"] + data["out_len"],
                                                           "data.in_len + data.out_len"))
        d_model = options.d_model
        self.decoding = str(options.decoding)
        stride, inner_targets = self.tokens.stride, self.inner_targets
        self.tgt_embed = nn.Linear(stride * inner_targets, d_model)
        self.placeholder = (
            nn.Parameter(torch.randn(d_model) * 0.02) if self.decoding == "oneshot" else None
        )
        self.decoder = nn.ModuleList(decoder_layers)
        self.decoder_norm = (make_norm(options.norm, d_model) if options.norm_first
                             else nn.Identity())
        self.head = nn.Linear(d_model, stride * self.inner_outputs)  # K values per target
        # the known-future channels, read over the forecast steps (None: the data has none)
        self.known = kit.known
        n_known = self.known.stop - self.known.start
        self.known_embed = nn.Linear(stride * n_known, d_model) if n_known else None
        self.attach_linear_path(self.head)

    def attention_stacks(self) -> dict[str, list[nn.Module]]:
        return {**super().attention_stacks(),
                DECODER_SELF: [layer.self_attn for layer in self.decoder],
                CROSS: [layer.cross_attn for layer in self.decoder]}

    def map_spans(self, stack, q_tokens, k_tokens):
        encoder, decoder = self.tokens.encoder_spans(), self.tokens.decoder_spans(q_tokens)
        if stack == ENCODER:
            return encoder[:q_tokens], encoder[:k_tokens]
        return decoder, (decoder if stack == DECODER_SELF else encoder)[:k_tokens]

    def _forecast(self, src, tgt, stats, side, need_weights):
        memory, encoder_maps = self.encode(src, side, need_weights)
        ahead = self._known_ahead(src)
        n_targets = self.inner_targets
        # The decoder starts from the last label_len observed target values: [B, label_len, T]
        known = src[:, src.shape[1] - self.label_len :, :n_targets]
        stride, out_tokens = self.tokens.stride, self.tokens.output_tokens

        if self.decoding == "oneshot":
            forecast, maps = self._decode(known, memory, side, need_weights, placeholders=True,
                                          ahead=ahead)
        elif tgt is not None and self.training:
            # Teacher forcing: each decoder token reads the chunk before it and predicts its
            # own, so the inputs are the known chunks and all output chunks but the last.
            shifted = self.norm.normalize_targets(tgt[:, : (out_tokens - 1) * stride], stats)
            values = torch.cat([known, shifted], dim=1)
            forecast, maps = self._decode(values, memory, side, need_weights, ahead=ahead)
            forecast = forecast[:, -out_tokens * stride :]
        else:
            forecast, maps = self._generate(known, memory, side, need_weights, ahead)
        # [B, out_len, T * K]
        return forecast[:, : self.out_len], {ENCODER: encoder_maps, **maps}

    def _known_ahead(self, src: Tensor) -> Tensor | None:
        """src [B, in_len, F'] (normalised) -> the embedding of each output chunk's known
        values [B, output_tokens, d_model] (the led channels' last out_len steps, padded to
        whole chunks with zeros), or None without known-future channels."""
        if self.known_embed is None:
            return None
        ahead = src[:, src.shape[1] - self.out_len :, self.known]  # [B, out_len, n_known]
        pad = self.tokens.output_tokens * self.tokens.stride - self.out_len
        if pad:
            ahead = torch.cat([ahead, ahead.new_zeros(ahead.shape[0], pad, ahead.shape[2])], 1)
        return self.known_embed(self.tokens.chunk(ahead))

    def _with_known(self, x: Tensor, ahead: Tensor) -> Tensor:
        """x [B, n, d_model] decoder tokens + each output chunk's known values' embedding on
        the token that forecasts that chunk: one-shot, the chunk's own placeholder (the tokens
        after the label ones); autoregressive, the token before it (from the last label
        token on, as many as there are)."""
        first = self.tokens.label_tokens - (self.decoding == "autoregressive")
        n = min(x.shape[1] - first, ahead.shape[1])
        return torch.cat([x[:, :first], x[:, first : first + n] + ahead[:, :n],
                          x[:, first + n :]], dim=1)

    def _decode(self, values: Tensor, memory: Tensor, side, need_weights: bool,
                placeholders: bool = False, ahead: Tensor | None = None
                ) -> tuple[Tensor, dict[str, list]]:
        """values [B, k * stride, T] (+ output placeholders) -> (predictions, a chunk per
        token: [B, k * stride, T * K], or [B, output_tokens * stride, T * K] with placeholders
        (K values per target: the output's parameters); the decoder stacks' weights).
        `ahead`: the output chunks' known values, embedded (_known_ahead), or None."""
        x = self.tgt_embed(self.tokens.chunk(values))  # [B, k, d_model]
        if placeholders:
            out_tokens = self.tokens.output_tokens
            fill = self.placeholder.expand(x.shape[0], out_tokens, -1)
            x = torch.cat([x, fill], dim=1)  # [B, label tokens + output tokens, d_model]
        if ahead is not None:
            x = self._with_known(x, ahead)
        # The decoder's first token sits label_len steps before the forecast on the time axis,
        # for the added encodings and the position modules inside attention alike (generation
        # keeps that start, so its steps are teacher forcing's).
        start = self.tokens.decoder_start
        x = self.input_encoding(x, offset=start)
        own = AttentionCall(causal=self.decoding == "autoregressive", need_weights=need_weights,
                            query_start=start, key_start=start, side=side)
        # Cross-attention: the decoder's steps for queries, the encoder's for keys.
        cross = AttentionCall(need_weights=need_weights, query_start=start, key_start=0,
                              side=side)
        maps = {DECODER_SELF: [], CROSS: []}
        for layer in self.decoder:
            x, own_attended, cross_attended = layer(x, memory, own, cross)
            maps[DECODER_SELF].append(own_attended.weights)
            maps[CROSS].append(cross_attended.weights)
        out = self.tokens.unchunk(self.head(self.decoder_norm(x)))  # [B, tokens * stride, T * K]
        if placeholders:
            out = out[:, -self.tokens.output_tokens * self.tokens.stride :]
        return out, maps

    def _fed_back(self, predicted: Tensor) -> Tensor:
        """What generation feeds back: predicted [B, stride, T * K] in normalised units -> the
        point [B, stride, T] (a probabilistic output's median or mean)."""
        if self.output.n_params == 1:
            return predicted
        output = self.output
        return output.point(output.constrain(predicted.unflatten(-1, (-1, output.n_params))))

    def _generate(self, known: Tensor, memory: Tensor, side, need_weights: bool,
                  ahead: Tensor | None = None) -> tuple[Tensor, dict[str, list]]:
        values, predicted, maps = known, [], {}
        stride = self.tokens.stride
        for _ in range(self.tokens.output_tokens):
            # One chunk of `stride` steps a time. Only the last step's maps are kept (the
            # full prefix attends there).
            out, maps = self._decode(values, memory, side, need_weights, ahead=ahead)
            nxt = out[:, -stride:]
            predicted.append(nxt)  # [B, stride, T * K]
            values = torch.cat([values, self._fed_back(nxt)], dim=1)
        return torch.cat(predicted, dim=1), maps
