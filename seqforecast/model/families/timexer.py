"""TimeXer (Wang et al., NeurIPS 2024, "TimeXer: Empowering Transformers for Time Series
Forecasting with Exogenous Variables"; thuml/TimeXer): `model=timexer`.

Each target series is cut into non-overlapping patches (`embedding=patch` with stride =
patch_len; a linear map of each patch without a bias, a sinusoidal position per patch) and given
one learned global token of its own. Every other input series (the exogenous ones), and each
calendar feature, is one token: its whole input window through one linear map, as iTransformer's.
Each layer (post-norm):

    x  = norm1(x + self-attention over the target's patches and its global token)  [time axis]
    g  = norm2(g + cross-attention from the global tokens to the exogenous tokens) [variate axis]
    x  = norm3(x + FFN(x))                      (g: x's last token, put back before the FFN)

then a norm after the stack and a flatten head over the patches and the global token, shared by
the target series. The instance norm is the published one (each window's mean and standard
deviation, no affine). Its two attention stacks: `encoder` (time: patches + the global token)
and `exogenous` (the window's global tokens over the exogenous tokens, across channels).

Which series are exogenous (`model.exogenous`): `others`, the input channels not forecast
(the published `features=MS`: one target, the rest exogenous); `all`, every series channel,
the targets too (the published `features=M`: every channel a target, each also an exogenous
token for the others); `auto`, `all` when every series channel is a target, else `others`.
Official checkpoints load (seqforecast/published/timexer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ...attention import TIME, VARIATE, AttentionCall, Site, repeat_side
from ...options import ConfigError, choice, option, positive, probability
from ..embedding import Tokenizer, patch_shape
from ..forecaster import ENCODER, WindowForecaster
from ..kit import Kit
from ..options import AttentionInit, InstanceNorm, ModelOptions, Norm
from .registry import register_family

EXOGENOUS = "exogenous"  # its cross-attention stack's name
Exogenous = choice("Exogenous", ("auto", "others", "all"))


@dataclass
class TimexerOptions(ModelOptions):
    """`model=timexer`; the defaults are the published model's (its ETTh1-96 script's)."""

    encoder_layers: int = option(1, positive)
    dropout: float = option(0.1, probability)  # residual branches, the embeddings, the head
    norm: Norm = Norm.layer  # post-norm LayerNorm in all three sublayers, and after the stack
    norm_first: bool = False
    instance_norm: InstanceNorm = InstanceNorm.revin  # use_norm: the window's mean and std
    revin_affine: bool = False
    head_dropout: float = option(0.1, probability)  # on the head's output (the published
    # model: = dropout)
    attention_init: AttentionInit = AttentionInit.linear  # nn.Linear's own, as the published
    exogenous: Exogenous = Exogenous.auto  # the series read as exogenous tokens: others (MS) |
    # all (M: the targets too) | auto (all when every series is a target)
    official_weights: str | None = None  # an official TimeXer checkpoint.pth to start from


def exogenous_channels(options: TimexerOptions, series: int, targets: int) -> int:
    """How many series channels are exogenous tokens (calendar features aside)."""
    return series if reads_targets(options, series, targets) else series - targets


def reads_targets(options: TimexerOptions, series: int, targets: int) -> bool:
    """Whether the targets are exogenous tokens too (`M`) or only the other series (`MS`)."""
    if str(options.exogenous) == "auto":
        return targets == series
    return str(options.exogenous) == "all"


class TimexerLayer(nn.Module):
    """Self-attention over a series' patches and its global token, cross-attention from the
    window's global tokens to the exogenous tokens, the FFN; each post-norm."""

    def __init__(self, self_attn: nn.Module, cross_attn: nn.Module, ffn: nn.Module,
                 kit: Kit, dropout: float, norm: str):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.self_residual = kit.residual(dropout, False, norm)
        self.cross_residual = kit.residual(dropout, False, norm)
        self.ffn_residual = kit.residual(dropout, False, norm)

    def forward(self, x: Tensor, exogenous: Tensor, own_call, cross_call):
        """x [B * T, N + 1, d] (each target series' patches, then its global token), exogenous
        [B, X, d] -> (x, what each attention gave back)."""
        attended = []
        windows = exogenous.shape[0]

        def attend_self(h: Tensor) -> Tensor:
            attended.append(self.self_attn.attend(h, h, own_call))
            return attended[-1].out

        def attend_exogenous(g: Tensor) -> Tensor:
            # [B * T, 1, d] -> [B, T, d]: a window's global tokens are one call's queries
            answer = self.cross_attn.attend(g.reshape(windows, -1, g.shape[-1]), exogenous,
                                            cross_call)
            attended.append(answer)
            return answer.out.reshape(g.shape)

        x = self.self_residual(x, attend_self)
        global_tokens = self.cross_residual(x[:, -1:], attend_exogenous)
        x = torch.cat([x[:, :-1], global_tokens], dim=1)
        return self.ffn_residual(x, self.ffn), attended[0], attended[1]


