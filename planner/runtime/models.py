"""The torch module a plan's model names: presets built from their ModelSpec, HF configs, factories.

Presets have no code of their own, only a :class:`~costmodel.specs.ModelSpec`; :class:`DecoderLM`
builds the decoder it describes (the GPT-3 / Llama layout of Radford et al. 2019 and Touvron et al.
2023): token embedding (plus a learned position table when the spec has one), pre-norm blocks of
causal SDPA attention (``torch.nn.functional.scaled_dot_product_attention``, rotary positions
after Su et al. 2021 when there is no position table) and a GELU or SwiGLU MLP, a final norm and a
Linear head (tied to the embedding when the spec says so), without dropout (runs are deterministic,
so that plans can be compared step for step). Its parameter count equals
``costmodel.params.layer_params`` summed over the spec's layers, which :mod:`planner.runtime.layers`
checks. A Hugging Face ``config.json`` is built by ``transformers`` (:func:`planner.intake.trace.load.hf_model`)
and a factory is called (:func:`planner.intake.trace.load.load_factory`). Everything is built on ``meta``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer, TransformerLayer
from planner.errors import InputError
from planner.runtime.attention import causal_attention


def _norm(kind: str, hidden: int) -> nn.Module:
    return nn.LayerNorm(hidden) if kind == "layernorm" else nn.RMSNorm(hidden, eps=1e-5)


class Embedding(nn.Module):
    """Token table plus an optional learned position table, one unit (one plan layer)."""

    def __init__(self, vocab: int, hidden: int, positions: int) -> None:
        super().__init__()
        self.token_weight = nn.Parameter(torch.empty(vocab, hidden))
        self.position_weight = nn.Parameter(torch.empty(positions, hidden)) if positions else None
        self.cp_shard = (1, 0)
        """(cp, cp rank): the runtime sets it under context parallelism so positions follow their tokens."""
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.token_weight, std=0.02)
        if self.position_weight is not None:
            nn.init.normal_(self.position_weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = F.embedding(tokens, self.token_weight)
        if self.position_weight is not None:
            if self.cp_shard[0] == 1:  # a slice (a DTensor table under TP takes no tensor index)
                h = h + self.position_weight[: tokens.shape[1]]
            else:
                h = h + self.position_weight[_positions(tokens.shape[1], self.cp_shard, tokens.device)]
        return h


def _positions(length: int, cp_shard: tuple[int, int], device: torch.device) -> torch.Tensor:
    """Global positions of ``length`` local tokens: this rank's chunks under context parallelism
    (``cp_shard`` = (cp, cp rank), :func:`planner.runtime.context_parallel.local_positions`)."""
    from planner.runtime.context_parallel import local_positions

    return local_positions(length, *cp_shard, device)


def _rotate(x: torch.Tensor, inv_freq: torch.Tensor, cp_shard: tuple[int, int] = (1, 0)) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021, RoFormer eq. 34, half-split layout as in Llama)."""
    pos = _positions(x.shape[-2], cp_shard, x.device).float()
    freqs = torch.outer(pos, inv_freq.float())
    cos, sin = torch.cat((freqs, freqs), -1).cos().to(x.dtype), torch.cat((freqs, freqs), -1).sin().to(x.dtype)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * cos + torch.cat((-x2, x1), -1) * sin


