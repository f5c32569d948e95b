"""Hugging Face ``config.json`` contents for the corpus's transformers families, full size and small.

Full sizes are the published configs' architecture fields (the repository named on each entry);
the small versions keep every layout choice (GQA ratio, biases, tying, experts, MLA ranks) and
shrink the widths, so a real CPU run is quick. The corpus traces them with ``--trace`` (transformers
builds the model on meta) and compares with the same file read as numbers (``--model config.json``).
"""

from __future__ import annotations

from typing import Any

Config = dict[str, Any]

FULL: dict[str, Config] = {
    # openai-community/gpt2-medium/config.json
    "hf_gpt2": dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=1024, n_layer=24, n_head=16,
                    vocab_size=50257, n_positions=1024, n_inner=None, activation_function="gelu_new"),
    # meta-llama/Llama-2-7b-hf/config.json
    "hf_llama": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096, intermediate_size=11008,
                     num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                     max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False),
    # mistralai/Mistral-7B-v0.1/config.json (sliding window 4096)
    "hf_mistral": dict(model_type="mistral", architectures=["MistralForCausalLM"], hidden_size=4096,
                       intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                       vocab_size=32000, max_position_embeddings=32768, sliding_window=4096, tie_word_embeddings=False),
    # mistralai/Mixtral-8x7B-v0.1/config.json
    "hf_mixtral": dict(model_type="mixtral", architectures=["MixtralForCausalLM"], hidden_size=4096,
                       intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                       num_local_experts=8, num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=32768,
                       sliding_window=None, tie_word_embeddings=False),
    # Qwen/Qwen1.5-MoE-A2.7B/config.json (Qwen2-MoE: 60 experts, top-4, a gated shared expert)
    "hf_qwen2_moe": dict(model_type="qwen2_moe", architectures=["Qwen2MoeForCausalLM"], hidden_size=2048,
                         intermediate_size=5632, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                         num_experts=60, num_experts_per_tok=4, num_hidden_layers=24, num_attention_heads=16,
                         num_key_value_heads=16, vocab_size=151936, max_position_embeddings=8192,
                         decoder_sparse_step=1, norm_topk_prob=False, use_sliding_window=False,
                         tie_word_embeddings=False),
    # Qwen/Qwen3-30B-A3B/config.json (128 experts, top-8, q/k norms, head_dim 128)
    "hf_qwen3_moe": dict(model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], hidden_size=2048,
                         intermediate_size=6144, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                         num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                         vocab_size=151936, max_position_embeddings=40960, decoder_sparse_step=1,
                         norm_topk_prob=True, tie_word_embeddings=False),
    # deepseek-ai/DeepSeek-V3/config.json (MLA, 1 shared + 256 routed experts, top-8, 3 dense blocks first)
    "hf_deepseek_v3": dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"], hidden_size=7168,
                           intermediate_size=18432, moe_intermediate_size=2048, n_routed_experts=256,
                           n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3, num_hidden_layers=61,
                           num_attention_heads=128, num_key_value_heads=128, q_lora_rank=1536, kv_lora_rank=512,
                           qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_group=8, topk_group=4,
                           vocab_size=129280, max_position_embeddings=163840, tie_word_embeddings=False),
    # google-t5/t5-base/config.json
    "hf_t5": dict(model_type="t5", architectures=["T5ForConditionalGeneration"], d_model=768, d_ff=3072, d_kv=64,
                  num_heads=12, num_layers=12, num_decoder_layers=12, vocab_size=32128,
                  feed_forward_proj="relu", tie_word_embeddings=True),
    # google-bert/bert-base-uncased/config.json
    "hf_bert": dict(model_type="bert", architectures=["BertForMaskedLM"], hidden_size=768, intermediate_size=3072,
                    num_hidden_layers=12, num_attention_heads=12, vocab_size=30522, max_position_embeddings=512,
                    type_vocab_size=2),
    # google/vit-base-patch16-224/config.json
    "hf_vit": dict(model_type="vit", architectures=["ViTForImageClassification"], hidden_size=768,
                   intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, image_size=224,
                   patch_size=16, num_labels=1000),
    # google/gemma-3-4b-pt/config.json "text_config" as a top-level gemma3_text file (five sliding-window
    # layers of 1,024 to one global, head_dim 256, GQA 8/4)
    "hf_gemma3": dict(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], hidden_size=2560,
                      intermediate_size=10240, num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4,
                      head_dim=256, vocab_size=262208, max_position_embeddings=131072, sliding_window=1024,
                      sliding_window_pattern=6, query_pre_attn_scalar=256, hidden_activation="gelu_pytorch_tanh",
                      tie_word_embeddings=True),
    # meta-llama/Llama-4-Scout-17B-16E/config.json "text_config" (chunked attention of 8,192 tokens on three
    # layers of four, 16 experts top-1 with a shared expert on every layer), as a top-level llama4_text file
    "hf_llama4": dict(model_type="llama4_text", architectures=["Llama4ForCausalLM"], hidden_size=5120,
                      intermediate_size=8192, intermediate_size_mlp=16384, num_hidden_layers=48,
                      num_attention_heads=40, num_key_value_heads=8, head_dim=128, num_local_experts=16,
                      num_experts_per_tok=1, interleave_moe_layer_step=1, vocab_size=202048,
                      max_position_embeddings=10485760, attention_chunk_size=8192, use_qk_norm=True,
                      no_rope_layer_interval=4, tie_word_embeddings=False),
    # openai/gpt-oss-20b/config.json (sliding 128 and full layers alternating, attention sinks, 32 experts top-4)
    "hf_gpt_oss": dict(model_type="gpt_oss", architectures=["GptOssForCausalLM"], hidden_size=2880,
                       intermediate_size=2880, num_hidden_layers=24, num_attention_heads=64, num_key_value_heads=8,
                       head_dim=64, num_local_experts=32, num_experts_per_tok=4, vocab_size=201088,
                       max_position_embeddings=131072, sliding_window=128, attention_bias=True,
                       layer_types=["sliding_attention", "full_attention"] * 12, tie_word_embeddings=False),
    # openai/whisper-small/config.json (an encoder of 1,500 frames from 80 mel bins, a decoder of up to 448 tokens)
    "hf_whisper": dict(model_type="whisper", architectures=["WhisperForConditionalGeneration"], d_model=768,
                       encoder_layers=12, decoder_layers=12, encoder_attention_heads=12, decoder_attention_heads=12,
                       encoder_ffn_dim=3072, decoder_ffn_dim=3072, vocab_size=51865, num_mel_bins=80,
                       max_source_positions=1500, max_target_positions=448, tie_word_embeddings=True),
    # state-spaces/mamba-370m-hf/config.json (48 selective state-space blocks, no attention)
    "hf_mamba": dict(model_type="mamba", architectures=["MambaForCausalLM"], hidden_size=1024, num_hidden_layers=48,
                     vocab_size=50280, state_size=16, expand=2, conv_kernel=4, time_step_rank=64,
                     tie_word_embeddings=True),
}

