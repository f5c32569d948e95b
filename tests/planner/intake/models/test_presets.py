"""Preset table: names, descriptions, layer structure and per-family settings."""

from __future__ import annotations

import pytest

from costmodel.specs import EmbeddingLayer, HeadLayer, NormLayer, TransformerLayer
from planner.intake.models.presets import PRESETS, build_preset, list_presets, preset_names

REQUIRED = [
    "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b", "gpt-39.1b", "gpt-76.1b", "gpt-145.6b",
    "gpt-310.1b", "gpt-529.6b", "gpt-1t", "gpt3-175b", "llama3.1-8b", "llama3.1-70b",
    "llama3.1-405b", "mixtral-8x7b", "mpt-1b", "mpt-3b", "mpt-7b", "mpt-13b", "mpt-30b",
    "mpt-70b", "bloom-176b", "megatron-gpt-1.7b", "megatron-gpt-462b",
]


def test_required_presets_exist() -> None:
    assert set(REQUIRED) <= set(PRESETS)


def test_list_presets_sorted_with_one_line_descriptions() -> None:
    listed = list_presets()
    names = [name for name, _ in listed]
    assert names == sorted(names) == preset_names()
    for name, description in listed:
        assert description.strip() and "\n" not in description, name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_structure(name: str) -> None:
    arch = PRESETS[name]
    spec = build_preset(name)
    first, *blocks, norm, head = spec.layers
    assert isinstance(first, EmbeddingLayer) and isinstance(norm, NormLayer)
    assert isinstance(head, HeadLayer)
    assert len(blocks) == arch.layers
    assert all(isinstance(b, TransformerLayer) for b in blocks)
    assert len({id(b) for b in blocks}) == 1, "identical blocks must share one object"
    block = blocks[0]
    assert (block.hidden_size, block.num_heads) == (arch.hidden, arch.heads)
    assert block.num_heads * block.head_dim == block.hidden_size
    assert first.vocab_size == head.vocab_size == arch.vocab
    assert head.tied == spec.tied_embeddings == arch.tied
    assert norm.norm == block.norm
    assert spec.max_seq_len == arch.seq
    assert spec.name == name and name in spec.source


def test_family_settings() -> None:
    gpt = build_preset("gpt-1.7b")
    assert gpt.layers[0].max_positions == 2048 and gpt.tied_embeddings
    assert gpt.layers[1].dropout and gpt.layers[1].qkv_bias and gpt.layers[1].ffn_hidden_size == 4 * 2304

    llama = build_preset("llama3.1-70b")
    block = llama.layers[1]
    assert (block.num_kv_heads, block.ffn_act, block.norm) == (8, "swiglu", "rmsnorm")
    assert not (block.qkv_bias or block.out_bias or block.mlp_bias or block.dropout)
    assert llama.layers[0].max_positions == 0 and not llama.tied_embeddings

    mixtral = build_preset("mixtral-8x7b").layers[1]
    assert (mixtral.num_experts, mixtral.moe_top_k, mixtral.ffn_hidden_size) == (8, 2, 14336)

    bloom = build_preset("bloom-176b")
    assert bloom.layers[0].norm == "layernorm" and bloom.layers[0].max_positions == 0

    mpt = build_preset("mpt-7b")
    assert mpt.layers[0].max_positions == 2048 and mpt.tied_embeddings
    assert not mpt.layers[1].dropout


def test_qwen3_moe_presets_match_the_transformers_model_of_their_config() -> None:
    import torch
    import transformers

    from costmodel.params import count_params
    from planner.intake.models.presets import HF_PRESETS, build_preset

    for name in ("qwen3-30b-a3b", "qwen3-235b-a22b"):
        spec = build_preset(name)
        blocks = [x for x in spec.layers if x.kind == "transformer"]
        config = transformers.Qwen3MoeConfig(**{k: v for k, v in HF_PRESETS[name].config.items() if k != "model_type"})
        assert (len(blocks), blocks[0].num_experts, blocks[0].moe_top_k, blocks[0].head_dim) == \
            (config.num_hidden_layers, config.num_experts, config.num_experts_per_tok, config.head_dim)
        if name == "qwen3-30b-a3b":  # the smaller one is built for real on meta (a few seconds)
            with torch.device("meta"):
                model = transformers.Qwen3MoeForCausalLM(config)
            assert count_params(spec) == sum(p.numel() for p in model.parameters())  # q/k norms included


