"""Preset table: names, descriptions, layer structure and per-family settings."""

from __future__ import annotations

import pytest

from costmodel.specs import EmbeddingLayer, HeadLayer, NormLayer, TransformerLayer
from planner.models.presets import PRESETS, build_preset, list_presets, preset_names

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
    from planner.models.presets import HF_PRESETS, build_preset

    for name in ("qwen3-30b-a3b", "qwen3-235b-a22b"):
        spec = build_preset(name)
        blocks = [x for x in spec.layers if x.kind == "transformer"]
        config = transformers.Qwen3MoeConfig(**{k: v for k, v in HF_PRESETS[name].config.items() if k != "model_type"})
        assert (len(blocks), blocks[0].num_experts, blocks[0].moe_top_k, blocks[0].head_dim) == \
            (config.num_hidden_layers, config.num_experts, config.num_experts_per_tok, config.head_dim)
        if name == "qwen3-30b-a3b":  # the smaller one is built for real on meta (a few seconds)
            with torch.device("meta"):
                model = transformers.Qwen3MoeForCausalLM(config)
            # the config intake leaves out Qwen3's q/k RMSNorms: 2 x head_dim weights per layer
            qk_norms = config.num_hidden_layers * 2 * config.head_dim
            assert count_params(spec) + qk_norms == sum(p.numel() for p in model.parameters())
