"""Counting an attention's (query, key) pairs, for the FLOP formulas (model/flops.py and each
backend's `core_flops`).

`pairs` says which pairs count:

- `seen` (what the layer computes as a function): every key a query attends: all of them
  without a mask, itself and the ones before under a causal mask, only its block window with a
  block size (block_local.py: the previous, own and, when not causal, next block; causal, up to
  itself).
- `computed`: the pairs an explicit (unfused) implementation multiplies, masked ones included:
  Lq x Lk for dense attention, every padded window position for block windows. This is what
  torch's `FlopCounterMode` sees on the explicit paths, which tests check the formulas against.
"""

from __future__ import annotations


def block_pairs(length: int, block_size: int, causal: bool, pairs: str = "seen") -> int:
    """Pairs of block-local self-attention over `length` tokens (block_local.py's windows:
    query block n sees blocks n - 1, n and, not causal, n + 1)."""
    blocks = -(-length // block_size)
    if pairs == "computed":  # every padded window position
        return blocks * block_size * (2 if causal else 3) * block_size
    total = 0
    for i in range(length):
        first = max(0, (i // block_size - 1) * block_size)
        last = i + 1 if causal else min(length, (i // block_size + 2) * block_size)
        total += last - first
    return total


def attention_pairs(
    q_len: int, k_len: int, causal: bool, block_size: int = 0, pairs: str = "seen"
) -> int:
    """(query, key) pairs one head multiplies for self- (q_len == k_len) or cross-attention."""
    if block_size > 0:
        return block_pairs(q_len, block_size, causal, pairs)
    if pairs == "computed" or not causal:
        return q_len * k_len
    return q_len * (q_len + 1) // 2  # causal self-attention: itself and every key before