def _tokenizer(options: TimexerOptions, kit: Kit) -> Tokenizer:
    """Its target's non-overlapping patches; ConfigError in one line for what it cannot read."""
    cfg = kit.cfg
    patch_len, stride = patch_shape(cfg)
    in_len = kit.in_len
    if stride != patch_len:
        raise ConfigError(f"embedding.stride={stride} conflicts with model=timexer: its "
                          f"patches do not overlap; set embedding.stride={patch_len}")
    if in_len % patch_len:
        # the divisors of in_len nearest the patch length asked for
        nearest = sorted((n for n in range(2, in_len) if in_len % n == 0),
                         key=lambda n: abs(n - patch_len))[:3] or [in_len]
        near = sorted(nearest)
        raise ConfigError(
            f"data.in_len={in_len} conflicts with embedding.patch_len={patch_len}: "
            f"model=timexer cuts the window into whole patches (the published code drops the "
            f"last {in_len % patch_len} steps unread); set embedding.patch_len and "
            f"embedding.stride to a divisor of {in_len} ("
            + (f"{', '.join(map(str, near[:-1]))} or " if len(near) > 1 else "")
            + f"{near[-1]}: embedding.patch_len={nearest[0]} embedding.stride={nearest[0]}), or "
            f"make data.in_len a multiple of {patch_len}")
    if kit.positions.places == "attention":
        raise ConfigError(f"model=timexer conflicts with pos_encoding={kit.positions.name}: its "
                          f"global token has no time step; use sinusoidal, learned or none")
    if options.channel_independent:
        raise ConfigError("model=timexer conflicts with model.channel_independent=true: its "
                          "exogenous tokens are the other channels")
    return Tokenizer(in_len, 0, kit.out_len, patch_len, stride, "start")


@register_family("timexer", TimexerOptions)
class Timexer(WindowForecaster):
    def __init__(self, options: TimexerOptions, kit: Kit):
        tokens = _tokenizer(options, kit)
        series = kit.n_features - kit.n_marks
        targets_too = reads_targets(options, series, kit.n_targets)
        # the exogenous tokens: those series, then the static covariates' and the calendar's
        exogenous = exogenous_channels(options, series, kit.n_targets) + kit.n_marks
        if exogenous < 1:
            raise ConfigError("model=timexer has no exogenous token to read: give the data "
                              "covariates (data.features), calendar features "
                              "(data.time_features=true) or model.exogenous=all")
        patches = tokens.encoder_tokens + 1  # and the global token
        own = Site(ENCODER, TIME, patches, patches, options.encoder_layers)
        cross = Site(EXOGENOUS, VARIATE, kit.n_targets, exogenous, options.encoder_layers,
                     cross=True, window_keys=False)
        linear = options.attention_init == "linear"
        layers = [TimexerLayer(kit.attention(own, i, linear), kit.attention(cross, i, linear),
                               kit.ffn(), kit, options.dropout, options.norm)
                  for i in range(1, options.encoder_layers + 1)]
        super().__init__(options, kit, tokens=tokens, encoder_layers=layers,
                         input_encoding=kit.input_encoding(tokens.encoder_tokens,
                                                           "the target's patches"),
                         final_norm=True,
                         src_embed=nn.Linear(tokens.patch_len, options.d_model, bias=False),
                         window_tokens=own.k_len)
        self.reads_targets = targets_too
        d_model = options.d_model
        self.global_tokens = nn.Parameter(torch.randn(self.inner_targets, d_model))
        self.embedding_dropout = kit.dropout(options.dropout)
        self.exogenous_embed = nn.Linear(self.in_len, d_model)
        self.head_dropout = kit.dropout(options.head_dropout)
        self.head = nn.Linear((tokens.encoder_tokens + 1) * d_model,
                              self.out_len * self.output.n_params)
        self.attach_linear_path(self.head)

    def _forecast(self, src, tgt, stats, side, need_weights):
        batch, targets = src.shape[0], self.inner_targets
        # Each target series alone: [B, L, T] -> [B * T, L, 1] -> patches [B * T, N, P]
        series = src[..., :targets].transpose(1, 2).reshape(batch * targets, -1, 1)
        patches = self.input_encoding(self.src_embed(self.tokens.encoder_input(series)))
        global_tokens = self.global_tokens.expand(batch, -1, -1).reshape(batch * targets, 1, -1)
        x = self.embedding_dropout(torch.cat([patches, global_tokens], dim=1))  # [B*T, N+1, d]
        # The exogenous series' windows, then the calendar features': [B, L, X] -> [B, X, d]
        exogenous = src if self.reads_targets else src[..., targets:]
        exogenous = self.embedding_dropout(self.exogenous_embed(exogenous.transpose(1, 2)))
        # the self-attention's batch holds a row per target series of each window
        own = AttentionCall(need_weights=need_weights, side=repeat_side(side, targets))
        cross = AttentionCall(need_weights=need_weights, side=side)
        maps = {ENCODER: [], EXOGENOUS: []}
        for layer in self.encoder:
            x, own_attended, cross_attended = layer(x, exogenous, own, cross)
            maps[ENCODER].append(own_attended.weights)
            maps[EXOGENOUS].append(cross_attended.weights)
        x = self.encoder_norm(x).flatten(1)  # [B * T, (N + 1) * d]
        # the published head drops its output, not its input: [B, T, out_len, K]
        out = self.head_dropout(self.head(x)).view(batch, targets, self.out_len, -1)
        return out.transpose(1, 2).flatten(2), maps  # [B, out_len, T * K]

    def attention_stacks(self) -> dict[str, list[nn.Module]]:
        return {ENCODER: [layer.self_attn for layer in self.encoder],
                EXOGENOUS: [layer.cross_attn for layer in self.encoder]}

    def map_spans(self, stack, q_tokens, k_tokens):
        window = (0, self.in_len - 1)  # the global token and each exogenous token read it all
        if stack == ENCODER:
            spans = [*self.tokens.encoder_spans(), window]
            return spans[:q_tokens], spans[:k_tokens]
        return [window] * q_tokens, [window] * k_tokens
