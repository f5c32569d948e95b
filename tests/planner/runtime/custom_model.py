"""A custom (not transformers) language model for the runtime tests, used as ``custom_model.py:build``.

Its own names everywhere (``tok``, ``stack``, ``attn.query/key/value/out``, ``ff.w_in/w_out``,
``ln_f``, ``proj``), a ReLU MLP and learned-free causal attention: the planner traces it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

HIDDEN, HEADS, FFN, VOCAB, LAYERS = 32, 4, 64, 128, 4


class SelfAttn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.out = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (lin(x).view(b, s, -1, HIDDEN // HEADS).transpose(1, 2) for lin in (self.query, self.key, self.value))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w_in, self.w_out = nn.Linear(HIDDEN, FFN), nn.Linear(FFN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_out(torch.relu(self.w_in(x)))


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.attn, self.ln2, self.ff = nn.LayerNorm(HIDDEN), SelfAttn(), nn.LayerNorm(HIDDEN), FeedForward()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ff(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HIDDEN)
        self.stack = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.proj = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok(tokens)
        for layer in self.stack:
            h = layer(h)
        return self.proj(self.ln_f(h))


def build() -> nn.Module:
    """The factory ``meshplan --model tests/planner/runtime/custom_model.py:build`` calls."""
    return TinyLM()