class Attention(nn.Module):
    """Causal self-attention with separate Q, K, V and output projections (GQA when kv < heads)."""

    def __init__(self, spec: TransformerLayer, rotary: bool) -> None:
        super().__init__()
        h, d = spec.hidden_size, spec.head_dim
        self.head_dim, self.group = d, spec.num_heads // spec.num_kv_heads
        self.q_proj = nn.Linear(h, spec.num_heads * d, bias=spec.qkv_bias)
        self.k_proj = nn.Linear(h, spec.num_kv_heads * d, bias=spec.qkv_bias)
        self.v_proj = nn.Linear(h, spec.num_kv_heads * d, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(spec.num_heads * d, h, bias=spec.out_bias)
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)) if rotary else None
        self.register_buffer("inv_freq", inv, persistent=False)
        self.cp_shard = (1, 0)
        """(cp, cp rank): the runtime sets it under context parallelism so rotary angles follow their tokens."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        if self.inv_freq is not None:
            q, k = _rotate(q, self.inv_freq, self.cp_shard), _rotate(k, self.inv_freq, self.cp_shard)
        k, v = k.repeat_interleave(self.group, 1), v.repeat_interleave(self.group, 1)
        out = causal_attention(q, k, v)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class Mlp(nn.Module):
    """GELU MLP (two matrices) or SwiGLU (gate, up, down; Shazeer 2020)."""

    def __init__(self, spec: TransformerLayer) -> None:
        super().__init__()
        h, f, bias = spec.hidden_size, spec.ffn_hidden_size, spec.mlp_bias
        self.gated = spec.ffn_act == "swiglu"
        self.gate_proj = nn.Linear(h, f, bias=bias) if self.gated else None
        self.up_proj = nn.Linear(h, f, bias=bias)
        self.down_proj = nn.Linear(f, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = self.up_proj(x)
        act = F.silu(self.gate_proj(x)) * up if self.gate_proj is not None else F.gelu(up)
        return self.down_proj(act)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, spec: TransformerLayer, rotary: bool) -> None:
        super().__init__()
        self.attn_norm = _norm(spec.norm, spec.hidden_size)
        self.self_attn = Attention(spec, rotary)
        self.mlp_norm = _norm(spec.norm, spec.hidden_size)
        self.mlp = Mlp(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class DecoderLM(nn.Module):
    """A decoder language model built from a ModelSpec (see the module docstring)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        emb, *blocks, norm, head = spec.layers
        if not (isinstance(emb, EmbeddingLayer) and isinstance(norm, NormLayer) and isinstance(head, HeadLayer)):
            raise InputError(f"model {spec.name!r} is not embedding, blocks, norm, head; the runtime builds decoder LMs only")
        for b in blocks:
            if not isinstance(b, TransformerLayer) or b.is_moe or b.cross_attention or b.sliding_window:
                raise InputError(f"model {spec.name!r} has {getattr(b, 'name', b)} blocks the runtime cannot build "
                                 "(dense causal self-attention only); pass a config.json or a factory instead")
        if emb.norm is not None:
            raise InputError(f"model {spec.name!r} normalises its embedding (BLOOM); the runtime builder does not")
        self.embed = Embedding(emb.vocab_size, emb.hidden_size, emb.max_positions)
        self.layers = nn.ModuleList([Block(b, rotary=emb.max_positions == 0) for b in blocks])
        self.norm = _norm(norm.norm, norm.hidden_size)
        self.head = nn.Linear(head.hidden_size, head.vocab_size, bias=False)
        if spec.tied_embeddings:
            self.head.weight = self.embed.token_weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for block in self.layers:
            h = block(h)
        return self.head(self.norm(h))


def build_model(arg: Any, trace: bool = False, device: str | torch.device = "meta") -> nn.Module:
    """The torch module of ``--model`` (a preset, a config.json path, a factory, or a ModelSpec).

    On ``meta`` by default; on a real device the module is initialised as its own code does (call
    ``torch.manual_seed`` first for reproducible weights).
    """
    if isinstance(arg, ModelSpec):
        with torch.device(device):
            return DecoderLM(arg)
    text = str(arg)
    if text.endswith(".json"):
        from planner.intake.trace.load import hf_model

        meta = hf_model(text)[0]
        if torch.device(device).type == "meta":
            return meta
        with torch.device(device):
            return type(meta)._from_config(meta.config, attn_implementation="sdpa")
    from planner.intake.models import _FACTORY, resolve_model  # the intake's own pattern for factories

    if _FACTORY.match(text):
        return _factory(text, device)
    spec = resolve_model(text)
    with torch.device(device):
        return DecoderLM(spec)


def _factory(text: str, device: str | torch.device) -> nn.Module:
    from planner.intake.trace.load import _import_target, load_factory, unpack_factory_result

    if torch.device(device).type == "meta":
        return load_factory(text)[0]
    target, _, attr = text.rpartition(":")
    factory = getattr(_import_target(target, text), attr, None)
    if not callable(factory):
        raise InputError(f"{target} has no callable {attr!r} (from {text!r}); name a function returning an nn.Module")
    with torch.device(device):
        result = factory()
    module = result[0] if isinstance(result, tuple) else result
    unpack_factory_result(result, text)  # the same checks as on meta
    return module
