"""Position-wise feed-forward block, optionally gated.

plain:  down(dropout(act(up(x))))
gated:  down(dropout(act(up(x)) * gate(x)))      GLU (sigmoid), GEGLU (gelu), SwiGLU (silu)
"""

from __future__ import annotations

from torch import Tensor, nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
}


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, *, activation: str, gated: bool, bias: bool,
                 bias_gate: bool, dropout: float | nn.Module):
        """The options are the ffn group's (config/schema.py's FFNConfig); `dropout`, on the
        hidden layer: a rate, or the module its kernel set built (parts.py)."""
        super().__init__()
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias_gate) if gated else None
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = ACTIVATIONS[activation]()
        self.activation_name = activation
        self.dropout = dropout if isinstance(dropout, nn.Module) else nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.activation(self.up(x))
        if self.gate is not None:
            hidden = hidden * self.gate(x)
        return self.down(self.dropout(hidden))
