"""Residual attention (RealFormer, He et al. 2020; on by default in PatchTST): every layer of
a stack adds the previous layer's pre-softmax scores to its own,

    scores_l = q_l k_l^T * scale + scores_(l-1)        (scores_0 = 0)

so layer l attends by sum_(i <= l) q_i k_i^T * scale. A score is a dot product, and a sum of
dot products is one dot product of the concatenations: per head,

    sum_i q_i k_i^T = [q_1 | ... | q_l] [k_1 | ... | k_l]^T      (concatenated along head_dim)

So a stack carries each layer's q and k (concatenated along the head width), not the
[B, H, Lq, Lk] scores, and a backend computes residual attention by attending with the carried
q and k at the layer's own scale, on any of its paths (explicit scores, block-local windows,
the native C kernel; torch's fused kernel could too, but runs q and k wider than v only on its
slow generic path, so residual calls do not take it). The function is exactly the
published one; gradients reach the earlier layers' q and k as they do through the carried
scores. What cannot be carried this way is anything added to or mixed into the scores
(relative position terms, talking heads): a backend built at a residual site refuses it in
its constructor, in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor


class ResidualQK(NamedTuple):
    """One stack's carried q and k, as the layers' pieces (per head, the last dim the head
    width): the C kernel (seqforecast/native/attention.py) reads the pieces where they lie, the
    other paths concatenate them (`joined`). Immutable: each layer's attention returns the
    stack's pieces including its own (`extended`), which the next layer receives; an empty one
    starts a stack."""

    q_pieces: tuple[Tensor, ...] = ()
    k_pieces: tuple[Tensor, ...] = ()

    def extended(self, q: Tensor, k: Tensor) -> ResidualQK:
        """These pieces and this layer's q [..., Lq, w] and k [..., Lk, w]."""
        if self.q_pieces:
            first_q, first_k = self.q_pieces[0], self.k_pieces[0]
            if first_q.shape[:-1] != q.shape[:-1] or first_k.shape[:-1] != k.shape[:-1]:
                raise ValueError(
                    f"residual attention carries scores between layers of one shape: "
                    f"q {tuple(first_q.shape[:-1])} then {tuple(q.shape[:-1])}"
                )
        return ResidualQK((*self.q_pieces, q), (*self.k_pieces, k))

    def joined(self) -> tuple[Tensor, Tensor]:
        """The stack's q and k so far, the pieces concatenated along the width:
        [..., Lq, w_1 + ... + w_l] and the same for k."""
        return concatenated(self.q_pieces), concatenated(self.k_pieces)


def concatenated(pieces: Sequence[Tensor]) -> Tensor:
    """Pieces along the width (the last dim) as one tensor; one piece as it is."""
    return pieces[0] if len(pieces) == 1 else torch.cat(list(pieces), dim=-1)
