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
- Multi-head latent attention (DeepSeek-V2/V3): :func:`mla_params`.
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
    "mla_params",
    "qk_norm_params",
    "mla_replicated_params",
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
    on Q/K/V and ``h`` on the output projection. Multi-head latent attention: :func:`mla_params`.
    """
    h = layer.hidden_size
    if layer.is_mla:
        one = mla_params(layer)
    else:
        weights = h * layer.q_width + h * (layer.k_width + layer.v_width) + layer.o_width * h
        qkv_bias = layer.q_width + layer.k_width + layer.v_width if layer.qkv_bias else 0
        one = weights + qkv_bias + (h if layer.out_bias else 0)
    return 2 * one if layer.cross_attention else one  # a decoder's cross-attention has its own Q, K, V, O


def mla_replicated_params(layer: TransformerLayer) -> int:
    """MLA parameters every TP rank holds whole: the query and key/value down-projections
    ``W^DQ`` (h x d_c') and ``[W^DKV; W^KR]`` (h x (d_c + d_h^R)) with their biases, and the two
    latent RMSNorms (Megatron-core ``multi_latent_attention.py``: ``linear_q_down_proj`` and
    ``linear_kv_down_proj`` are ``parallel_mode='duplicated'``; HF ``modeling_deepseek_v3.py``
    ``q_a_proj`` / ``kv_a_proj_with_mqa`` carry ``attention_bias``). 0 for a non-MLA block."""
    if not layer.is_mla:
        return 0
    h, qr, kvr = layer.hidden_size, layer.q_lora_rank or 0, layer.kv_lora_rank
    kv_down = (h + int(layer.qkv_bias)) * (kvr + layer.qk_rope_head_dim)
    q_down = (h + int(layer.qkv_bias)) * qr + norm_params(layer.norm, qr) if qr else 0
    return q_down + kv_down + norm_params(layer.norm, kvr)


def mla_params(layer: TransformerLayer) -> int:
    """One multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 §2.1.2 eqs. 9-19; DeepSeek-V3
    arXiv:2412.19437 §2.1.1; HF ``modeling_deepseek_v3.py::DeepseekV3Attention``): the replicated
    down-projections and latent norms (:func:`mla_replicated_params`), the query up-projection
    ``W^UQ; W^QR`` (d_c' x a·(d_h + d_h^R)) or, without a query latent, ``W^Q`` (h x a·(d_h + d_h^R)),
    the key/value up-projection ``W^UK; W^UV`` (d_c x a·(d_h + d_v)) and the output projection
    ``W^O`` (a·d_v x h, bias with ``out_bias``). DeepSeek-V3: 187,107,328 per block."""
    h, a = layer.hidden_size, layer.num_heads
    q_in = layer.q_lora_rank or h
    up = q_in * layer.q_width + layer.kv_lora_rank * a * (layer.qk_nope_head_dim + layer.v_head_dim)
    return mla_replicated_params(layer) + up + layer.o_width * h + (h if layer.out_bias else 0)


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
    return attention_params(layer) + mlp + norms + qk_norm_params(layer)


def qk_norm_params(layer: TransformerLayer) -> int:
    """Per-head query and key norms (HF ``modeling_qwen3.py``: ``q_norm`` and ``k_norm`` are
    ``RMSNorm(head_dim)``), shared by every head and so replicated under TP; 0 without them."""
    return 2 * norm_params(layer.norm, layer.head_dim) if layer.qk_norm else 0


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
