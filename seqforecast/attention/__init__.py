"""Attention backends behind one call, built by name.

attn = build_attention("diff", d_model=64, n_heads=4, block_size=16)
out, weights = attn(query, key_value, causal=True, key_padding_mask=None, need_weights=True)
# query [B, Lq, E], key_value [B, Lk, E], key_padding_mask bool [B, Lk] (True = padding)
# out [B, Lq, E]; weights [B, H, Lq, Lk] or None
"""

import importlib
import pkgutil

from ..plugins import load_plugins
from .base import AttentionOptions
from .core import Attended, Attention, AttentionCall, repeat_side
from .diff import DifferentialAttention, DiffOptions
from .einsum import EinsumAttention
from .kernels import Kernel, KernelFacts, kernel_names, register_kernel
from .position import AttentionPosition, RelativePositionTerms, RotaryEmbedding
from .registry import (
    attention_schema,
    available_attention,
    build_attention,
    register_attention,
    takes_position,
)
from .residual import ResidualQK
from .site import TIME, VARIATE, Site
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
    "attention_schema",
    "available_attention",
    "build_attention",
    "register_attention",
    "takes_position",
    "Site",
    "TIME",
    "VARIATE",
]

# Importing a backend's or a kernel's module registers it: every module of this folder (a new
# backend is its module and its YAML, nothing else; a kernel its module) but the private ones
# (`_name.py`: helpers that register nothing, imported where used: the Triton programs only on
# their first launch), then those other packages declare under the entry-point groups
# `seqforecast.attention` and `seqforecast.kernels` (docs/extending.md).
for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
load_plugins("seqforecast.attention")
load_plugins("seqforecast.kernels")
