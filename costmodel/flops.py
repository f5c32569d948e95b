"""Parameter counts and FLOPs of each layer kind.

FLOP convention, stated once for all of meshplan: a matmul (m x k)(k x n) costs 2mkn FLOPs; the
backward pass costs twice the forward; **model FLOPs count causal self-attention as half of the
s x s work** (what a causal FlashAttention kernel executes; MaxText's MFU accounting, PR #1988).
``CAUSAL_ATTENTION_FRACTION`` is that half. Megatron's ``num_floating_point_operations`` counts the
full s x s work; ``bench/fidelity.py`` converts published figures with each source's own formula.
"""

from __future__ import annotations

from costmodel.specs import GenericLayer, HeadLayer, Layer, TransformerLayer

CAUSAL_ATTENTION_FRACTION = 0.5
"""Share of the s x s attention work a causal mask leaves (model-FLOP convention, see module doc)."""


def ffn_matrices(layer: TransformerLayer) -> int:
    """Weight matrices in one MLP: 3 for gated (SwiGLU: gate, up, down), else 2."""
    return 3 if layer.ffn_act == "swiglu" else 2


def attention_context(layer: TransformerLayer, seq_len: float, causal_fraction: float) -> float:
    """Average keys each query attends to: s·fraction for causal, the window for sliding attention;
    chunked attention (Llama 4, transformers ``modeling_llama4.py`` chunked mask: queries see keys of
    their own ``attention_chunk`` tokens) averages c·fraction over the whole chunks and r·fraction
    over the last r = s mod c tokens."""
    share = causal_fraction if layer.causal else 1.0
    if layer.sliding_window is not None and layer.sliding_window < seq_len:
        return float(layer.sliding_window)
    chunk = layer.attention_chunk
    if chunk is not None and chunk < seq_len:
        whole, rest = divmod(seq_len, chunk)
        return share * (whole * chunk * chunk + rest * rest) / seq_len
    return seq_len * share


def attention_core_width(layer: TransformerLayer) -> int:
    """Per-token, per-key width of the attention core: ``QKᵀ`` over ``a·d_qk`` plus ``PV`` over
    ``a·d_v`` (2·a·d for MHA; MLA's 192-wide query/key and 128-wide value heads in DeepSeek-V3,
    Megatron-LM ``training.py::num_floating_point_operations``, ``multi_latent_attention`` branch)."""
    return layer.q_width + layer.o_width


def mla_projection_flops(layer: TransformerLayer, tokens: float) -> dict[str, float]:
    """Forward FLOPs of MLA's input projections (DeepSeek-V2 arXiv:2405.04434 §2.1.2 eqs. 9-15;
    Megatron-LM ``training.py::num_floating_point_operations``, MLA ``q_term`` and kv terms, norms
    left out): the replicated down-projections (``q_down``, ``kv_down``: h to d_c' and to
    d_c + d_h^R) and the TP-split up-projections (``q_up`` from d_c', or ``q`` from h without a
    query latent; ``kv_up``: d_c to a·(d_h + d_v))."""
    h, a = layer.hidden_size, layer.num_heads
    out = {"kv_down": 2.0 * tokens * h * (layer.kv_lora_rank + layer.qk_rope_head_dim),
           "kv_up": 2.0 * tokens * layer.kv_lora_rank * a * (layer.qk_nope_head_dim + layer.v_head_dim)}
    if layer.q_lora_rank:
        out["q_down"] = 2.0 * tokens * h * layer.q_lora_rank
        out["q_up"] = 2.0 * tokens * layer.q_lora_rank * layer.q_width
    else:
        out["q"] = 2.0 * tokens * h * layer.q_width
    return out


def transformer_fwd_flops(
    layer: TransformerLayer, tokens: float, seq_len: int, causal_fraction: float = CAUSAL_ATTENTION_FRACTION
) -> dict[str, float]:
    """Forward FLOPs of one block for ``tokens`` tokens of sequences of length ``seq_len``, by GEMM.

    Narayanan et al. 2021 appendix (24·B·s·h² + 4·B·s²·h per layer for MHA, f = 4h), generalised to
    GQA, SwiGLU and MoE as Megatron's ``num_floating_point_operations`` does; multi-head latent
    attention by :func:`mla_projection_flops` and :func:`attention_core_width`.
    """
    h, q, kv = layer.hidden_size, layer.q_width, layer.k_width + layer.v_width
    ctx = attention_context(layer, seq_len, causal_fraction)
    flops = {"qkv": 2.0 * tokens * h * (q + kv)} if not layer.is_mla else mla_projection_flops(layer, tokens)
    flops["attn_core"] = 2.0 * tokens * ctx * attention_core_width(layer)
    flops["out_proj"] = 2.0 * tokens * layer.o_width * h
    if layer.cross_attention:  # K and V project each encoder position once: tokens·enc/seq of them
        enc = layer.cross_seq_len or seq_len
        per_token = enc / seq_len if seq_len and layer.cross_seq_len else 1.0
        flops["cross"] = 2.0 * tokens * (h * (q + layer.o_width + kv * per_token) + enc * attention_core_width(layer))
    per_token_mlp = 2.0 * ffn_matrices(layer) * h * layer.ffn_hidden_size
    if layer.is_moe:
        flops["router"] = 2.0 * tokens * h * layer.num_experts
        flops["experts"] = tokens * layer.moe_top_k * per_token_mlp
        if layer.shared_expert_ffn_hidden_size:
            flops["shared"] = tokens * 2.0 * ffn_matrices(layer) * h * layer.shared_expert_ffn_hidden_size
    else:
        flops["mlp"] = tokens * per_token_mlp
    return flops


def layer_fwd_flops(
    layer: Layer, tokens: float, seq_len: int, causal_fraction: float = CAUSAL_ATTENTION_FRACTION
) -> float:
    """Total forward FLOPs of any layer for ``tokens`` tokens (embedding lookups and norms count 0)."""
    if isinstance(layer, TransformerLayer):
        return sum(transformer_fwd_flops(layer, tokens, seq_len, causal_fraction).values())
    if isinstance(layer, HeadLayer):
        return 2.0 * tokens * layer.hidden_size * layer.vocab_size
    if isinstance(layer, GenericLayer):
        return tokens * (layer.fwd_flops_per_token + layer.fwd_attn_flops_per_token_per_ctx * seq_len)
    return 0.0


def model_flops_per_step(layers: tuple[Layer, ...], global_batch: int, seq_len: int) -> float:
    """Model FLOPs of one training step (forward + backward = 3x forward, no recompute, causal half).

    This is the MFU numerator (Korthikanti et al. 2022: MFU excludes recomputation).
    """
    return 3.0 * sum(layer_fwd_flops(layer, *own_tokens(layer, float(global_batch) * seq_len, seq_len))
                     for layer in layers)


def own_tokens(layer: Layer, tokens: float, seq_len: int) -> tuple[float, int]:
    """(tokens, sequence length) ``layer`` runs over when the request has ``tokens`` tokens of
    sequences of ``seq_len``: its own ``fixed_seq_len`` per sample where it has one (a speech encoder)."""
    fixed = getattr(layer, "fixed_seq_len", 0)
    return (tokens / seq_len * fixed, fixed) if fixed else (tokens, seq_len)
