"""What every forecaster shares: src [B, in_len, F] -> forecast [B, out_len, T].

A window is read the same way by every model (`model` group): checked for shape, folded
channel by channel with `channel_independent`, normalised per window (`instance_norm`), cut
into tokens (`embedding`) and embedded, positioned (`pos_encoding`), and passed through the
encoder stack. What a model does after the encoder is its own (`_forecast`): the
encoder-decoder's decoder (transformer.py) or the encoder-only flatten head (encoder.py). The
forecast then gets the optional linear path (linear_path.py), is mapped back from the window's
normalisation and unfolded. The linear path reads (`model.linear_path_input`):

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

from ..attention import ResidualQK
from ..probabilistic.outputs import PointOutput
from .destationary import DestationaryFactors, Factors
from .embedding import Tokenizer, VariateTokens
from .layers import EncoderLayer, make_norm
from .linear_path import LinearPath
from .normalization import build_instance_norm


class WindowForecaster(nn.Module):
    def __init__(
        self,
        *,
        n_features: int,
        n_targets: int = 1,
        d_model: int,
        in_len: int,
        out_len: int,
        label_len: int,
        instance_norm: str,
        encoder_layers: list[EncoderLayer],
        input_encoding: nn.Module,
        norm_first: bool,
        patch_len: int,
        stride: int,
        linear_path: str,
        decomposition_kernel: int,
        channel_independent: bool,
        norm: str,
        linear_path_input: str,
        linear_path_trainable: bool,
        padding: str,
        res_attention: bool,
        revin_affine: bool,
        output: PointOutput,
        variate_tokens: bool = False,
        n_marks: int = 0,
        final_norm: bool | None = None,
        destationary_hidden: list[int] | None = None,
    ):
        """The options are the model group's (config/schema.py), passed by the builder;
        `n_features` and `n_targets` are the data's (targets first, then covariates, then
        `n_marks` calendar features, which no instance norm touches). `variate_tokens`: one
        token per channel (embedding=variate) instead of tokens along time. `final_norm`: a
        norm after the encoder stack (None: after a pre-norm stack only, as nn.Transformer).
        `destationary_hidden`: the de-stationary factors' MLP widths (attention=destationary),
        or None: no factors."""
        super().__init__()
        if not 1 <= n_targets <= n_features:
            raise ValueError(f"n_targets={n_targets} must be in [1, n_features={n_features}]")
        self.n_features = n_features
        self.n_targets = n_targets
        self.channel_independent = channel_independent
        # Inside the model, a channel-independent window is one channel. [B * C, L, 1]
        inner_features, inner_targets = (1, 1) if channel_independent else (n_features, n_targets)
        self.inner_targets = inner_targets
        # What the model forecasts per step and target (the `loss` group): its head gives
        # output.n_params values for each (1: a point).
        self.output = output
        self.inner_outputs = inner_targets * self.output.n_params
        self.in_len = in_len
        self.out_len = out_len
        self.label_len = label_len
        self.instance_norm = instance_norm
        self.n_marks = n_marks
        self.norm = build_instance_norm(instance_norm, inner_features - n_marks, revin_affine)
        # The instance norm reads the series' channels; calendar features pass as they are.
        self._normalize = self.norm.normalize if n_marks == 0 else self._normalize_series
        self.tokens = (VariateTokens(in_len, inner_features) if variate_tokens else
                       Tokenizer(in_len, label_len, out_len, patch_len, stride, padding))
        # Residual attention (residual.py): each encoder layer adds the previous one's scores.
        self.res_attention = res_attention
        self.src_embed = nn.Linear(self.tokens.token_width(inner_features), d_model)
        self.input_encoding = input_encoding
        self.encoder = nn.ModuleList(encoder_layers)
        self.destationary = None if destationary_hidden is None else DestationaryFactors(
            inner_features - n_marks, in_len, self.tokens.encoder_tokens, destationary_hidden)
        # Pre-norm stacks end un-normalised; close the stack with a norm (as nn.Transformer).
        final_norm = norm_first if final_norm is None else final_norm
        self.encoder_norm = make_norm(norm, d_model) if final_norm else nn.Identity()
        self.linear_path_input = linear_path_input
        self._linear_path_args = (linear_path, decomposition_kernel, linear_path_trainable)
        self.linear_path: LinearPath | None = None  # built by `_attach_linear_path`

    def _attach_linear_path(self, head: nn.Linear) -> None:
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

    def _forecast(
        self, src: Tensor, tgt: Tensor | None, stats, maps: dict, need_weights: bool
    ) -> Tensor:
        """The model's own part: src [B, in_len, F'] (normalised; F' = 1 when channel
        independent) and tgt [B, out_len, T'] in the data's units (or None) -> the head's output
        [B, out_len, T' * K] in normalised units (K = output.n_params, 1 for a point).
        Attention weights go into `maps`."""
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
        With `return_attention`, also a dict of per-layer weights [B, H, Lq, Lk]:
        `encoder`, `decoder_self`, `cross` (empty lists where a model has no such stack).
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
        # De-stationary factors (attention=destationary) read the window before its norm.
        factors = None if self.destationary is None else self.destationary(
            src[..., : src.shape[-1] - self.n_marks])
        normalized, stats = self._normalize(src)
        forecast = self._forecast(normalized, tgt, stats, maps, return_attention, factors)
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
        """The instance norm of the series' channels, the calendar features appended as they
        are: [B, L, F - k] normalised + [B, L, k]."""
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

    def _encode(self, src: Tensor, maps: dict, need_weights: bool,
                factors: Factors | None = None) -> Tensor:
        """src [B, in_len, F'] -> [B, encoder_tokens, d_model], tokens 0..encoder_tokens-1 on
        the time axis. `factors`: de-stationary attention's, or None."""
        x = self.input_encoding(self.src_embed(self.tokens.encoder_input(src)))
        carry = {"residual": ResidualQK()} if self.res_attention else {}
        if factors is not None:
            carry["factors"] = factors
        for layer in self.encoder:
            x, weights = layer(x, need_weights=need_weights, start=0, **carry)
            maps["encoder"].append(weights)
        return self.encoder_norm(x)

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

    def token_spans(self, decoder_tokens: int) -> tuple[list, list]:
        """([first, last] step of each encoder token, the same for the decoder's first
        `decoder_tokens` tokens): the labels of attention maps."""
        return self.tokens.encoder_spans(), self.tokens.decoder_spans(decoder_tokens)


def _fold(x: Tensor) -> Tensor:
    """[B, L, C] -> [B * C, L, 1]: each channel its own series."""
    return x.transpose(1, 2).reshape(-1, x.shape[1], 1)


def _unfold(x: Tensor, batch: int) -> Tensor:
    """[B * C, L, 1] -> [B, L, C]."""
    return x.reshape(batch, -1, x.shape[1]).transpose(1, 2)


def _unfold_params(x: Tensor, batch: int) -> Tensor:
    """[B * C, L, 1, K] -> [B, L, C, K]: each channel's K output parameters per step."""
    return x.reshape(batch, -1, x.shape[1], x.shape[3]).transpose(1, 2)
