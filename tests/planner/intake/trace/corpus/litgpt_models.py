"""Re-implements litgpt's GPT and LLaMA-MoE models: written in our own words from the published description (paper, docs,
module names), no code copied.

Lightning-AI/litgpt ``litgpt/model.py``, re-implemented with its module names and layout (litgpt
pins its own torch and lightning, so it is not installed beside torch 2.13): ``transformer``
ModuleDict (wte, h, ln_f), ``Block`` (norm_1, attn, norm_2, mlp), ``CausalSelfAttention`` with one
fused ``qkv`` Linear over GQA query groups and ``proj``, ``LLaMAMLP`` (fc_1, fc_2, proj),
``LLaMAMoE`` (gate, experts) routing with ``torch.topk`` and a ``torch.where`` loop, RMSNorm, rotary
cos/sin caches as buffers, an untied ``lm_head``. Sizes read from a ``Config`` object, so no module
carries ``top_k`` or head-count attributes of its own."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    n_embd: int
    n_layer: int
    n_head: int
    n_query_groups: int
    intermediate_size: int
    padded_vocab_size: int
    block_size: int = 4096
    n_expert: int = 0
    n_expert_per_token: int = 0
    bias: bool = False
    norm_eps: float = 1e-5

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)
        return x * torch.rsqrt(norm_x + self.eps) * self.weight


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    head_size = x.size(-1)
    x1, x2 = x[..., : head_size // 2], x[..., head_size // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return (x * cos) + (rotated * sin)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        shape = (config.n_head + 2 * config.n_query_groups) * config.head_size
        self.qkv = nn.Linear(config.n_embd, shape, bias=config.bias)
        self.proj = nn.Linear(config.head_size * config.n_head, config.n_embd, bias=config.bias)
        self.config = config

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        c = self.config
        B, T, _ = x.size()
        q_size, kv_size = c.n_head * c.head_size, c.n_query_groups * c.head_size
        q, k, v = self.qkv(x).split((q_size, kv_size, kv_size), dim=-1)
        q = q.view(B, T, c.n_head, c.head_size).transpose(1, 2)
        k = k.view(B, T, c.n_query_groups, c.head_size).transpose(1, 2)
        v = v.view(B, T, c.n_query_groups, c.head_size).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if c.n_query_groups != c.n_head:
            k = k.repeat_interleave(c.n_head // c.n_query_groups, dim=1)
            v = v.repeat_interleave(c.n_head // c.n_query_groups, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, c.head_size * c.n_head))


class LLaMAMLP(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.fc_1 = nn.Linear(config.n_embd, config.intermediate_size, bias=config.bias)
        self.fc_2 = nn.Linear(config.n_embd, config.intermediate_size, bias=config.bias)
        self.proj = nn.Linear(config.intermediate_size, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(self.fc_1(x)) * self.fc_2(x))


class LLaMAMoE(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.gate = nn.Linear(config.n_embd, config.n_expert, bias=False)
        self.experts = nn.ModuleList(LLaMAMLP(config) for _ in range(config.n_expert))
        self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        x = x.view(-1, C)
        router = self.gate(x)
        probs, indices = torch.topk(router, self.config.n_expert_per_token)
        probs = probs.softmax(dim=1, dtype=torch.float).to(dtype=x.dtype)
        masks = indices.unsqueeze(-1) == torch.arange(self.config.n_expert, device=x.device)
        masks = masks.permute(2, 0, 1)
        y = torch.zeros_like(x)
        for mask, expert in zip(masks, self.experts):
            token_idx, expert_idx = torch.where(mask)
            y[token_idx] += probs[token_idx, expert_idx, None] * expert(x[token_idx])
        return y.view(B, T, C)


class Block(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.norm_1 = RMSNorm(config.n_embd, config.norm_eps)
        self.attn = CausalSelfAttention(config)
        self.norm_2 = RMSNorm(config.n_embd, config.norm_eps)
        self.mlp = LLaMAMoE(config) if config.n_expert else LLaMAMLP(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm_1(x), cos, sin)
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=False)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
            h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
            ln_f=RMSNorm(config.n_embd, config.norm_eps),
        ))
        inv = 1.0 / (10000 ** (torch.arange(0, config.head_size, 2).float() / config.head_size))
        angles = torch.outer(torch.arange(config.block_size).float(), inv).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x, cos, sin)
        return self.lm_head(self.transformer.ln_f(x))


LLAMA2_7B = Config(n_embd=4096, n_layer=32, n_head=32, n_query_groups=32, intermediate_size=11008,
                   padded_vocab_size=32000, block_size=4096)
"""litgpt/config.py ``Llama-2-7b-hf``."""
MIXTRAL_8X7B = Config(n_embd=4096, n_layer=32, n_head=32, n_query_groups=8, intermediate_size=14336,
                      padded_vocab_size=32000, block_size=32768, n_expert=8, n_expert_per_token=2)
"""litgpt/config.py ``Mixtral-8x7B-v0.1``."""


def litgpt_llama() -> nn.Module:
    return GPT(LLAMA2_7B)


def litgpt_llama_small() -> nn.Module:
    return GPT(Config(n_embd=64, n_layer=2, n_head=4, n_query_groups=4, intermediate_size=176,
                      padded_vocab_size=512, block_size=256))


def litgpt_mixtral() -> nn.Module:
    return GPT(MIXTRAL_8X7B)


def litgpt_mixtral_small() -> nn.Module:
    return GPT(Config(n_embd=64, n_layer=2, n_head=8, n_query_groups=2, intermediate_size=224,
                      padded_vocab_size=512, block_size=256, n_expert=8, n_expert_per_token=2))
