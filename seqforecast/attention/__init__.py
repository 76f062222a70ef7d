"""Attention backends behind one call, built by name.

attn = build_attention("diff", d_model=64, n_heads=4, block_size=16)
out, weights = attn(query, key_value, causal=True, key_padding_mask=None, need_weights=True)
# query [B, Lq, E], key_value [B, Lk, E], key_padding_mask bool [B, Lk] (True = padding)
# out [B, Lq, E]; weights [B, H, Lq, Lk] or None
"""

import importlib
import pkgutil
from importlib.metadata import entry_points

from .base import AttentionOptions
from .core import Attended, Attention, AttentionCall, repeat_side
from .diff import DifferentialAttention, DiffOptions
from .einsum import EinsumAttention
from .kernels import Kernel, KernelFacts, kernel_names, register_kernel
from .position import AttentionPosition, RelativePositionTerms, RotaryEmbedding
from .registry import (
    attention_context,
    attention_schema,
    available_attention,
    build_attention,
    register_attention,
)
from .residual import ResidualQK, carries_residual
from .vanilla import VanillaAttention

__all__ = [
    "Attended",
    "Attention",
    "AttentionCall",
    "AttentionPosition",
    "Kernel",
    "KernelFacts",
    "kernel_names",
    "register_kernel",
    "repeat_side",
    "RotaryEmbedding",
    "DifferentialAttention",
    "EinsumAttention",
    "RelativePositionTerms",
    "ResidualQK",
    "VanillaAttention",
    "AttentionOptions",
    "DiffOptions",
    "attention_context",
    "attention_schema",
    "available_attention",
    "build_attention",
    "carries_residual",
    "register_attention",
]

# Importing a backend's module registers it: every module of this folder (a new backend is its
# module and its YAML, nothing else) but the private ones (`_name.py`: helpers that register
# nothing, imported where used: the Triton programs only on their first launch), then those
# other packages declare under the entry-point group `seqforecast.attention`
# (docs/extending.md).
for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
for _plugin in entry_points(group="seqforecast.attention"):
    _plugin.load()
