"""Attention backends behind one call, built by name.

attn = build_attention("diff", d_model=64, n_heads=4, block_size=16)
out, weights = attn(query, key_value, causal=True, key_padding_mask=None, need_weights=True)
# query [B, Lq, E], key_value [B, Lk, E], key_padding_mask bool [B, Lk] (True = padding)
# out [B, Lq, E]; weights [B, H, Lq, Lk] or None
"""

# Importing the backend modules registers them.
from . import diff, einsum, vanilla  # noqa: F401
from .diff import DifferentialAttention
from .einsum import EinsumAttention
from .position import AttentionPosition, RelativePositionTerms, RotaryEmbedding
from .registry import attention_options, available_attention, build_attention, register_attention
from .residual import ResidualScores, carries_residual
from .vanilla import VanillaAttention

__all__ = [
    "AttentionPosition",
    "RotaryEmbedding",
    "DifferentialAttention",
    "EinsumAttention",
    "RelativePositionTerms",
    "ResidualScores",
    "VanillaAttention",
    "attention_options",
    "available_attention",
    "build_attention",
    "carries_residual",
    "register_attention",
]
