"""Hugging Face config.json intake: families, aliases, defaults, published counts, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from costmodel.specs import TransformerLayer
from planner.errors import InputError
from planner.intake.models.hf_config import load_hf_config
from costmodel.params import count_active_params, count_params
from planner.intake.models.presets import build_preset

# Fields as published in each checkpoint's config.json on the Hugging Face Hub.
LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": False, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 128256,
}
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": False, "vocab_size": 32000,
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
    "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000,
}
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 896, "intermediate_size": 4864, "max_position_embeddings": 32768,
    "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
    "use_sliding_window": False, "vocab_size": 151936,
}
GPT2_SMALL = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "embd_pdrop": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024,
    "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1,
    "vocab_size": 50257,
}
PYTHIA_160M = {
    "architectures": ["GPTNeoXForCausalLM"], "hidden_act": "gelu", "hidden_size": 768,
    "intermediate_size": 3072, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "gpt_neox", "num_attention_heads": 12, "num_hidden_layers": 12,
    "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
    "use_parallel_residual": True, "vocab_size": 50304,
}
BLOOM_560M = {
    "apply_residual_connection_post_layernorm": False, "architectures": ["BloomForCausalLM"],
    "attention_dropout": 0.0, "hidden_dropout": 0.0, "n_embed": 1024, "layer_norm_epsilon": 1e-05,
    "model_type": "bloom", "n_head": 16, "n_inner": None, "n_layer": 24, "vocab_size": 250880,
}


def write(tmp_path: Path, config: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def blocks(spec: Any) -> list[TransformerLayer]:
    return [layer for layer in spec.layers if isinstance(layer, TransformerLayer)]


# ---------------------------------------------------------------------------------------------
# Published checkpoints
# ---------------------------------------------------------------------------------------------
def test_llama31_8b_config_equals_preset(tmp_path: Path) -> None:
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    path = write(folder, LLAMA31_8B)
    spec = load_hf_config(path)
    preset = build_preset("llama3.1-8b")
    assert count_params(spec) == count_params(preset) == 8_030_261_248
    # the same shapes; only the module that runs them differs (transformers' vs planner.runtime.models.Block)
    assert [b.transformers_block for b in blocks(spec)] == [True] * 32
    assert [b.model_copy(update={"transformers_block": False}) for b in spec.layers[1:-2]] == list(preset.layers[1:-2])
    assert spec.layers[-2:] == preset.layers[-2:]
    assert spec.max_seq_len == 131072 and not spec.tied_embeddings
    assert spec.name == "Llama-3.1-8B" and spec.source == str(path)


def test_mixtral_config_equals_preset(tmp_path: Path) -> None:
    spec = load_hf_config(write(tmp_path, MIXTRAL_8X7B))
    assert count_params(spec) == 46_702_792_704
    assert count_active_params(spec) == 12_879_925_248
    block = blocks(spec)[0]
    assert (block.num_experts, block.moe_top_k, block.sliding_window) == (8, 2, None)


def test_mistral_sliding_window_on_every_layer(tmp_path: Path) -> None:
    spec = load_hf_config(write(tmp_path, MISTRAL_7B))
    assert count_params(spec) == 7_241_732_096  # Mistral 7B v0.1
    assert {b.sliding_window for b in blocks(spec)} == {4096}
    assert len({id(b) for b in blocks(spec)}) == 1


def test_gpt2_small_aliases_learned_positions_tied(tmp_path: Path) -> None:
    spec = load_hf_config(write(tmp_path, GPT2_SMALL))
    assert count_params(spec) == 124_439_808
    assert spec.tied_embeddings and spec.layers[0].max_positions == 1024
    block = blocks(spec)[0]
    assert block.ffn_hidden_size == 3072 and block.ffn_act == "gelu_tanh" and block.dropout  # gelu_new: op by op
    assert block.qkv_bias and block.out_bias and block.mlp_bias and block.norm == "layernorm"
    assert block.transformers_block  # built and run by transformers (costmodel.memory.eager_block_extra_bytes)
    unnamed = {k: v for k, v in GPT2_SMALL.items() if k != "activation_function"}
    # GPT2Config's own default is gelu_new, so a config.json that names none runs the op-by-op tanh GELU
    assert blocks(load_hf_config(write(tmp_path, unnamed, "unnamed.json")))[0].ffn_act == "gelu_tanh"


def test_gpt_neox_pythia_160m(tmp_path: Path) -> None:
    spec = load_hf_config(write(tmp_path, PYTHIA_160M))
    assert count_params(spec) == 162_322_944  # Pythia README: 160M total params
    assert not spec.tied_embeddings and spec.layers[0].max_positions == 0
    assert blocks(spec)[0].qkv_bias and not blocks(spec)[0].dropout


def test_bloom_560m_alias_and_embedding_norm(tmp_path: Path) -> None:
    spec = load_hf_config(write(tmp_path, BLOOM_560M))
    assert count_params(spec) == 559_214_592  # bigscience/bloom-560m
    assert spec.layers[0].norm == "layernorm" and spec.tied_embeddings
    assert blocks(spec)[0].ffn_hidden_size == 4096


def test_qwen2_qkv_bias_only_and_tied(tmp_path: Path) -> None:
    spec = load_hf_config(write(tmp_path, QWEN25_05B))
    assert count_params(spec) == 494_032_768  # Qwen/Qwen2.5-0.5B
    block = blocks(spec)[0]
    assert block.qkv_bias and not block.out_bias and not block.mlp_bias
    assert block.sliding_window is None  # use_sliding_window is false
    assert spec.tied_embeddings and block.head_dim == 64


def test_qwen2_sliding_window_from_max_window_layers(tmp_path: Path) -> None:
    config = {**QWEN25_05B, "num_hidden_layers": 4, "use_sliding_window": True,
              "max_window_layers": 2, "sliding_window": 1024}
    windows = [b.sliding_window for b in blocks(load_hf_config(write(tmp_path, config)))]
    assert windows == [None, None, 1024, 1024]


def test_layer_types_override_the_family_rule(tmp_path: Path) -> None:
    config = {**MISTRAL_7B, "num_hidden_layers": 3,
              "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}
    spec = load_hf_config(write(tmp_path, config))
    assert [b.sliding_window for b in blocks(spec)] == [4096, None, 4096]
    assert spec.layers[1] is spec.layers[3]


# ---------------------------------------------------------------------------------------------
# Small synthetic configs
# ---------------------------------------------------------------------------------------------
TINY = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
        "max_position_embeddings": 512}


def test_llama_bias_keys(tmp_path: Path) -> None:
    config = {**TINY, "model_type": "llama", "attention_bias": True, "mlp_bias": True}
    block = blocks(load_hf_config(write(tmp_path, config)))[0]
    assert block.qkv_bias and block.out_bias and block.mlp_bias


def test_qwen2_moe_layout(tmp_path: Path) -> None:
    config = {**TINY, "model_type": "qwen2_moe", "num_experts": 4, "num_experts_per_tok": 2,
              "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
              "decoder_sparse_step": 1, "mlp_only_layers": [0]}
    spec = load_hf_config(write(tmp_path, config))
    layers = blocks(spec)
    assert [b.num_experts for b in layers] == [0, 4, 4, 4]
    dense, moe = layers[0], layers[1]
    assert dense.ffn_hidden_size == 128 and dense.shared_expert_ffn_hidden_size == 0
    assert (moe.ffn_hidden_size, moe.shared_expert_ffn_hidden_size, moe.moe_top_k) == (32, 48, 2)
    h = 64
    attention = 2 * h * 64 + 2 * h * 32 + 64 + 2 * 32  # q, o, k, v weights + q/k/v biases
    dense_params = attention + 3 * h * 128 + 2 * h
    moe_params = attention + h * 4 + 4 * 3 * h * 32 + 3 * h * 48 + 2 * h
    assert count_params(spec) == 2 * 1000 * h + h + dense_params + 3 * moe_params
    active = attention + h * 4 + 2 * 3 * h * 32 + 3 * h * 48 + 2 * h
    assert count_active_params(spec) == 2 * 1000 * h + h + dense_params + 3 * active


def test_qwen3_moe_sparse_step_and_head_dim(tmp_path: Path) -> None:
    config = {**TINY, "model_type": "qwen3_moe", "head_dim": 32, "num_experts": 8,
              "num_experts_per_tok": 2, "moe_intermediate_size": 16, "decoder_sparse_step": 2}
    layers = blocks(load_hf_config(write(tmp_path, config)))
    assert [b.num_experts for b in layers] == [0, 8, 0, 8]
    assert all(b.head_dim == 32 and b.shared_expert_ffn_hidden_size == 0 for b in layers)
    assert not layers[1].qkv_bias


def test_qwen3_head_dim_wider_than_hidden_over_heads(tmp_path: Path) -> None:
    config = {**TINY, "model_type": "qwen3", "head_dim": 32, "tie_word_embeddings": True}
    block = blocks(load_hf_config(write(tmp_path, config)))[0]
    assert block.num_heads * block.head_dim == 128 != block.hidden_size


def test_deepseek_v2_lite_layout_against_transformers(tmp_path: Path) -> None:
    """DeepSeek-V2-Lite's layout (no query latent, 2 shared experts, first block dense) and an MoE layer
    every ``moe_layer_freq``-th layer; the parameters equal transformers' DeepseekV2ForCausalLM (on meta)
    of the same file where the two agree on the MoE layout (transformers ignores moe_layer_freq)."""
    import torch
    import transformers

    config = {**TINY, "model_type": "deepseek_v2", "num_key_value_heads": 4, "q_lora_rank": None, "kv_lora_rank": 32,
              "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 8,
              "n_shared_experts": 2, "num_experts_per_tok": 2, "moe_intermediate_size": 24, "first_k_dense_replace": 1}
    layers = blocks(load_hf_config(write(tmp_path, config)))
    assert [b.num_experts for b in layers] == [0, 8, 8, 8]
    moe = layers[1]
    assert (moe.q_lora_rank, moe.kv_lora_rank, moe.head_dim, moe.v_head_dim, moe.shared_expert_ffn_hidden_size) == (None, 32, 24, 16, 48)
    with torch.device("meta"):
        model = transformers.DeepseekV2ForCausalLM(transformers.DeepseekV2Config(**{k: v for k, v in config.items() if k != "model_type"}))
    assert count_params(load_hf_config(write(tmp_path, config))) == sum(p.numel() for p in model.parameters())
    every_other = blocks(load_hf_config(write(tmp_path, {**config, "moe_layer_freq": 2})))
    assert [b.num_experts for b in every_other] == [0, 0, 8, 0]


def test_deepseek_bad_shared_experts_and_missing_mla_field(tmp_path: Path) -> None:
    config = {**TINY, "model_type": "deepseek_v3", "q_lora_rank": 16, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
              "qk_rope_head_dim": 8, "n_routed_experts": 8, "n_shared_experts": "one", "num_experts_per_tok": 2,
              "moe_intermediate_size": 24}
    message = one_line_error(write(tmp_path, config))
    assert "lacks 'v_head_dim'" in message and "'n_shared_experts' = 'one'" in message


def test_text_config_nesting(tmp_path: Path) -> None:
    config = {"model_type": "llava", "tie_word_embeddings": True, "vision_config": {"hidden_size": 8},
              "text_config": {**TINY, "model_type": "mistral_text"}}
    spec = load_hf_config(write(tmp_path, config))
    assert spec.tied_embeddings and blocks(spec)[0].hidden_size == 64


def test_folder_holding_config_json(tmp_path: Path) -> None:
    write(tmp_path, {**TINY, "model_type": "llama"})
    assert load_hf_config(tmp_path).name == tmp_path.name


# ---------------------------------------------------------------------------------------------
# Errors: one InputError line naming the file and the fix
# ---------------------------------------------------------------------------------------------
def one_line_error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_hf_config(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read model config" in one_line_error(tmp_path / "nope.json")


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama",\n  "hidden_size": }')
    message = one_line_error(path)
    assert "not valid JSON" in message and "line 2" in message and "meshplan list models" in message


def test_not_an_object(tmp_path: Path) -> None:
    assert "not an object" in one_line_error(write(tmp_path, [1, 2]))


def test_unknown_and_missing_model_type(tmp_path: Path) -> None:
    message = one_line_error(write(tmp_path, {**TINY, "model_type": "t5"}))
    assert "model_type 't5'" in message and "llama" in message and "meshplan list models" in message
    assert "lacks 'model_type'" in one_line_error(write(tmp_path, TINY))
    nested = {"model_type": "paligemma", "text_config": {**TINY, "model_type": "paligemma_text"}}
    assert "model_type 'paligemma'" in one_line_error(write(tmp_path, nested))


def test_missing_key_names_its_alias(tmp_path: Path) -> None:
    config = {k: v for k, v in GPT2_SMALL.items() if k != "n_embd"}
    message = one_line_error(write(tmp_path, config))
    assert "lacks 'hidden_size' (or its alias 'n_embd'); add it or use a preset" in message


def test_bad_values_are_collected_into_one_line(tmp_path: Path) -> None:
    config = {**TINY, "model_type": "llama", "hidden_size": "64", "num_key_value_heads": 3}
    message = one_line_error(write(tmp_path, config))
    assert "'hidden_size' = '64'" in message and "3 key/value heads" in message


def test_top_k_beyond_experts(tmp_path: Path) -> None:
    config = {**MIXTRAL_8X7B, "num_local_experts": 2, "num_experts_per_tok": 3}
    assert "num_experts_per_tok" in one_line_error(write(tmp_path, config))


def test_mixtral_num_experts_alias(tmp_path: Path) -> None:
    config = {k: v for k, v in MIXTRAL_8X7B.items() if k != "num_local_experts"}
    message = one_line_error(write(tmp_path, config))
    assert "lacks 'num_local_experts' (or its alias 'num_experts')" in message
    spec = load_hf_config(write(tmp_path, {**config, "num_experts": 8}))
    assert count_params(spec) == 46_702_792_704


def test_relu_and_squared_relu_are_told_apart(tmp_path: Path) -> None:
    """``hidden_act: relu2`` is transformers' ReLUSquaredActivation (4 bytes per FFN element kept),
    ``relu`` one tensor (2): ``costmodel.memory.mlp_bytes_per_ffn_element``."""
    for act in ("relu", "relu2"):
        config = {**GPT2_SMALL, "activation_function": act}
        assert blocks(load_hf_config(write(tmp_path, config, f"{act}.json")))[0].ffn_act == act
