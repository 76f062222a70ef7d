"""The encoder-only forecaster with a flatten head, PatchTST's design (Nie et al. 2023, "A Time
Series is Worth 64 Words"): src [B, in_len, F] -> forecast [B, out_len, T] (`model=encoder`;
the published PatchTST is this model with `experiment=patchtst`'s options).

The encoder reads the window's tokens (patches with `embedding=patch`), and a flatten head
maps every token's output at once to the whole horizon: the encoder's output [B, N, d_model]
is flattened to [B, N * d_model] and projected to out_len steps per target channel. There is
no decoder: nothing is generated step by step and no placeholder tokens are learned; each
horizon step reads every input token through one linear map.

Everything before the head (instance normalisation, tokens, positions, the encoder with any
attention backend and FFN) and after it (the linear path, channel independence) is shared
with the encoder-decoder (forecaster.py). PatchTST's own setting is channel independence
(each channel its own window: `model.channel_independent=true`, or a wide CSV panel whose
columns are independent series), RevIN, patches 16/8 and BatchNorm (`model.norm=batch`).
"""

from __future__ import annotations

from torch import Tensor, nn

from .embedding import VariateTokens
from .forecaster import WindowForecaster


class EncoderForecaster(WindowForecaster):
    def __init__(self, *, d_model: int, head_dropout: float, **shared):
        """`shared`: WindowForecaster's arguments (n_features, in_len, encoder layers, ...);
        there is no decoder, so label_len is 0."""
        super().__init__(d_model=d_model, label_len=0, **shared)
        self.head_dropout = nn.Dropout(head_dropout)
        if isinstance(self.tokens, VariateTokens):
            # each target channel's token -> its horizon (K values a step for a probabilistic
            # output): one map shared by the channels, as iTransformer's projector
            self.head = nn.Linear(d_model, self.out_len * self.output.n_params)
            self._read_out = self._per_variate
        else:
            # [B, N * d_model] -> every step of the horizon, for every target channel (K
            # values each for a probabilistic output: inner_outputs = T * K)
            self.head = nn.Linear(
                self.tokens.encoder_tokens * d_model, self.out_len * self.inner_outputs
            )
            self._read_out = self._flattened
        self._attach_linear_path(self.head)

    def _forecast(
        self, src: Tensor, tgt: Tensor | None, stats, maps: dict, need_weights: bool,
        factors=None,
    ) -> Tensor:
        memory = self._encode(src, maps, need_weights, factors)  # [B, N, d_model]
        return self._read_out(self.head_dropout(memory))  # [B, out_len, T * K]

    def _flattened(self, memory: Tensor) -> Tensor:
        flat = memory.flatten(1)  # [B, N * d_model]
        return self.head(flat).view(len(memory), self.out_len, self.inner_outputs)

    def _per_variate(self, memory: Tensor) -> Tensor:
        # the target channels' tokens, the first T: [B, T, d_model] -> [B, T, out_len * K]
        out = self.head(memory[:, : self.inner_targets])
        out = out.unflatten(-1, (self.out_len, self.output.n_params))  # [B, T, out_len, K]
        return out.transpose(1, 2).flatten(2)  # [B, out_len, T * K]
