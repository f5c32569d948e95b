"""Issue 25: hybrid attention layouts read per layer from config.json (Gemma 3, gpt-oss, Llama 4 text)."""

from __future__ import annotations

from typing import Any

from costmodel.params import layer_params
from costmodel.specs import TransformerLayer
from planner.intake.models.hf_config import spec_from_hf_dict

_GEMMA3_1B: dict[str, Any] = dict(  # google/gemma-3-1b-pt/config.json
    model_type="gemma3_text", hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
    num_attention_heads=4, num_key_value_heads=1, head_dim=256, vocab_size=262144, sliding_window=512,
    sliding_window_pattern=6, max_position_embeddings=32768)
_LLAMA4_SCOUT_TEXT: dict[str, Any] = dict(  # meta-llama/Llama-4-Scout-17B-16E config.json "text_config"
    model_type="llama4_text", hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
    num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, num_local_experts=16,
    num_experts_per_tok=1, interleave_moe_layer_step=1, vocab_size=202048, attention_chunk_size=8192,
    max_position_embeddings=10485760)
_GPT_OSS_20B: dict[str, Any] = dict(  # openai/gpt-oss-20b/config.json
    model_type="gpt_oss", hidden_size=2880, intermediate_size=2880, num_hidden_layers=24, num_attention_heads=64,
    num_key_value_heads=8, head_dim=64, num_local_experts=32, experts_per_token=4, vocab_size=201088,
    sliding_window=128, layer_types=["sliding_attention", "full_attention"] * 12, max_position_embeddings=131072)


def _blocks(raw: dict[str, Any]) -> list[TransformerLayer]:
    spec = spec_from_hf_dict(raw, name="m", source="test")
    return [layer for layer in spec.layers if isinstance(layer, TransformerLayer)]


def test_gemma3_keeps_five_sliding_layers_to_one_global() -> None:
    windows = [b.sliding_window for b in _blocks(_GEMMA3_1B)]
    assert windows == [None if (i + 1) % 6 == 0 else 512 for i in range(26)]
    assert windows.count(None) == 4
    blocks = _blocks(_GEMMA3_1B)
    assert blocks[0].qk_norm and not blocks[0].qkv_bias and blocks[0].num_kv_heads == 1


def test_layer_types_override_the_pattern_and_nested_text_config_reads_the_same() -> None:
    types = ["full_attention"] * 2 + ["sliding_attention"] * 24
    windows = [b.sliding_window for b in _blocks(_GEMMA3_1B | {"layer_types": types})]
    assert windows == [None, None] + [512] * 24
    nested = {"model_type": "gemma3", "text_config": _GEMMA3_1B}
    assert _blocks(nested) == _blocks(_GEMMA3_1B)


def test_top_level_llama4_text_config_keeps_chunks_on_three_layers_of_four() -> None:
    blocks = _blocks(_LLAMA4_SCOUT_TEXT)
    assert [b.attention_chunk for b in blocks[:4]] == [8192, 8192, 8192, None]
    assert sum(1 for b in blocks if b.attention_chunk is None) == 12
    assert all(b.num_experts == 16 and b.moe_top_k == 1 and b.shared_expert_ffn_hidden_size == 8192 for b in blocks)
    nested = {"model_type": "llama4", "text_config": _LLAMA4_SCOUT_TEXT}
    assert _blocks(nested) == blocks


def test_gpt_oss_alternates_sliding_128_and_full_with_biased_attention() -> None:
    blocks = _blocks(_GPT_OSS_20B)
    assert [b.sliding_window for b in blocks[:4]] == [128, None, 128, None]
    assert all(b.num_experts == 32 and b.moe_top_k == 4 and b.qkv_bias and b.out_bias for b in blocks)
    # 20.9 B parameters (OpenAI's model card: 21B); the sinks (64 per layer) have no spec field
    total = sum(layer_params(x) for x in spec_from_hf_dict(_GPT_OSS_20B, name="m", source="t").layers)
    assert 20.8e9 < total < 21.0e9