_SMALL_COMMON: Config = dict(vocab_size=512, max_position_embeddings=512)
SMALL: dict[str, Config] = {
    "hf_gpt2": FULL["hf_gpt2"] | dict(n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=256),
    "hf_llama": FULL["hf_llama"] | _SMALL_COMMON | dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                                        num_attention_heads=4, num_key_value_heads=4),
    "hf_mistral": FULL["hf_mistral"] | _SMALL_COMMON | dict(hidden_size=64, intermediate_size=224, num_hidden_layers=2,
                                                            num_attention_heads=8, num_key_value_heads=2,
                                                            sliding_window=16),
    "hf_mixtral": FULL["hf_mixtral"] | _SMALL_COMMON | dict(hidden_size=64, intermediate_size=224, num_hidden_layers=2,
                                                            num_attention_heads=8, num_key_value_heads=2),
    "hf_qwen2_moe": FULL["hf_qwen2_moe"] | _SMALL_COMMON | dict(
        hidden_size=64, intermediate_size=176, moe_intermediate_size=32, shared_expert_intermediate_size=176,
        num_experts=12, num_experts_per_tok=4, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4),
    "hf_qwen3_moe": FULL["hf_qwen3_moe"] | _SMALL_COMMON | dict(
        hidden_size=64, intermediate_size=192, moe_intermediate_size=24, num_experts=16, num_experts_per_tok=4,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, head_dim=16),
    "hf_deepseek_v3": FULL["hf_deepseek_v3"] | _SMALL_COMMON | dict(
        hidden_size=64, intermediate_size=160, moe_intermediate_size=24, n_routed_experts=16, n_shared_experts=1,
        num_experts_per_tok=4, first_k_dense_replace=1, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16, n_group=4, topk_group=2),
    "hf_t5": FULL["hf_t5"] | dict(d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2, num_decoder_layers=2,
                                  vocab_size=512),
    "hf_bert": FULL["hf_bert"] | _SMALL_COMMON | dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                                                      num_attention_heads=4),
    "hf_vit": FULL["hf_vit"] | dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                                    num_attention_heads=4, image_size=32, patch_size=8, num_labels=10),
    "hf_gemma3": FULL["hf_gemma3"] | _SMALL_COMMON | dict(hidden_size=64, intermediate_size=176, num_hidden_layers=6,
                                                          num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                                          sliding_window=8, sliding_window_pattern=3,
                                                          query_pre_attn_scalar=16),
    "hf_llama4": FULL["hf_llama4"] | _SMALL_COMMON | dict(
        hidden_size=64, intermediate_size=96, intermediate_size_mlp=176, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, num_local_experts=4, attention_chunk_size=8),
    "hf_gpt_oss": FULL["hf_gpt_oss"] | _SMALL_COMMON | dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"]),
    "hf_whisper": FULL["hf_whisper"] | dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                            vocab_size=512, num_mel_bins=16, max_source_positions=40,
                                            max_target_positions=128, pad_token_id=0, bos_token_id=1,
                                            eos_token_id=2, decoder_start_token_id=1),
    "hf_mamba": FULL["hf_mamba"] | dict(hidden_size=64, num_hidden_layers=2, vocab_size=512, state_size=8,
                                        time_step_rank=8),
}
