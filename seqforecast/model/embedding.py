"""Tokens: how a window of time steps becomes the sequence the Transformer reads (`embedding`).

- `point`: one token per time step (patch_len = stride = 1).
- `patch` (PatchTST, Nie et al. 2023): the input is cut into patches of `patch_len` steps,
  one every `stride` steps; each patch is one token. A 336-step input with 16/8 is 41 tokens
  (`embedding.padding=start`) or, as the published PatchTST pads, 42 (`padding=end`: the
  window's last value repeated `stride` times after it, so one more patch reaches past the
  end; the encoder-only model only, as the decoder's axis needs patches ending at in_len).

The encoder-decoder stays as it is. The decoder's tokens are non-overlapping chunks of
`stride` steps: the last `label_len` observed steps (label_len a multiple of stride), then
ceil(out_len / stride) output tokens, each projected to its `stride` steps; the steps past
out_len are cut off. Autoregressive decoding generates one chunk at a time.

One time axis, in units of `stride` steps. A token is placed by the step it ends on: encoder
token k ends `stride` steps after token k - 1, and the last one ends at the forecast start.
The input is padded on the left (its first value repeated) so that this holds for any in_len.
Decoder token j therefore sits at `encoder_tokens - label_len / stride + j`, and the position
encodings and the position terms inside attention count encoder and decoder on that axis.
With patch_len = stride = 1 all of this is the point model, bit for bit.

The `embedding` group picks one of these for a family whose tokens lie along time. A family
whose tokens are the channels (`model=itransformer`) uses `VariateTokens` instead: each input
channel's whole window (and each calendar feature's, `data.time_features`) one token, in no
order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

from ..options import refuse

EMBEDDINGS = ("point", "patch")
PADDINGS = ("start", "end")


def patch_shape(cfg: Mapping) -> tuple[int, int]:
    """(patch_len, stride) of a composed config; point tokens are patches of one step."""
    embedding = cfg["embedding"]
    if embedding["name"] == "point":
        return 1, 1
    return embedding["patch_len"], embedding["stride"]


def check_patches(patch_len: int, stride: int, in_len: int) -> None:
    """ConfigError in one line for patches that do not fit the window or skip a step."""
    if patch_len > in_len:
        raise refuse("embedding.patch_len", patch_len, f"must be in [1, data.in_len={in_len}]")
    if stride > patch_len:
        raise refuse("embedding.stride", stride,
                     f"must be in [1, embedding.patch_len={patch_len}] (no input step skipped)")


class Tokenizer:
    """Cuts windows into tokens and puts per-token outputs back as time steps."""

    def __init__(
        self,
        in_len: int,
        label_len: int,
        out_len: int,
        patch_len: int,
        stride: int,
        padding: str,
    ):
        check_patches(patch_len, stride, in_len)
        if label_len % stride:
            raise ValueError(f"label_len={label_len} must be a multiple of stride={stride}")
        self.in_len, self.label_len, self.out_len = in_len, label_len, out_len
        self.patch_len, self.stride = patch_len, stride
        self.padding = padding if not self.is_point else "start"
        if self.padding == "start":  # so that the last patch ends exactly at in_len
            self.pad = (-(in_len - patch_len)) % stride
        else:  # PatchTST's ReplicationPad1d((0, stride)): the last value, stride times
            self.pad = stride
        self.encoder_tokens = (in_len + self.pad - patch_len) // stride + 1
        self.label_tokens = label_len // stride
        self.output_tokens = math.ceil(out_len / stride)
        self.decoder_start = self.encoder_tokens - self.label_tokens  # on the token axis

    @property
    def is_point(self) -> bool:
        return self.patch_len == 1 and self.stride == 1

    def token_width(self, features: int) -> int:
        """Values in one encoder token: patch_len steps of every feature."""
        return self.patch_len * features

    def encoder_input(self, src: Tensor) -> Tensor:
        """src [B, in_len, F] -> [B, encoder_tokens, patch_len * F] (step-major in a token)."""
        if self.is_point:
            return src
        if self.padding == "end":
            src = torch.cat([src, src[:, -1:].expand(-1, self.pad, -1)], dim=1)
        elif self.pad:
            src = torch.cat([src[:, :1].expand(-1, self.pad, -1), src], dim=1)
        patches = src.unfold(1, self.patch_len, self.stride)  # [B, N, F, patch_len]
        return patches.transpose(2, 3).flatten(2)  # [B, N, patch_len * F]

    def chunk(self, values: Tensor) -> Tensor:
        """values [B, k * stride, T] -> [B, k, stride * T]: decoder tokens."""
        b, length, t = values.shape
        return values.reshape(b, length // self.stride, self.stride * t)

    def unchunk(self, tokens: Tensor) -> Tensor:
        """tokens [B, k, stride * T] -> [B, k * stride, T]: each token's steps in order."""
        b, k, width = tokens.shape
        return tokens.reshape(b, k * self.stride, width // self.stride)

    def encoder_spans(self) -> list[tuple[int, int]]:
        """[first, last] input step of each encoder token (padding counted as the step it
        repeats: 0 at the start, in_len - 1 at the end)."""
        shift = self.pad if self.padding == "start" else 0
        first = [k * self.stride - shift for k in range(self.encoder_tokens)]
        last = self.in_len - 1
        return [(min(max(f, 0), last), min(f + self.patch_len - 1, last)) for f in first]

    def decoder_spans(self, tokens: int) -> list[tuple[int, int]]:
        """[first, last] time step of each of the decoder's first `tokens` tokens."""
        start = self.in_len - self.label_len
        return [(start + j * self.stride, start + (j + 1) * self.stride - 1) for j in range(tokens)]


class VariateTokens:
    """A token per channel: a window [B, in_len, F] is F tokens, each channel's in_len
    values."""

    label_len = 0  # no decoder reads its steps

    def __init__(self, in_len: int, channels: int):
        self.in_len, self.encoder_tokens = in_len, channels

    def token_width(self, features: int) -> int:
        return self.in_len

    def encoder_input(self, src: Tensor) -> Tensor:
        return src.transpose(1, 2)  # [B, in_len, F] -> [B, F, in_len]

    def encoder_spans(self) -> list[tuple[int, int]]:
        """Every token reads the whole window."""
        return [(0, self.in_len - 1)] * self.encoder_tokens

    def decoder_spans(self, tokens: int) -> list[tuple[int, int]]:
        return []
