"""The block-local layout, for all blocks at once (no Python loop over blocks).

A sequence of length L is cut into nb = ceil(L / bs) query blocks. Query block n, positions
[n*bs, (n+1)*bs), sees the keys of its previous, own and next block: the window
[(n-1)*bs, (n+2)*bs) of 3*bs positions. Under a causal mask the next block is entirely in the
future, so causal callers pass `lookahead=0` and get the 2*bs window [(n-1)*bs, (n+1)*bs):
the same result for a third less work. The keys are zero-padded (bs before, the ragged tail and
the lookahead after) and unfolded with stride bs, so every window is a view and the score tensor
is [..., nb, bs, width]: linear in L. Window positions outside [0, L) are masked by the caller.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def num_blocks(length: int, block_size: int) -> int:
    return -(-length // block_size)


def window_width(block_size: int, lookahead: int) -> int:
    """Keys per window: the previous block, the own block and `lookahead` blocks after it."""
    return (2 + lookahead) * block_size


def query_blocks(x: Tensor, block_size: int) -> Tensor:
    """[..., L, D] -> [..., nb, bs, D], zero-padded at the end."""
    length = x.shape[-2]
    nb = num_blocks(length, block_size)
    x = F.pad(x, (0, 0, 0, nb * block_size - length))
    return x.unflatten(-2, (nb, block_size))


def _unfold_windows(x: Tensor, block_size: int, lookahead: int) -> Tensor:
    """[..., L, D] -> [..., nb, D, width]: zero-pad the length axis, then stride-bs windows."""
    length = x.shape[-2]
    tail = num_blocks(length, block_size) * block_size - length
    padded = F.pad(x, (0, 0, block_size, tail + lookahead * block_size))
    return padded.unfold(-2, window_width(block_size, lookahead), block_size)


def key_windows_transposed(x: Tensor, block_size: int, lookahead: int) -> Tensor:
    """[..., L, D] -> [..., nb, D, width], ready for `query_blocks(q) @ ...` (a strided view)."""
    return _unfold_windows(x, block_size, lookahead)


def key_windows(x: Tensor, block_size: int, lookahead: int) -> Tensor:
    """[..., L, D] -> [..., nb, width, D] (a strided view)."""
    return _unfold_windows(x, block_size, lookahead).transpose(-1, -2)


def mask_windows(mask: Tensor, block_size: int, lookahead: int) -> Tensor:
    """Bool [B, L] -> [B, nb, width]. Window positions outside the sequence read False: the
    layout's own mask (`window_positions`) covers them."""
    windows = _unfold_windows(mask[..., None].to(torch.uint8), block_size, lookahead)
    return windows[..., 0, :].bool()


def window_positions(
    length: int, block_size: int, lookahead: int, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Absolute positions of queries [nb, bs, 1] and window keys [nb, 1, width].

    Key positions may fall outside [0, L): the caller masks them.
    """
    nb = num_blocks(length, block_size)
    width = window_width(block_size, lookahead)
    q_pos = torch.arange(nb * block_size, device=device).view(nb, block_size, 1)
    starts = torch.arange(nb, device=device)[:, None] * block_size - block_size
    k_pos = (starts + torch.arange(width, device=device)).view(nb, 1, width)
    return q_pos, k_pos


def outside_windows(length: int, block_size: int, lookahead: int, device: torch.device) -> Tensor:
    """The layout as a dense mask: bool [L, L], True where key j is outside query i's window
    (for paths that compute every score and mask the rest)."""
    block_start = torch.arange(length, device=device)[:, None] // block_size * block_size
    keys = torch.arange(length, device=device)[None, :]
    return (keys < block_start - block_size) | (
        keys >= block_start + (1 + lookahead) * block_size
    )


def blocks_to_sequence(x: Tensor, length: int) -> Tensor:
    """[..., nb, bs, D] -> [..., L, D], dropping the padded tail."""
    return x.flatten(-3, -2)[..., :length, :]


def windows_to_dense(weights: Tensor, length: int) -> Tensor:
    """[..., nb, bs, width] window weights -> dense [..., L, L] map, zero outside the windows."""
    nb, bs, width = weights.shape[-3:]
    # Column of each window entry on the key axis left-padded by bs: n*bs + c.
    cols = torch.arange(nb, device=weights.device)[:, None] * bs + torch.arange(
        width, device=weights.device
    )
    cols = cols[:, None, :].expand(weights.shape)
    dense = weights.new_zeros(*weights.shape[:-1], (nb + 2) * bs).scatter(-1, cols, weights)
    dense = dense.flatten(-3, -2)  # [..., nb * bs, (nb + 2) * bs]
    return dense[..., :length, bs : bs + length]
