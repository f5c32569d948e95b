"""A model reduced to what serving costs read: per distinct block, the parameters each GPU holds
and streams, the KV cache bytes each token leaves, and the FLOPs each token costs.

Identical blocks are grouped (a preset repeats one block), so one estimate costs a few dozen
arithmetic operations whatever the depth; the search prices thousands of deployments this way.
Counts come from ``costmodel.params`` and ``costmodel.flops``, the training model's own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from costmodel.flops import attention_core_width, transformer_fwd_flops
from costmodel.params import (
    attention_params,
    expert_params,
    layer_params,
    mla_replicated_params,
    norm_params,
    qk_norm_params,
)
from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, TransformerLayer


@dataclass(frozen=True)
class BlockShape:
    """One kind of transformer block and how many of them the model has."""

    layer: TransformerLayer
    count: int
    attention_params: int
    """Q/K/V/O (or MLA) parameters, norms included."""
    replicated_attention_params: int
    """The part of ``attention_params`` every TP rank holds whole (MLA down-projections, norms)."""
    dense_params: int
    """Dense MLP, shared expert and router parameters (TP-split; always streamed)."""
    expert_params_each: int
    """Parameters of one routed expert (0 for a dense block)."""

    @property
    def kv_elements_per_token(self) -> int:
        """Key and value elements one token stores in this block: 2·n_kv·d_head for MHA/GQA/MQA
        (Pope et al., "Efficiently Scaling Transformer Inference", MLSys'23, §2.1), the compressed
        latent d_c + d_h^R for MLA (DeepSeek-V2 arXiv:2405.04434 §2.1.2, Table 1: 576 for V3)."""
        block = self.layer
        if block.is_mla:
            return block.kv_lora_rank + block.qk_rope_head_dim
        return block.num_kv_heads * (block.head_dim + (block.v_head_dim or block.head_dim))

    @property
    def window(self) -> int | None:
        """Tokens a sequence keeps in this block's cache: the sliding window (Mistral) or the
        attention chunk (Llama 4); None for full attention."""
        return self.layer.sliding_window or self.layer.attention_chunk


@dataclass(frozen=True)
class ModelShape:
    """The serving view of a :class:`~costmodel.specs.ModelSpec`."""

    name: str
    blocks: tuple[BlockShape, ...]
    embedding_params: int
    head_params: int
    hidden_size: int
    vocab_size: int

    @property
    def num_layers(self) -> int:
        return sum(b.count for b in self.blocks)

    @property
    def is_moe(self) -> bool:
        return any(b.layer.is_moe for b in self.blocks)

    @property
    def min_heads(self) -> int:
        """Fewest attention heads of any block (TP must divide it)."""
        return min(b.layer.num_heads for b in self.blocks)

    @property
    def num_experts(self) -> int:
        return max((b.layer.num_experts for b in self.blocks), default=0)


def _block_shape(layer: TransformerLayer, count: int) -> BlockShape:
    h = layer.hidden_size
    norms = 2 * norm_params(layer.norm, h) + qk_norm_params(layer)
    total = layer_params(layer)
    routed = expert_params(layer)
    attn = attention_params(layer) + norms
    dense = total - routed - attn  # dense MLP, or router and shared expert
    each = routed // layer.num_experts if layer.is_moe else 0
    return BlockShape(layer=layer, count=count, attention_params=attn,
                      replicated_attention_params=mla_replicated_params(layer) + norms,
                      dense_params=dense,
                      expert_params_each=each)


def model_shape(spec: ModelSpec) -> ModelShape:
    """Group the model's transformer blocks by identity and total its embedding and head."""
    counts: Counter[TransformerLayer] = Counter(l for l in spec.layers if isinstance(l, TransformerLayer))
    if not counts:
        raise ValueError(f"model {spec.name} has no transformer blocks to serve")
    blocks = tuple(_block_shape(layer, n) for layer, n in counts.items())
    embed = sum(layer_params(l) for l in spec.layers if isinstance(l, EmbeddingLayer))
    heads = [l for l in spec.layers if isinstance(l, HeadLayer)]
    head = sum(layer_params(l) for l in heads)
    vocab = heads[0].vocab_size if heads else 0
    return ModelShape(name=spec.name, blocks=blocks, embedding_params=embed, head_params=head,
                      hidden_size=blocks[0].layer.hidden_size, vocab_size=vocab)


def block_forward_flops(block: BlockShape, tokens: float, context: float) -> tuple[float, float]:
    """(GEMM FLOPs, attention-core FLOPs) of one block for ``tokens`` new tokens whose queries see
    ``context`` keys on average (``costmodel.flops.transformer_fwd_flops``, causal fraction 1: the
    caller passes the mean context itself)."""
    flops = transformer_fwd_flops(block.layer, tokens, max(1, round(context)), causal_fraction=1.0)
    core = flops.pop("attn_core")
    window = block.window
    if window is not None and context > window:
        core = 2.0 * tokens * window * attention_core_width(block.layer)
    return sum(flops.values()), core


def dense_gemm_flops(block: BlockShape, tokens: float) -> float:
    """GEMM FLOPs of one block for ``tokens`` tokens without the routed experts (attention
    projections, dense MLP or shared expert, router), ``costmodel.flops.transformer_fwd_flops``."""
    flops = transformer_fwd_flops(block.layer, tokens, 1, causal_fraction=1.0)
    flops.pop("attn_core")
    flops.pop("experts", None)
    return sum(flops.values())


def decode_core_width(block: BlockShape) -> int:
    """Per-token, per-key FLOP width / 2 of the decode attention core. MHA / GQA: ``QKᵀ`` and ``PV``
    over the heads' widths (:func:`costmodel.flops.attention_core_width`). MLA decodes in the
    absorbed form, scoring the (d_c + d_h^R)-wide latent and summing the d_c-wide latent per head
    (DeepSeek-V2 arXiv:2405.04434 §2.1.2 "absorb W^UK into W^Q"; deepseek-ai/FlashMLA runs exactly
    this: 576-wide keys, 512-wide values, 128 heads). gpt-oss's attention sinks add one logit per
    head and query (openai/gpt-oss ``model.py`` ``sdpa``), nothing per key."""
    layer = block.layer
    if layer.is_mla:
        return layer.num_heads * (2 * layer.kv_lora_rank + layer.qk_rope_head_dim)
    return attention_core_width(layer)
