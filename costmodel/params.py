"""Parameter counts per layer and per model, from the layer specs alone (pure functions).

The cost model (memory, FLOPs) and the planner (model summaries, tests) share these counts.

Sources:
- Megatron-LM ``megatron/training/theoretical_memory_usage.py::compute_weight_and_optimizer_memory``:
  attention ``2·h·h_q·(1 + g)`` for Q, K, V, O with grouped-query attention (``h_q = a·d_head``,
  ``g = kv_heads / heads``); MLP ``2·h·f`` per expert, times 3/2 when gated (SwiGLU); two norms per
  block; embedding ``h·V``, doubled when the output head is untied.
- Narayanan et al. 2021 (arXiv:2104.04473) eq. 2, ``P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h))``,
  which adds the bias terms the Megatron formula leaves out (13·h per block: QKV 3h, out-proj h,
  MLP 4h + h, two LayerNorms 4h) and a learned position table ``s·h``.
- Mixture of experts (Hugging Face ``MixtralSparseMoeBlock``): a bias-free router ``h·E`` plus ``E``
  experts; an always-on shared expert adds one more MLP of its own width. Active parameters count
  the router, the shared expert and only ``top_k`` routed experts.

Norms: LayerNorm holds a weight and a bias (``2·h``), RMSNorm a weight only (``h``).
A tied output head holds no parameters (it reuses the embedding table).
"""

from __future__ import annotations

from costmodel.specs import (
    EmbeddingLayer,
    GenericLayer,
    HeadLayer,
    Layer,
    ModelSpec,
    NormKind,
    NormLayer,
    TransformerLayer,
)

__all__ = [
    "norm_params",
    "attention_params",
    "mlp_params",
    "expert_params",
    "layer_params",
    "layer_active_params",
    "count_params",
    "count_active_params",
]


def norm_params(norm: NormKind, hidden_size: int) -> int:
    """Parameters of one normalisation over ``hidden_size``: LayerNorm weight + bias, RMSNorm weight."""
    return 2 * hidden_size if norm == "layernorm" else hidden_size


def attention_params(layer: TransformerLayer) -> int:
    """Q, K, V and output projections (GQA-aware) with their biases where flagged.

    Megatron ``theoretical_memory_usage.py``: ``2·h·h_q·(1 + kv/a)`` weights; biases ``h_q + 2·kv·d``
    on Q/K/V and ``h`` on the output projection.
    """
    h = layer.hidden_size
    q_width = layer.num_heads * layer.head_dim
    kv_width = layer.num_kv_heads * layer.head_dim
    weights = h * q_width + 2 * h * kv_width + q_width * h
    qkv_bias = q_width + 2 * kv_width if layer.qkv_bias else 0
    out_bias = h if layer.out_bias else 0
    one = weights + qkv_bias + out_bias
    return 2 * one if layer.cross_attention else one  # a decoder's cross-attention has its own Q, K, V, O


def mlp_params(hidden_size: int, ffn_hidden_size: int, gated: bool, bias: bool) -> int:
    """One MLP (or one expert): ``2·h·f`` weights, ``3·h·f`` when gated (SwiGLU: gate, up, down).

    Biases (where flagged) are ``f`` per input projection and ``h`` on the output projection.
    """
    in_projections = 2 if gated else 1
    weights = (in_projections + 1) * hidden_size * ffn_hidden_size
    biases = in_projections * ffn_hidden_size + hidden_size if bias else 0
    return weights + biases


def expert_params(layer: TransformerLayer) -> int:
    """Parameters of the routed experts of a block (what expert parallelism shards); 0 for dense."""
    if not layer.is_moe:
        return 0
    one = mlp_params(layer.hidden_size, layer.ffn_hidden_size, layer.ffn_act == "swiglu", layer.mlp_bias)
    return layer.num_experts * one


def _block_params(layer: TransformerLayer, routed_experts: int) -> int:
    """A block counting ``routed_experts`` of its experts (all of them for total, top-k for active)."""
    h = layer.hidden_size
    gated = layer.ffn_act == "swiglu"
    expert = mlp_params(h, layer.ffn_hidden_size, gated, layer.mlp_bias)
    if layer.is_moe:
        mlp = h * layer.num_experts + routed_experts * expert  # router h·E + experts
    else:
        mlp = expert
    if layer.is_moe and layer.shared_expert_ffn_hidden_size:
        mlp += mlp_params(h, layer.shared_expert_ffn_hidden_size, gated, layer.mlp_bias)
    norms = (3 if layer.cross_attention else 2) * norm_params(layer.norm, h)  # pre-attention (x2 with cross-attention), pre-MLP
    return attention_params(layer) + mlp + norms


def layer_params(layer: Layer) -> int:
    """Parameters held by one layer (all experts counted; a tied head holds 0)."""
    if isinstance(layer, TransformerLayer):
        return _block_params(layer, layer.num_experts)
    if isinstance(layer, EmbeddingLayer):
        table = (layer.vocab_size + layer.max_positions) * layer.hidden_size
        norm = norm_params(layer.norm, layer.hidden_size) if layer.norm else 0
        return table + norm
    if isinstance(layer, NormLayer):
        return norm_params(layer.norm, layer.hidden_size)
    if isinstance(layer, HeadLayer):
        if layer.tied:
            return 0
        return layer.vocab_size * layer.hidden_size + (layer.vocab_size if layer.bias else 0)
    if isinstance(layer, GenericLayer):
        return layer.params
    raise TypeError(f"unknown layer kind {type(layer).__name__}")


def layer_active_params(layer: Layer) -> int:
    """Parameters one token touches in a layer: only ``moe_top_k`` routed experts of an MoE block."""
    if isinstance(layer, TransformerLayer) and layer.is_moe:
        return _block_params(layer, layer.moe_top_k)
    return layer_params(layer)


def count_params(spec: ModelSpec) -> int:
    """Total parameters of a model (every expert; the tied head counted once, in the embedding)."""
    return sum(layer_params(layer) for layer in spec.layers)


def count_active_params(spec: ModelSpec) -> int:
    """Parameters active per token (top-k routed experts only); equals :func:`count_params` if dense."""
    return sum(layer_active_params(layer) for layer in spec.layers)
