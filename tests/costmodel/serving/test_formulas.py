"""Golden tests of the serving formulas against published numbers (each test names its source)."""

from __future__ import annotations

import pytest

from costmodel.serving.kvcache import kv_bytes_per_token, sequence_tokens
from costmodel.serving.shape import model_shape
from costmodel.serving.specs import (
    MXFP4_BYTES_PER_PARAM,
    NVFP4_BYTES_PER_PARAM,
    Instance,
    weight_bytes,
)
from costmodel.serving.moe import experts_touched
from costmodel.serving.step import block_weight_params, weights_bytes_per_gpu
from costmodel.specs import ModelSpec, TransformerLayer
from planner.intake.arguments import resolve_model_arg

GB = 1e9


def _llama2_7b() -> ModelSpec:
    """Llama 2 7B's blocks (meta-llama/Llama-2-7b-hf/config.json: 32 layers, 4096 wide, 32 MHA heads)."""
    block = TransformerLayer(hidden_size=4096, num_heads=32, num_kv_heads=32, head_dim=128, ffn_hidden_size=11008,
                             ffn_act="swiglu", norm="rmsnorm")
    return ModelSpec(name="llama2-7b", layers=(block,) * 32)


def test_kv_cache_of_llama2_7b_at_4k_tokens_is_2_gb() -> None:
    """NVIDIA, "Mastering LLM Techniques: Inference Optimization" (developer blog, 2023): Llama 2 7B in
    fp16, batch 1, 4096 tokens holds a 2 GB KV cache (2·L·h·2 bytes per token)."""
    per_token = kv_bytes_per_token(model_shape(_llama2_7b()), Instance(), 2.0)
    assert per_token == 2 * 32 * 4096 * 2
    assert per_token * 4096 / GB == pytest.approx(2.15, abs=0.01)


def test_llama3_70b_gqa_cache_is_320_kib_per_token_and_splits_over_tp() -> None:
    """Llama 3.1 70B: 80 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 327,680 bytes per token
    (Pope et al. MLSys'23 §2.1 formula); TP 8 leaves one KV head per GPU, TP 16 replicates it."""
    shape = model_shape(resolve_model_arg("llama3.1-70b"))
    assert kv_bytes_per_token(shape, Instance(), 2.0) == 327_680
    assert kv_bytes_per_token(shape, Instance(tp=8), 2.0) == 327_680 / 8
    assert kv_bytes_per_token(shape, Instance(tp=16), 2.0) == 327_680 / 8


def test_mla_caches_576_elements_per_token_and_layer() -> None:
    """DeepSeek-V2 (arXiv:2405.04434) Table 1: MLA caches (d_c + d_h^R)·l = 4.5·d_h·l elements, d_h = 128;
    every TP rank holds the whole latent."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    assert kv_bytes_per_token(shape, Instance(), 1.0) == 4.5 * 128 * 61
    assert kv_bytes_per_token(shape, Instance(tp=8), 1.0) == 4.5 * 128 * 61


def test_sliding_window_cache_is_eight_times_smaller_at_32k() -> None:
    """Mistral 7B (arXiv:2310.06825 §2): a 4096-token rolling buffer cuts the cache 8x at 32k tokens."""
    block = TransformerLayer(hidden_size=4096, num_heads=32, num_kv_heads=8, head_dim=128, ffn_hidden_size=14336,
                             ffn_act="swiglu", norm="rmsnorm", sliding_window=4096)
    full = block.model_copy(update={"sliding_window": None})
    windowed = kv_bytes_per_token(model_shape(ModelSpec(name="m", layers=(block,) * 32)), Instance(), 2.0, 32768)
    plain = kv_bytes_per_token(model_shape(ModelSpec(name="m", layers=(full,) * 32)), Instance(), 2.0, 32768)
    assert plain / windowed == pytest.approx(8.0)


def test_paged_blocks_round_up_to_the_block() -> None:
    """PagedAttention (Kwon et al. SOSP'23 §4.1): a 17-token sequence holds two 16-token blocks."""
    assert sequence_tokens(17, 16) == 32
    assert sequence_tokens(16, 16) == 16
    assert sequence_tokens(17, 1) == 17


def test_fp4_formats_carry_their_block_scales() -> None:
    """NVFP4 stores 4.5 bits per value (an FP8 scale per 16; NVIDIA NVFP4 blog), MXFP4 4.25 (an E8M0 scale
    per 32; OCP MX v1.0)."""
    assert NVFP4_BYTES_PER_PARAM * 8 == 4.5 and weight_bytes("fp4") == NVFP4_BYTES_PER_PARAM
    assert MXFP4_BYTES_PER_PARAM * 8 == 4.25 and weight_bytes("fp4", mx_blocks=True) == MXFP4_BYTES_PER_PARAM
    assert weight_bytes("fp8") == 1.0 and weight_bytes("bf16") == 2.0


def test_one_token_touches_top_k_experts_mixtral_active_params() -> None:
    """Mixtral 8x7B (arXiv:2401.04088 §2): 47B parameters, 13B active per token (top-2 of 8). A batch
    of one token streams only its two experts; a large batch streams all eight."""
    shape = model_shape(resolve_model_arg("mixtral-8x7b"))
    block = shape.blocks[0]
    assert experts_touched(block, 1) == pytest.approx(2.0)
    assert experts_touched(block, 10_000) == pytest.approx(8.0)
    active = sum(block_weight_params(b, Instance(), experts_touched(b, 1)) * b.count for b in shape.blocks)
    assert (active + shape.embedding_params + shape.head_params) / 1e9 == pytest.approx(12.9, abs=0.1)


def test_llama_405b_fp8_fits_one_h100_node_and_bf16_does_not() -> None:
    """Meta (Llama 3.1 release, 2024): the FP8 405B model runs on a single 8x H100 80GB node; BF16
    needs 810 GB of weights, more than the node's 640 GB."""
    shape = model_shape(resolve_model_arg("llama3.1-405b"))
    assert weights_bytes_per_gpu(shape, Instance(tp=8), "fp8") / 2**30 < 79.2 - 10
    assert weights_bytes_per_gpu(shape, Instance(tp=8), "bf16") / 2**30 > 79.2
