"""What every forecaster shares: src [B, in_len, F] -> forecast [B, out_len, T].

A window is read the same way by every model family (`model` group; families/): checked for
shape, folded channel by channel with `channel_independent`, normalised per window
(`instance_norm`), cut into tokens (the family's tokenizer) and embedded, positioned
(`pos_encoding`), and passed through the encoder stack. What a family does after the encoder is
its own (`_forecast`): the encoder-decoder's decoder (families/transformer.py), the flatten head
(families/encoder.py), a head per channel (families/itransformer.py). The forecast then gets the
optional linear path (linear_path.py), is mapped back from the window's normalisation and
unfolded. The linear path reads (`model.linear_path_input`):

- `normalized`: the instance-normalised window, like the Transformer; the sum of both is
  mapped back with the window's normalisation.
- `raw`: the window as the model receives it (the data's scaled units), as the NLinear
  baseline does, so its least-squares fit is NLinear's exactly; the Transformer's part is
  mapped back with the normalisation's scale only (the path carries the level).

The encoder reads every input channel (`n_features`: targets first, then covariates); the
forecast holds the `n_targets` target channels.

A probabilistic model (`loss=quantile|gaussian`, probabilistic/outputs.py) has K outputs per
step and target instead of one: its quantiles or its distribution's parameters, each mapped
back like the point (the linear path and the normalisation are affine per value). Its
`forward` gives the point (the median or mean) unless asked for the whole distribution.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..attention import AttentionCall, ResidualQK
from ..attention.site import conflict
from .kit import Kit
from .layers import EncoderLayer, make_norm
from .linear_path import LinearPath
from .normalization import build_instance_norm
from .options import ModelOptions

ENCODER = "encoder"  # the encoder stack's name (its maps: attention/encoder/layer<i>)


class WindowForecaster(nn.Module):
    def __init__(
        self,
        options: ModelOptions,
        kit: Kit,
        *,
        tokens,
        encoder_layers: list[EncoderLayer],
        input_encoding: nn.Module,
        final_norm: bool | None = None,
        res_attention: bool = False,
        src_embed: nn.Module | None = None,
        window_tokens: int | None = None,
    ):
        """A family's constructor (`cls(options, kit)`) makes the parts whose draws come
        first (the encoder's layers, and its own before the input encoding) and hands them
        here: `tokens` (a Tokenizer or VariateTokens: embedding.py), `encoder_layers`,
        `input_encoding`. `final_norm`: a norm
        after the encoder stack (None: after a pre-norm stack only, as nn.Transformer);
        `res_attention`: the encoder stack carries residual attention (attention/residual.py).
        `src_embed`: the tokens' embedding (None: a linear map of each token's values, made
        here; a family with tokens of its own kinds gives its own). `window_tokens`: how many
        keys the window's own tokens are where a backend's side inputs index them per token
        (None: the tokenizer's encoder tokens).
        The data's `n_features` and `n_targets` come from the kit (targets first, then
        covariates, then calendar features, which no instance norm touches)."""
        super().__init__()
        n_features, n_targets = kit.n_features, kit.n_targets
        if not 1 <= n_targets <= n_features:
            raise ValueError(f"n_targets={n_targets} must be in [1, n_features={n_features}]")
        if options.linear_init == "least_squares" and options.linear_path == "none":
            raise conflict("model.linear_init", "least_squares", "model.linear_path", "none",
                           "there is no linear path to fit; set model.linear_path=nlinear or "
                           "dlinear")
        if options.channel_independent and kit.covariates:
            key, value = kit.covariates
            raise conflict("model.channel_independent", "true", key, value,
                           f"each channel is forecast from its own past, so covariates would "
                           f"be ignored; drop {key} or set model.channel_independent=false")
        self.family = options.name  # model=<name>: what a run says it trained
        self.n_features = n_features
        self.n_targets = n_targets
        self.channel_independent = options.channel_independent
        # Inside the model, a channel-independent window is one channel. [B * C, L, 1]
        inner_features, inner_targets = ((1, 1) if self.channel_independent
                                         else (n_features, n_targets))
        self.inner_targets = inner_targets
        # What the model forecasts per step and target (the `loss` group): its head gives
        # output.n_params values for each (1: a point).
        self.output = kit.output()
        self.inner_outputs = inner_targets * self.output.n_params
        self.in_len = kit.in_len
        self.out_len = kit.out_len
        self.label_len = tokens.label_len  # observed steps a decoder starts from (0: none)
        self.instance_norm = options.instance_norm
        self.n_marks = n_marks = kit.n_marks
        self.norm = build_instance_norm(options.instance_norm, inner_features - n_marks,
                                        options.revin_affine)
        # The instance norm reads the series' channels; static covariates and calendar
        # features pass as they are (a constant channel would be normalised to 0).
        self._normalize = self.norm.normalize if n_marks == 0 else self._normalize_series
        self.tokens = tokens
        self.res_attention = res_attention
        self.src_embed = (nn.Linear(self.tokens.token_width(inner_features), options.d_model)
                          if src_embed is None else src_embed)
        self.input_encoding = input_encoding
        self.encoder = nn.ModuleList(encoder_layers)
        # What the backend reads from each window before its norm (de-stationary attention's
        # factors), registered under the backend's name for it; None for most backends.
        side = kit.side_inputs(inner_features - n_marks, self.in_len,
                               tokens.encoder_tokens if window_tokens is None else window_tokens)
        self.side_name = None
        if side is not None:
            self.side_name = side[0]
            self.add_module(*side)
        # Pre-norm stacks end un-normalised; close the stack with a norm (as nn.Transformer).
        final_norm = options.norm_first if final_norm is None else final_norm
        self.encoder_norm = (make_norm(options.norm, options.d_model) if final_norm
                             else nn.Identity())
        self.linear_path_input = options.linear_path_input
        self._linear_path_args = (options.linear_path, options.decomposition_kernel,
                                  options.linear_path_trainable)
        self.linear_path: LinearPath | None = None  # built by `attach_linear_path`
        self.signed_maps = kit.signed_maps  # the backend's weights can be negative

    def attach_linear_path(self, head: nn.Linear) -> None:
        """Build the linear path (model.linear_path) and zero the model's output `head`, so
        that the Transformer starts at zero and learns what the linear path misses. Called
        last in a subclass's __init__: the draws of the layers made before it (and so a seed's
        weights) do not depend on whether there is a linear path."""
        kind, kernel, trainable = self._linear_path_args
        if kind == "none":
            return
        self.linear_path = LinearPath(kind, self.in_len, self.out_len, kernel)
        # Frozen, the path stays where it starts (e.g. its least-squares fit): Adam moves every
        # weight by about the learning rate a step whatever its gradient, which would walk a
        # fitted map of in_len x out_len weights away from its optimum within an epoch.
        self.linear_path.requires_grad_(trainable)
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)

    def _forecast(self, src: Tensor, tgt: Tensor | None, stats, side, need_weights: bool
                  ) -> tuple[Tensor, dict[str, list[Tensor | None]]]:
        """The family's own part: src [B, in_len, F'] (normalised; F' = 1 when channel
        independent) and tgt [B, out_len, T'] in the data's units (or None) -> (the head's
        output [B, out_len, T' * K] in normalised units (K = output.n_params, 1 for a point),
        each stack's per-layer weights when `need_weights`). `side`: what the model computed
        for its backend from the window, or None."""
        raise NotImplementedError

    def forward(
        self,
        src: Tensor,
        tgt: Tensor | None = None,
        return_attention: bool = False,
        distribution: bool = False,
    ) -> Tensor | tuple[Tensor, dict[str, list[Tensor]]]:
        """src [B, in_len, F] (tgt [B, out_len, T] for teacher forcing) -> [B, out_len, T]: the
        point forecast (a probabilistic model's median or mean).

        With `distribution`, the output's parameters instead, [B, out_len, T, K]
        (probabilistic/outputs.py: quantiles, or a distribution's parameters; K = 1: the point).
        With `return_attention`, also a dict of per-layer weights [B, H, Lq, Lk] by stack
        (`attention_stacks()`: `encoder`, and the encoder-decoder's `decoder_self` and
        `cross`; None for a mechanism without weights on its inputs).
        """
        if src.dim() != 3 or src.shape[1:] != (self.in_len, self.n_features):
            raise ValueError(
                f"src must be [batch, {self.in_len}, {self.n_features}], got {tuple(src.shape)}"
            )
        if self.channel_independent:
            batch = src.shape[0]
            src = _fold(src)
            tgt = _fold(tgt) if tgt is not None else None
        # What the backend reads from the window before its norm (de-stationary factors).
        side = None if self.side_name is None else getattr(self, self.side_name)(
            src[..., : src.shape[-1] - self.n_marks])
        normalized, stats = self._normalize(src)
        forecast, maps = self._forecast(normalized, tgt, stats, side, return_attention)
        if not self.output.probabilistic and not distribution:
            forecast = self._map_back(forecast, normalized, src, stats)
        else:
            # [B, out_len, T * K] -> [B, out_len, T, K], mapped back as an affine map of the
            # head's output per value: f -> a f + b (a = map(1) - map(0), b = map(0)).
            raw = forecast.unflatten(-1, (-1, self.output.n_params))
            zeros = raw.new_zeros(raw.shape[:-1])
            b = self._map_back(zeros, normalized, src, stats)
            a = self._map_back(zeros + 1.0, normalized, src, stats) - b
            forecast = self.output.map_back(self.output.constrain(raw), a, b)
            if self.channel_independent:
                forecast = _unfold_params(forecast, batch)
            if not distribution:
                forecast = self.output.point(forecast)
            return (forecast, maps) if return_attention else forecast
        if self.channel_independent:
            forecast = _unfold(forecast, batch)
        return (forecast, maps) if return_attention else forecast

    def _normalize_series(self, src: Tensor) -> tuple[Tensor, object]:
        """The instance norm of the series' channels, the static covariates and calendar
        features appended as they are: [B, L, F - k] normalised + [B, L, k]."""
        normalized, stats = self.norm.normalize(src[..., : -self.n_marks])
        return torch.cat([normalized, src[..., -self.n_marks :]], dim=-1), stats

    def _map_back(self, forecast: Tensor, normalized: Tensor, src: Tensor, stats) -> Tensor:
        """The head's forecast [B, out_len, T] in normalised units -> the model's units, with
        the linear path."""
        targets = forecast.shape[-1]
        if self.linear_path is None:
            return self.norm.denormalize_targets(forecast, stats)
        if self.linear_path_input == "normalized":  # one map back for both
            forecast = forecast + self.linear_path(normalized[..., :targets])
            return self.norm.denormalize_targets(forecast, stats)
        # raw: the path carries the level; the Transformer's part only the window's scale
        forecast = self.norm.denormalize_scale(forecast, stats)
        return forecast + self.linear_path(src[..., :targets])

    def encode(self, src: Tensor, side, need_weights: bool
                ) -> tuple[Tensor, list[Tensor | None]]:
        """src [B, in_len, F'] -> ([B, encoder_tokens, d_model], each layer's weights), tokens
        0..encoder_tokens-1 on the time axis. `side`: what the model computed for its backend
        from the window, or None."""
        x = self.input_encoding(self.src_embed(self.tokens.encoder_input(src)))
        call = AttentionCall(need_weights=need_weights, side=side,
                             residual=ResidualQK() if self.res_attention else None)
        maps = []
        for layer in self.encoder:
            x, attended = layer(x, call)
            call = call._replace(residual=attended.residual)  # the stack's q and k so far
            maps.append(attended.weights)
        return self.encoder_norm(x), maps

    @torch.no_grad()
    def fit_linear_path(self, src: Tensor, target: Tensor) -> None:
        """Least-squares fit of the linear path on training windows src [N, in_len, F],
        target [N, out_len, T]: a map of the units it reads (the instance-normalised window),
        minimising the error in the units the training loss measures (the data's scaled
        units; each window weighted by its normalisation's scale)."""
        if self.linear_path is None:
            raise ValueError("this model has no linear path (model.linear_path=none)")
        if self.channel_independent:
            src, target = _fold(src), _fold(target)
        n_targets = target.shape[2]
        if self.linear_path_input == "raw":  # NLinear's own fit, in the loss's units
            self.linear_path.fit_least_squares(src[..., :n_targets], target)
            return
        normalized, stats = self._normalize(src)
        self.linear_path.fit_least_squares(
            normalized[..., :n_targets],
            self.norm.normalize_targets(target, stats),
            self.norm.error_scale(stats, n_targets),
        )

    def attention_stacks(self) -> dict[str, list[nn.Module]]:
        """Each stack's attention modules, by the stack's name (maps, TensorBoard tags)."""
        return {ENCODER: [layer.self_attn for layer in self.encoder]}

    def map_spans(self, stack: str, q_tokens: int, k_tokens: int
                  ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The [first, last] time step of each query and key token of a map of `stack`
        (Lq = q_tokens, Lk = k_tokens): the labels of attention maps."""
        spans = self.tokens.encoder_spans()
        return spans[:q_tokens], spans[:k_tokens]


def _fold(x: Tensor) -> Tensor:
    """[B, L, C] -> [B * C, L, 1]: each channel its own series."""
    return x.transpose(1, 2).reshape(-1, x.shape[1], 1)


def _unfold(x: Tensor, batch: int) -> Tensor:
    """[B * C, L, 1] -> [B, L, C]."""
    return x.reshape(batch, -1, x.shape[1]).transpose(1, 2)


def _unfold_params(x: Tensor, batch: int) -> Tensor:
    """[B * C, L, 1, K] -> [B, L, C, K]: each channel's K output parameters per step."""
    return x.reshape(batch, -1, x.shape[1], x.shape[3]).transpose(1, 2)
