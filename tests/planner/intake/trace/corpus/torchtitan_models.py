"""Re-implements torchtitan's Llama 3 and MoE models: written in our own words from the published description (paper, docs,
module names), no code copied.

pytorch/torchtitan ``torchtitan/models/llama3/model/model.py`` and its MoE layer
(``torchtitan/models/moe.py``), re-implemented with their module names and layout: ``Attention``
(wq, wk, wv, wo), ``FeedForward`` (w1, w2, w3), ``TransformerBlock`` (attention_norm, attention,
ffn_norm, feed_forward | moe), ``layers`` as a ModuleDict keyed by strings, ``freqs_cis`` rotary
buffer, ``tok_embeddings`` / ``norm`` / ``output``. The MoE layer holds ``GroupedExperts`` as 3-D
parameters (w1, w2, w3 with the expert count first), a ``TokenChoiceTopKRouter`` (``gate``) that
counts tokens per expert with ``torch.histc``, and runs the experts in a loop over
``num_tokens_per_expert.tolist()`` splits (torchtitan's ``_run_experts_for_loop``), plus a shared
expert."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 8
    vocab_size: int = 128256
    ffn_dim: int = 14336
    max_seq_len: int = 8192
    rope_theta: float = 500000.0
    moe_experts: int = 0
    moe_top_k: int = 0
    moe_dim: int = 0
    shared_experts: int = 0


def precompute_freqs_cis(dim: int, end: int, theta: float) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.stack((freqs.cos(), freqs.sin()), dim=-1)  # real (cos, sin) pairs: meta has no complex


def apply_rotary_emb(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    x_ = x.float().reshape(*x.shape[:-1], -1, 2)
    cos, sin = freqs[..., 0].view(1, x.shape[1], 1, -1), freqs[..., 1].view(1, x.shape[1], 1, -1)
    out = torch.stack((x_[..., 0] * cos - x_[..., 1] * sin, x_[..., 0] * sin + x_[..., 1] * cos), dim=-1)
    return out.flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads = args.n_heads, args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        bs, seqlen, _ = x.shape
        xq = self.wq(x).view(bs, seqlen, -1, self.head_dim)
        xk = self.wk(x).view(bs, seqlen, -1, self.head_dim)
        xv = self.wv(x).view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, freqs_cis), apply_rotary_emb(xk, freqs_cis)
        rep = self.n_heads // self.n_kv_heads
        keys = torch.repeat_interleave(xk, rep, dim=2)
        values = torch.repeat_interleave(xv, rep, dim=2)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                             is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class GroupedExperts(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, num_experts: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))

    def forward(self, x: torch.Tensor, num_tokens_per_expert: torch.Tensor) -> torch.Tensor:
        splits = torch.split(x[: int(num_tokens_per_expert.sum().item())], num_tokens_per_expert.tolist(), dim=0)
        out = []
        for i, xs in enumerate(splits):
            h = F.silu(torch.matmul(xs, self.w1[i].transpose(-2, -1))) * torch.matmul(xs, self.w3[i].transpose(-2, -1))
            out.append(torch.matmul(h, self.w2[i].transpose(-2, -1)))
        return torch.cat(out, dim=0)


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts, self.top_k = num_experts, top_k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scores = torch.sigmoid(self.gate(x).to(torch.float32))
        top_scores, selected = torch.topk(scores, k=self.top_k, dim=1)
        counts = torch.histc(selected.view(-1).float(), bins=self.num_experts, min=0, max=self.num_experts)
        return top_scores, selected, counts


class MoE(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.experts = GroupedExperts(args.dim, args.moe_dim, args.moe_experts)
        self.router = TokenChoiceTopKRouter(args.dim, args.moe_experts, args.moe_top_k)
        self.shared_experts = FeedForward(args.dim, args.moe_dim * args.shared_experts) if args.shared_experts else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected, counts = self.router(x)
        order = torch.argsort(selected.view(-1), stable=True)
        routed = x[order // self.router.top_k] * top_scores.view(-1)[order].unsqueeze(-1).to(x.dtype)
        out = self.experts(routed, counts.long())
        combined = torch.zeros_like(x).index_add_(0, order // self.router.top_k, out)
        if self.shared_experts is not None:
            combined = combined + self.shared_experts(x)
        return combined.view(bs, slen, dim)


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention = Attention(args)
        self.attention_norm = nn.RMSNorm(args.dim, eps=1e-5)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=1e-5)
        if args.moe_experts:
            self.moe = MoE(args)
        else:
            self.feed_forward = FeedForward(args.dim, args.ffn_dim)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        mlp = self.moe if hasattr(self, "moe") else self.feed_forward
        return h + mlp(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.register_buffer("freqs_cis", precompute_freqs_cis(args.dim // args.n_heads, args.max_seq_len * 2,
                                                               args.rope_theta), persistent=False)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(args) for i in range(args.n_layers)})
        self.norm = nn.RMSNorm(args.dim, eps=1e-5)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        freqs = self.freqs_cis[: tokens.shape[1]]
        for layer in self.layers.values():
            h = layer(h, freqs)
        return self.output(self.norm(h))


def titan_llama3() -> nn.Module:
    """torchtitan's ``llama3`` flavour ``8B`` (model/args.py: dim 4096, 32 layers, 32 heads, 8 KV heads,
    ffn 14336 after its multiple_of rounding, vocab 128256)."""
    return Transformer(ModelArgs())


def titan_llama3_small() -> nn.Module:
    return Transformer(ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512, ffn_dim=160,
                                 max_seq_len=128))


def titan_moe() -> nn.Module:
    """A torchtitan MoE Llama (its ``llama4``-style MoE layer on Llama 3 8B attention: 16 experts of
    width 8192, top-1, one shared expert)."""
    return Transformer(ModelArgs(n_layers=16, moe_experts=16, moe_top_k=1, moe_dim=8192, shared_experts=1))


def titan_moe_small() -> nn.Module:
    return Transformer(ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512, max_seq_len=128,
                                 moe_experts=8, moe_top_k=2, moe_dim=48, shared_experts=1))
