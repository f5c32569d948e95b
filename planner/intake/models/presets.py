"""Built-in model presets: a readable table of architecture hyper-parameters, each row with its source.

Each family's shared settings (vocabulary, positions, norms, biases, tying, dropout) are stated once
in a helper that names its source; the rows below give the per-size numbers. A spec is built only
when a preset is asked for, so looking one up costs a few pydantic constructions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from costmodel.specs import FfnAct, ModelSpec, NormKind, TransformerLayer
from planner.intake.models.builder import decoder_lm

__all__ = ["Arch", "HfArch", "HF_PRESETS", "PRESETS", "list_presets", "preset_names", "build_preset"]

Positions = Literal["learned", "rotary", "alibi"]


@dataclass(frozen=True, kw_only=True)
class Arch:
    """The hyper-parameters of one decoder-only preset (one row of the table)."""

    description: str
    """One line for ``meshplan list models``."""
    source: str
    """Where the numbers come from (paper table, repository file)."""
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    """Longest sequence the model was trained for (``ModelSpec.max_seq_len``)."""
    kv_heads: int = 0
    """Key/value heads; 0 means as many as ``heads`` (MHA)."""
    ffn: int = 0
    """MLP (per-expert) width; 0 means ``4 * hidden``."""
    act: FfnAct = "gelu"
    norm: NormKind = "layernorm"
    biases: bool = True
    """Biases on QKV, the attention output and the MLP projections."""
    tied: bool = True
    positions: Positions = "learned"
    """``learned`` adds a position table of ``seq`` rows; rotary and ALiBi hold no parameters."""
    embedding_norm: bool = False
    dropout: bool = False
    experts: int = 0
    top_k: int = 0


# Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
# Megatron-LM" (arXiv:2104.04473), Table 1 and eq. 2: GPT with vocab 51200, seq 2048, learned
# positions, tied embeddings, LayerNorm, biases, GELU f = 4h; Megatron's default dropout 0.1.
def _narayanan(layers: int, hidden: int, heads: int, billions: str) -> Arch:
    return Arch(
        description=f"GPT {billions}B, Narayanan et al. 2021 Table 1 (Megatron-LM weak scaling)",
        source="Narayanan et al. 2021 (arXiv:2104.04473) Table 1",
        layers=layers, hidden=hidden, heads=heads, vocab=51200, seq=2048, dropout=True,
    )


# NVIDIA/Megatron-LM README "Training Speed and Scalability" (2024, H100 weak scaling): GPT with
# vocab 131072, seq 4096, MHA, ffn 4h (shared/reference/published_runs.csv). Positions and tying are
# not printed; untied embeddings without a position table (rotary) match the printed sizes best
# (1.7B: 1.745B untied/rotary, 1.754B untied/learned, 1.485B tied).
def _megatron_h100(layers: int, hidden: int, heads: int, billions: str) -> Arch:
    return Arch(
        description=f"GPT {billions}B, Megatron-LM README H100 weak-scaling series",
        source="NVIDIA/Megatron-LM README, Training Speed and Scalability (2024)",
        layers=layers, hidden=hidden, heads=heads, vocab=131072, seq=4096,
        tied=False, positions="rotary", dropout=True,
    )


# Llama 3 herd paper (arXiv:2407.21783) Table 3 and meta-llama/Llama-3.1-*/config.json: GQA with 8 KV
# heads, SwiGLU, RMSNorm, no biases, rotary, untied head, vocab 128256, context 131072.
def _llama31(layers: int, hidden: int, heads: int, ffn: int, size: str) -> Arch:
    return Arch(
        description=f"Llama 3.1 {size} (GQA 8 KV heads, SwiGLU, RMSNorm, 128K context)",
        source=f"meta-llama/Llama-3.1-{size}/config.json; Llama 3 paper Table 3",
        layers=layers, hidden=hidden, heads=heads, kv_heads=8, ffn=ffn, vocab=128256,
        seq=131072, act="swiglu", norm="rmsnorm", biases=False, tied=False, positions="rotary",
    )


# mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml (d_model, n_heads, n_layers,
# expansion_ratio 4, vocab 50368, max_seq_len 2048) with MPTConfig defaults
# (llmfoundry/models/mpt/configuration_mpt.py: learned_pos_emb=True, no_bias=False,
# tie_word_embeddings=True, LayerNorm, all dropouts 0.0). These reproduce the NumParams column of
# scripts/train/benchmarking/README.md exactly (mpt-7b at seq 2048: 6,658,859,008).
def _mpt(layers: int, hidden: int, heads: int, size: str) -> Arch:
    return Arch(
        description=f"MPT-{size} as benchmarked by llm-foundry (learned positions, biases, tied)",
        source=f"mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-{size.lower()}.yaml",
        layers=layers, hidden=hidden, heads=heads, vocab=50368, seq=2048,
    )


PRESETS: dict[str, Arch] = {
    # Narayanan et al. 2021 Table 1: (layers, hidden, heads) as printed.
    "gpt-1.7b": _narayanan(24, 2304, 24, "1.7"),
    "gpt-3.6b": _narayanan(30, 3072, 32, "3.6"),
    "gpt-7.5b": _narayanan(36, 4096, 32, "7.5"),
    "gpt-18.4b": _narayanan(40, 6144, 48, "18.4"),
    "gpt-39.1b": _narayanan(48, 8192, 64, "39.1"),
    "gpt-76.1b": _narayanan(60, 10240, 80, "76.1"),
    "gpt-145.6b": _narayanan(80, 12288, 96, "145.6"),
    "gpt-310.1b": _narayanan(96, 16384, 128, "310.1"),
    "gpt-529.6b": _narayanan(105, 20480, 128, "529.6"),
    "gpt-1t": _narayanan(128, 25600, 160, "1008.0"),
    # GPT-3 175B (Brown et al. 2020 Table 2.1: 96 layers, d_model 12288, 96 heads) with Narayanan's
    # vocab 51200 (Narayanan et al. 2021 §5.2: 174.6B).
    "gpt3-175b": Arch(
        description="GPT-3 175B with Megatron's vocab 51200 (174.6B, Narayanan et al. 2021 §5.2)",
        source="Brown et al. 2020 Table 2.1; Narayanan et al. 2021 §5.2",
        layers=96, hidden=12288, heads=96, vocab=51200, seq=2048, dropout=True,
    ),
    # Megatron-LM README H100 table: (layers, hidden, heads) as printed.
    "megatron-gpt-1.7b": _megatron_h100(24, 2048, 16, "1.7"),
    "megatron-gpt-7.1b": _megatron_h100(30, 4096, 32, "7.1"),
    "megatron-gpt-16b": _megatron_h100(32, 6144, 48, "16"),
    "megatron-gpt-32b": _megatron_h100(48, 7168, 56, "32"),
    "megatron-gpt-70b": _megatron_h100(84, 8192, 64, "70"),
    "megatron-gpt-119b": _megatron_h100(92, 10240, 80, "119"),
    "megatron-gpt-177b": _megatron_h100(96, 12288, 96, "177"),
    "megatron-gpt-314b": _megatron_h100(96, 16384, 128, "314"),
    "megatron-gpt-462b": _megatron_h100(112, 18432, 144, "462"),
    # Llama 3.1: (layers, hidden, heads, ffn).
    "llama3.1-8b": _llama31(32, 4096, 32, 14336, "8B"),
    "llama3.1-70b": _llama31(80, 8192, 64, 28672, "70B"),
    "llama3.1-405b": _llama31(126, 16384, 128, 53248, "405B"),
    # Serving presets (issue 23). Llama 3.3 70B is Llama 3.1 70B's architecture
    # (meta-llama/Llama-3.3-70B-Instruct/config.json differs only in its weights).
    "llama3.3-70b": Arch(
        description="Llama 3.3 70B Instruct (Llama 3.1 70B architecture, GQA 8 KV heads, 128K context)",
        source="meta-llama/Llama-3.3-70B-Instruct/config.json",
        layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256, seq=131072,
        act="swiglu", norm="rmsnorm", biases=False, tied=False, positions="rotary",
    ),
    # meta-llama/Llama-2-70b-chat-hf/config.json (Touvron et al. 2023, arXiv:2307.09288 §2.2: GQA for 70B).
    "llama2-70b": Arch(
        description="Llama 2 70B (GQA 8 KV heads, SwiGLU, RMSNorm, 4K context)",
        source="meta-llama/Llama-2-70b-chat-hf/config.json",
        layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000, seq=4096,
        act="swiglu", norm="rmsnorm", biases=False, tied=False, positions="rotary",
    ),
    # mistralai/Mixtral-8x7B-v0.1/config.json (Jiang et al. 2024, arXiv:2401.04088 Table 1).
    "mixtral-8x7b": Arch(
        description="Mixtral 8x7B (8 experts, top-2, GQA 8 KV heads, SwiGLU, RMSNorm)",
        source="mistralai/Mixtral-8x7B-v0.1/config.json",
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000, seq=32768,
        act="swiglu", norm="rmsnorm", biases=False, tied=False, positions="rotary",
        experts=8, top_k=2,
    ),
    # MPT: (layers, hidden, heads) from the llm-foundry pretrain yamls.
    "mpt-1b": _mpt(24, 2048, 16, "1B"),
    "mpt-3b": _mpt(32, 2560, 20, "3B"),
    "mpt-7b": _mpt(32, 4096, 32, "7B"),
    "mpt-13b": _mpt(40, 5120, 40, "13B"),
    "mpt-30b": _mpt(48, 7168, 56, "30B"),
    "mpt-70b": _mpt(80, 8192, 64, "70B"),
    # bigscience/bloom/config.json (BigScience 2022, arXiv:2211.05100 Table 3): ALiBi, embedding
    # LayerNorm, tied head, biases, GELU 4h, dropout 0.0, seq 2048.
    "bloom-176b": Arch(
        description="BLOOM 176B (ALiBi, embedding LayerNorm, vocab 250880)",
        source="bigscience/bloom/config.json; BLOOM paper (arXiv:2211.05100) Table 3",
        layers=70, hidden=14336, heads=112, vocab=250880, seq=2048,
        positions="alibi", embedding_norm=True,
    ),
}


@dataclass(frozen=True, kw_only=True)
class HfArch:
    """A preset whose architecture is a published Hugging Face ``config.json`` (read by
    :func:`planner.intake.models.hf_config.spec_from_hf_dict`): for layouts the table above cannot state
    (head width apart from hidden / heads, q/k norms, expert widths)."""

    description: str
    source: str
    config: dict


def _qwen3_moe(layers: int, hidden: int, heads: int, ffn: int, expert_ffn: int) -> dict:
    """Qwen3-MoE (Qwen/Qwen3-*-A*B/config.json): 128 experts, top-8, 4 KV heads of width 128, q/k
    RMSNorms, no biases, untied head, vocab 151936, context 40960, every layer sparse."""
    return dict(model_type="qwen3_moe", hidden_size=hidden, intermediate_size=ffn, moe_intermediate_size=expert_ffn,
                num_experts=128, num_experts_per_tok=8, num_hidden_layers=layers, num_attention_heads=heads,
                num_key_value_heads=4, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True, tie_word_embeddings=False,
                attention_bias=False, use_sliding_window=False, rms_norm_eps=1e-6)


# deepseek-ai/DeepSeek-V3/config.json (architecture fields; the MTP module, num_nextn_predict_layers,
# is not part of the main model the parameter total counts). 671B total, 37B activated.
_DEEPSEEK_V3 = dict(
    model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], hidden_size=7168, intermediate_size=18432,
    moe_intermediate_size=2048, n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8, n_group=8,
    topk_group=4, first_k_dense_replace=3, moe_layer_freq=1, num_hidden_layers=61, num_attention_heads=128,
    num_key_value_heads=128, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
    v_head_dim=128, vocab_size=129280, max_position_embeddings=163840, tie_word_embeddings=False,
    attention_bias=False, hidden_act="silu", rms_norm_eps=1e-6, num_nextn_predict_layers=1)


def _llama4(experts: int, step: int, max_positions: int) -> dict:
    """Llama 4 (meta-llama/Llama-4-*/config.json ``text_config``; the defaults of transformers'
    ``Llama4TextConfig`` are Scout's): 48 layers of width 5120, 40 heads and 8 KV heads of 128,
    experts of 8192 with top-1 routing and a shared expert of 8192 on every ``step``-th layer, dense
    MLPs of 16384 elsewhere, vocabulary 202048, untied head."""
    text = dict(model_type="llama4_text", hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
                num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                num_local_experts=experts, num_experts_per_tok=1, interleave_moe_layer_step=step,
                vocab_size=202048, max_position_embeddings=max_positions, attention_bias=False,
                attention_chunk_size=8192, rms_norm_eps=1e-5, hidden_act="silu")
    return dict(model_type="llama4", architectures=["Llama4ForConditionalGeneration"], tie_word_embeddings=False,
                text_config=text)


# openai/gpt-oss-120b/config.json: 36 layers alternating sliding (128 tokens) and full attention,
# 64 query and 8 KV heads of 64, 128 experts of 2880 with top-4, vocabulary 201088 (MXFP4 experts).
_GPT_OSS_120B = dict(
    model_type="gpt_oss", hidden_size=2880, intermediate_size=2880, num_hidden_layers=36,
    num_attention_heads=64, num_key_value_heads=8, head_dim=64, num_local_experts=128,
    num_experts_per_tok=4, vocab_size=201088, max_position_embeddings=131072, sliding_window=128,
    layer_types=["sliding_attention", "full_attention"] * 18, tie_word_embeddings=False,
    rms_norm_eps=1e-5, hidden_act="silu")


HF_PRESETS: dict[str, HfArch] = {
    "deepseek-r1": HfArch(description="DeepSeek-R1 671B (DeepSeek-V3 architecture: MLA, 256 routed experts, top-8)",
                          source="deepseek-ai/DeepSeek-R1/config.json (identical architecture fields to DeepSeek-V3)",
                          config=_DEEPSEEK_V3),
    "gpt-oss-120b": HfArch(description="gpt-oss-120b (MoE: 128 experts, top-4; alternating 128-token sliding window)",
                           source="openai/gpt-oss-120b/config.json", config=_GPT_OSS_120B),
    "deepseek-v3": HfArch(description="DeepSeek-V3 671B (MLA, 1 shared + 256 routed experts, top-8, 3 dense layers first)",
                          source="deepseek-ai/DeepSeek-V3/config.json; arXiv:2412.19437", config=_DEEPSEEK_V3),
    "llama4-scout": HfArch(description="Llama 4 Scout 17B-16E (MoE every layer: 16 experts, top-1 + shared expert)",
                           source="meta-llama/Llama-4-Scout-17B-16E/config.json", config=_llama4(16, 1, 10485760)),
    "llama4-maverick": HfArch(description="Llama 4 Maverick 17B-128E (MoE every 2nd layer: 128 experts, top-1 + shared)",
                              source="meta-llama/Llama-4-Maverick-17B-128E/config.json",
                              config=_llama4(128, 2, 1048576)),
    "qwen3-30b-a3b": HfArch(description="Qwen3-30B-A3B (MoE: 128 experts, top-8, GQA 4 KV heads of width 128)",
                            source="Qwen/Qwen3-30B-A3B/config.json", config=_qwen3_moe(48, 2048, 32, 6144, 768)),
    "qwen3-235b-a22b": HfArch(description="Qwen3-235B-A22B (MoE: 128 experts, top-8, GQA 4 KV heads of width 128)",
                              source="Qwen/Qwen3-235B-A22B/config.json",
                              config=_qwen3_moe(94, 4096, 64, 12288, 1536)),
}


def preset_names() -> list[str]:
    """Every preset name, sorted."""
    return sorted([*PRESETS, *HF_PRESETS])


def list_presets() -> list[tuple[str, str]]:
    """``(name, one-line description)`` for every preset, sorted by name."""
    return [(name, (PRESETS.get(name) or HF_PRESETS[name]).description) for name in preset_names()]


def _block(arch: Arch) -> TransformerLayer:
    """The one transformer block every layer of a preset repeats."""
    return TransformerLayer(
        hidden_size=arch.hidden,
        num_heads=arch.heads,
        num_kv_heads=arch.kv_heads or arch.heads,
        head_dim=arch.hidden // arch.heads,
        ffn_hidden_size=arch.ffn or 4 * arch.hidden,
        ffn_act=arch.act,
        num_experts=arch.experts,
        moe_top_k=arch.top_k,
        norm=arch.norm,
        qkv_bias=arch.biases,
        out_bias=arch.biases,
        mlp_bias=arch.biases,
        dropout=arch.dropout,
    )


def build_preset(name: str) -> ModelSpec:
    """Build the spec of preset ``name`` (exact, lower-case key of :data:`PRESETS` or :data:`HF_PRESETS`)."""
    if name in HF_PRESETS:
        from planner.intake.models.hf_config import spec_from_hf_dict

        hf = HF_PRESETS[name]
        return spec_from_hf_dict(dict(hf.config), name=name, source=f"preset {name} ({hf.source})")
    arch = PRESETS[name]
    block = _block(arch)
    return decoder_lm(
        name,
        blocks=(block,) * arch.layers,
        vocab_size=arch.vocab,
        tied_embeddings=arch.tied,
        max_seq_len=arch.seq,
        source=f"preset {name} ({arch.source})",
        learned_positions=arch.seq if arch.positions == "learned" else 0,
        embedding_norm=arch.norm if arch.embedding_norm else None,
    )
