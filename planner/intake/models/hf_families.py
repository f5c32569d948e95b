"""What each Hugging Face ``model_type`` means for the spec: defaults, aliases, biases, MoE layout.

Every row restates the modelling code of huggingface/transformers
(``src/transformers/models/<family>/{configuration,modeling}_<family>.py``): which projections carry
biases, whether the MLP is gated, the class default of ``tie_word_embeddings``, the ``attribute_map``
aliases, where the MoE fields live (shared/reference/ecosystem-notes.md §B4) and how sliding-window
attention is switched on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from costmodel.specs import NormKind

__all__ = ["Family", "FAMILIES", "TEXT_SUFFIX"]

MoeLayout = Literal["none", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek", "llama4"]
SlidingRule = Literal["none", "all", "qwen", "pattern"]

TEXT_SUFFIX = "_text"
"""Multimodal checkpoints nest the language model under ``text_config`` as ``<family>_text``."""

# GPT-2 (GPT2Config.attribute_map + its own key names) and BLOOM (BloomConfig.attribute_map, and
# ``n_embed`` popped in BloomConfig.__init__).
_GPT2_ALIASES = {
    "hidden_size": ("n_embd",),
    "num_hidden_layers": ("n_layer",),
    "num_attention_heads": ("n_head",),
    "intermediate_size": ("n_inner",),
    "max_position_embeddings": ("n_positions", "n_ctx"),
}
_BLOOM_ALIASES = {
    "hidden_size": ("n_embed",),
    "num_hidden_layers": ("n_layer",),
    "num_attention_heads": ("n_head",),
    "max_position_embeddings": ("seq_length",),
}
# GptOssConfig: num_experts_per_tok is also written experts_per_token in the published files.
_GPT_OSS_ALIASES = {"num_experts_per_tok": ("experts_per_token",)}
# MixtralConfig.attribute_map: num_experts -> num_local_experts.
_MIXTRAL_ALIASES = {"num_local_experts": ("num_experts",)}
# DeepseekV3Config.attribute_map: num_local_experts -> n_routed_experts; DeepseekV2Config: num_experts.
_DEEPSEEK_V3_ALIASES = {"n_routed_experts": ("num_local_experts",)}
_DEEPSEEK_V2_ALIASES = {"n_routed_experts": ("num_experts",)}


@dataclass(frozen=True, kw_only=True)
class Family:
    """How one ``model_type`` maps onto a :class:`~costmodel.specs.TransformerLayer`."""

    gated: bool
    """SwiGLU-style MLP (gate, up, down) rather than two matrices."""
    norm: NormKind
    tied_default: bool
    """Class default of ``tie_word_embeddings`` when the file omits it."""
    qkv_bias: bool
    out_bias: bool
    mlp_bias: bool
    attention_bias_key: bool = False
    """The family reads ``attention_bias`` (Q, K, V and output biases together)."""
    mlp_bias_key: bool = False
    """The family reads ``mlp_bias``."""
    ffn_default_4h: bool = False
    """``intermediate_size`` may be absent or null, meaning ``4 * hidden_size`` (GPT-2, BLOOM)."""
    learned_positions: bool = False
    """A learned absolute position table of ``max_position_embeddings`` rows (GPT-2)."""
    embedding_norm: bool = False
    """A LayerNorm right after the token lookup (BLOOM ``word_embeddings_layernorm``)."""
    moe: MoeLayout = "none"
    """Where the experts are: ``mixtral`` every layer; ``qwen2_moe`` / ``qwen3_moe`` by
    ``decoder_sparse_step`` and ``mlp_only_layers``; ``deepseek`` from ``first_k_dense_replace``
    on, every ``moe_layer_freq``-th layer, with ``n_shared_experts`` always-on experts; ``llama4``
    the ``moe_layers`` (or every ``interleave_moe_layer_step``-th layer), a shared expert of
    ``intermediate_size`` and dense layers of ``intermediate_size_mlp``."""
    mla: bool = False
    """Multi-head latent attention (DeepSeek-V2/V3: ``q_lora_rank``, ``kv_lora_rank``,
    ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``)."""
    qk_norm: bool = False
    """Per-head RMSNorm weights on queries and keys (Qwen3 ``q_norm`` / ``k_norm``)."""
    conv1d: bool = False
    """The block's projections are transformers' ``Conv1D`` (GPT-2: ``c_attn``, ``c_proj``, ``c_fc``,
    transformers/pytorch_utils.py), not ``nn.Linear``."""
    chunked: bool = False
    """Chunked attention of ``attention_chunk_size`` tokens on the layers ``layer_types`` names
    ``chunked_attention`` (Llama 4: by default the rotary layers, three in every four)."""
    sliding: SlidingRule = "none"
    """``all``: ``sliding_window`` applies to every layer (Mistral, Mixtral); ``qwen``: only when
    ``use_sliding_window`` is true, to layers from ``max_window_layers`` on; ``pattern``: every layer
    but each ``sliding_window_pattern``-th (Gemma 3, default 6: five local layers to one global).
    A ``layer_types`` list (``sliding_attention`` / ``full_attention`` / ``chunked_attention``)
    overrides the rule wherever it is given."""
    act_default: str = "gelu"
    """The activation a config that names none gets (transformers' config class default: GPT-2's
    ``activation_function="gelu_new"``, transformers/models/gpt2/configuration_gpt2.py)."""
    dropout_keys: tuple[str, ...] = ("attention_dropout",)
    dropout_default: float = 0.0
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)


_LLAMA_LIKE = dict(gated=True, norm="rmsnorm", tied_default=False, mlp_bias=False)

FAMILIES: dict[str, Family] = {
    # LlamaAttention/LlamaMLP: bias=config.attention_bias / config.mlp_bias (both default False).
    "llama": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, attention_bias_key=True,
                    mlp_bias_key=True),
    # MistralAttention: bias=False everywhere; sliding_window on every layer.
    "mistral": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, sliding="all"),
    "mixtral": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, sliding="all",
                      moe="mixtral", aliases=_MIXTRAL_ALIASES),
    # Qwen2Attention: q/k/v bias=True, o_proj bias=False.
    "qwen2": Family(**_LLAMA_LIKE, qkv_bias=True, out_bias=False, sliding="qwen"),
    "qwen2_moe": Family(**_LLAMA_LIKE, qkv_bias=True, out_bias=False, sliding="qwen",
                        moe="qwen2_moe"),
    # Qwen3Attention: bias=config.attention_bias on q/k/v/o (default False); q_norm, k_norm.
    "qwen3": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, attention_bias_key=True,
                    sliding="qwen", qk_norm=True),
    "qwen3_moe": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, attention_bias_key=True,
                        sliding="qwen", moe="qwen3_moe", qk_norm=True),
    # DeepseekV2/V3Attention: MLA, attention_bias on q_a_proj, kv_a_proj_with_mqa and o_proj;
    # DeepseekV2MLP bias=config.mlp_bias, DeepseekV3MLP no bias; router h x E without bias.
    "deepseek_v2": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, attention_bias_key=True,
                          mlp_bias_key=True, moe="deepseek", mla=True, aliases=_DEEPSEEK_V2_ALIASES),
    "deepseek_v3": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, attention_bias_key=True,
                          moe="deepseek", mla=True, aliases=_DEEPSEEK_V3_ALIASES),
    # Llama4TextAttention: bias=config.attention_bias; its qk_norm is an L2 norm without weights.
    # Llama4TextMoe: experts, a router h x E without bias, one shared expert of intermediate_size.
    "llama4": Family(**_LLAMA_LIKE, qkv_bias=False, out_bias=False, attention_bias_key=True,
                     moe="llama4", chunked=True),
    # Gemma3TextConfig / Gemma3Attention, Gemma3MLP: no biases (attention_bias default False), gated
    # GELU-tanh MLP, q/k RMSNorms, a tied head; sliding_window on all but every sliding_window_pattern-th
    # layer. Its post-attention and post-MLP norms (2h per block) have no spec field.
    "gemma3": Family(gated=True, norm="rmsnorm", tied_default=True, mlp_bias=False, qkv_bias=False, out_bias=False,
                     attention_bias_key=True, sliding="pattern", qk_norm=True),
    # GptOssAttention: q/k/v/o with biases (attention_bias default True), a sink logit per head (not in the
    # spec: num_heads parameters per block); GptOssExperts: fused gate-up and down cubes with biases,
    # router with bias; layer_types alternate sliding_attention (128) and full_attention.
    "gpt_oss": Family(**{**_LLAMA_LIKE, "mlp_bias": True}, qkv_bias=True, out_bias=True, attention_bias_key=True, sliding="all",
                      moe="mixtral", aliases=_GPT_OSS_ALIASES),
    # GPT-2: Conv1D projections with biases, learned positions, tied head, dropouts 0.1.
    "gpt2": Family(gated=False, norm="layernorm", tied_default=True, qkv_bias=True, out_bias=True,
                   mlp_bias=True, ffn_default_4h=True, learned_positions=True, conv1d=True, act_default="gelu_new",
                   dropout_keys=("attn_pdrop", "resid_pdrop", "embd_pdrop"), dropout_default=0.1,
                   aliases=_GPT2_ALIASES),
    # GPT-NeoX: rotary, biases (attention_bias default True), untied embed_out.
    "gpt_neox": Family(gated=False, norm="layernorm", tied_default=False, qkv_bias=True,
                       out_bias=True, mlp_bias=True, attention_bias_key=True,
                       dropout_keys=("attention_dropout", "hidden_dropout")),
    # BLOOM: ALiBi, embedding LayerNorm, biases, tied head, MLP 4h.
    "bloom": Family(gated=False, norm="layernorm", tied_default=True, qkv_bias=True, out_bias=True,
                    mlp_bias=True, ffn_default_4h=True, embedding_norm=True,
                    dropout_keys=("attention_dropout", "hidden_dropout"), aliases=_BLOOM_ALIASES),
}