def _meta_params(model_class: type, config: object) -> int:
    import torch

    with torch.device("meta"):
        return sum(p.numel() for p in model_class(config).parameters())


def test_deepseek_v3_preset_is_the_published_671b_37b_model() -> None:
    """DeepSeek-V3 (arXiv:2412.19437 §1; deepseek-ai/DeepSeek-V3 README_WEIGHTS.md): 671B main-model
    parameters (the 14B MTP module apart), 36.6B activated per token counting the 0.9B output head
    but not the embedding lookup (37B in the paper). MLA with a 1536-wide query latent and a 512-wide
    key/value latent; 3 dense blocks, then 58 of 1 shared + 256 routed experts, top-8."""
    from costmodel.params import count_active_params, count_params, layer_params, mla_params
    from planner.intake.models.presets import build_preset

    spec = build_preset("deepseek-v3")
    blocks = [x for x in spec.layers if x.kind == "transformer"]
    assert [b.is_moe for b in blocks] == [False] * 3 + [True] * 58
    moe = blocks[3]
    assert (moe.num_experts, moe.moe_top_k, moe.ffn_hidden_size, moe.shared_expert_ffn_hidden_size) == (256, 8, 2048, 2048)
    assert (moe.q_lora_rank, moe.kv_lora_rank, moe.head_dim, moe.v_head_dim) == (1536, 512, 192, 128)
    assert blocks[0].ffn_hidden_size == 18432 and mla_params(moe) == 187_107_328
    assert count_params(spec) == 671_026_404_352  # = DeepseekV3ForCausalLM on meta (next test)
    active = count_active_params(spec) - layer_params(spec.layers[0])
    assert round(active / 1e8) == 366 and round(count_active_params(spec) / 1e9) in (37, 38)


def test_deepseek_v3_preset_counts_like_the_transformers_model_of_its_config() -> None:
    """The preset's config read by meshplan and built by transformers on meta hold the same parameters."""
    import transformers

    from costmodel.params import count_params
    from planner.intake.models.hf_config import spec_from_hf_dict
    from planner.intake.models.presets import HF_PRESETS

    raw = dict(HF_PRESETS["deepseek-v3"].config)
    config = transformers.DeepseekV3Config(**{k: v for k, v in raw.items() if k not in ("model_type", "architectures", "moe_layer_freq")})
    spec = spec_from_hf_dict(raw, name="deepseek-v3", source="test")
    assert count_params(spec) == _meta_params(transformers.DeepseekV3ForCausalLM, config)


def test_llama4_presets_match_transformers_and_the_published_totals() -> None:
    """Llama 4 Scout (17B active, 109B total) and Maverick (17B active, 400B total): the language
    model equals transformers' ``Llama4ForCausalLM`` of the config's ``text_config``; the published
    totals also hold the vision encoder (about 0.46B), so the text model is within 1.5 % of them."""
    import transformers

    from costmodel.params import count_active_params, count_params
    from planner.intake.models.presets import HF_PRESETS, build_preset

    for name, total, moe_every in (("llama4-scout", 109e9, 1), ("llama4-maverick", 400e9, 2)):
        spec = build_preset(name)
        blocks = [x for x in spec.layers if x.kind == "transformer"]
        assert [b.is_moe for b in blocks] == [(i + 1) % moe_every == 0 for i in range(48)]
        moe = next(b for b in blocks if b.is_moe)
        assert (moe.moe_top_k, moe.shared_expert_ffn_hidden_size, moe.ffn_hidden_size) == (1, 8192, 8192)
        assert all(b.ffn_hidden_size == 16384 for b in blocks if not b.is_moe)
        assert [b.attention_chunk for b in blocks] == [8192, 8192, 8192, None] * 12  # rotary layers chunked
        assert count_params(spec) == pytest.approx(total, rel=0.015)
        assert round(count_active_params(spec) / 1e9) == 17
        text = transformers.Llama4TextConfig(**{k: v for k, v in HF_PRESETS[name].config["text_config"].items()
                                                 if k != "model_type"})
        assert count_params(spec) == _meta_params(transformers.Llama4ForCausalLM, text)
