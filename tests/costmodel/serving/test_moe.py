"""MoE decode: distinct experts touched, the busiest EP rank, grouped-GEMM tile padding
(costmodel/serving/moe.py)."""

from __future__ import annotations

import pytest

from costmodel.serving.moe import (
    fused_moe_prefill_seconds,
    GROUPED_GEMM_TILE_ROWS,
    TRTLLM_TILE_ROWS,
    busiest_rank_experts,
    expected_max_normal,
    experts_touched,
    mxfp4_padding_factor,
    padded_expert_rows,
    routed_row_bytes,
)
from costmodel.serving.engines import DEFAULTS
from costmodel.serving.shape import model_shape
from costmodel.serving.specs import Instance
from planner.intake.arguments import resolve_model_arg

DEEPSEEK = next(b for b in model_shape(resolve_model_arg("deepseek-r1")).blocks if b.layer.is_moe)
GPT_OSS = model_shape(resolve_model_arg("gpt-oss-120b")).blocks[0]


def test_touched_experts_never_exceed_min_of_e_and_tokens_times_k() -> None:
    for tokens in (1, 4, 32, 256, 4096):
        touched = experts_touched(DEEPSEEK, tokens)
        assert touched <= min(256, tokens * 8) + 1e-9
    assert experts_touched(DEEPSEEK, 1) == pytest.approx(8.0)
    assert experts_touched(GPT_OSS, 64) == pytest.approx(128 * (1 - (1 - 4 / 128) ** 64))


def test_the_busiest_ep_rank_streams_more_than_the_mean_and_at_most_its_experts() -> None:
    inst = Instance(tp=8, ep=8, attention_dp=True)
    for tokens in (4, 32, 256):
        mean = experts_touched(DEEPSEEK, tokens) / 8
        assert mean < busiest_rank_experts(DEEPSEEK, inst, tokens) <= 32
    assert busiest_rank_experts(DEEPSEEK, Instance(tp=8), 32) == experts_touched(DEEPSEEK, 32)


def test_a_few_tokens_per_expert_cost_a_whole_tile() -> None:
    inst = Instance(tp=1)
    touched = experts_touched(GPT_OSS, 4)
    assert padded_expert_rows(GPT_OSS, inst, 4, touched) == pytest.approx(touched * GROUPED_GEMM_TILE_ROWS)
    big = experts_touched(GPT_OSS, 8192)
    assert padded_expert_rows(GPT_OSS, inst, 8192, big) == pytest.approx(8192 * 4, rel=0.05)


def test_expected_maximum_of_normals_matches_harters_tables() -> None:
    """Harter (Biometrika 1961): the largest of 2, 4, 8 standard normals averages 0.564, 1.029, 1.424."""
    for n, exact in ((2, 0.564), (4, 1.029), (8, 1.424)):
        assert expected_max_normal(n) == pytest.approx(exact, abs=0.03)
    assert expected_max_normal(1) == 0.0


def test_routed_rows_cross_hbm_at_full_width_on_every_gpu() -> None:
    """tokens x k rows of hidden elements per GPU, 5 bytes each, whatever the experts' TP split; EP
    divides the rows over its ranks; dense blocks route nothing."""
    shape = model_shape(resolve_model_arg("deepseek-r1"))
    moe = shape.blocks[-1]
    rows = 100 * moe.layer.moe_top_k * moe.layer.hidden_size * 5.0
    assert routed_row_bytes(moe, Instance(tp=8), 100) == pytest.approx(rows)
    assert routed_row_bytes(moe, Instance(tp=1), 100) == pytest.approx(rows)
    assert routed_row_bytes(moe, Instance(tp=8, ep=8), 100) == pytest.approx(rows / 8)
    assert routed_row_bytes(shape.blocks[0], Instance(tp=8), 100) == 0.0


def test_trtllm_gen_tiles_follow_the_tokens_per_expert() -> None:
    """calculate_tile_tokens_dim: next power of two of the tokens per expert within [8, 64]."""
    inst = Instance(tp=1)
    touched = experts_touched(GPT_OSS, 4)  # 16 tokens over about 16 experts: one token each
    assert padded_expert_rows(GPT_OSS, inst, 4, touched, trtllm_tiles=True) == pytest.approx(touched * TRTLLM_TILE_ROWS[0])
    touched = experts_touched(GPT_OSS, 640)  # 20 tokens per expert: a 32-row tile
    assert padded_expert_rows(GPT_OSS, inst, 640, touched, trtllm_tiles=True) == pytest.approx(touched * 32)
    touched = experts_touched(GPT_OSS, 8192)  # 256 per expert: 64-row tiles, no padding
    assert padded_expert_rows(GPT_OSS, inst, 8192, touched, trtllm_tiles=True) == pytest.approx(8192 * 4, rel=0.01)


def test_mxfp4_padding_follows_each_engines_create_weights() -> None:
    """gpt-oss (hidden 2880, expert width 2880): vLLM's 64-multiple leaves tp 1-2 whole and pads a
    tp 8 shard 360 -> 384; TensorRT-LLM's Triton MoE pads 2880 -> 3072 before an 8-way split, the
    hidden width to 2944 as K and 3072 as N."""
    vllm, trt = DEFAULTS["vllm"].mxfp4_padding, DEFAULTS["trtllm"].mxfp4_padding
    assert mxfp4_padding_factor(GPT_OSS, 1, vllm) == pytest.approx(1.0)
    assert mxfp4_padding_factor(GPT_OSS, 8, vllm) == pytest.approx(384 / 360)
    expected = (2 * 384 * 2944 + 384 * 3072) / (3 * 2880 * 2880 / 8)
    assert mxfp4_padding_factor(GPT_OSS, 8, trt) == pytest.approx(expected)
    assert mxfp4_padding_factor(GPT_OSS, 1, (1, 1, 1, False)) == pytest.approx(1.0)
    assert mxfp4_padding_factor(DEEPSEEK, 4, trt) >= 1.0


def test_a_measured_fused_moe_prefill_rate_prices_the_routed_flops_at_it() -> None:
    """aiter's tuned block-scaled FP8 MoE reaches 937.26 TFLOP/s at 8192 tokens on MI325X: 1e15 routed
    FLOPs take 1.067 ms on top of the dense GEMMs' time; no measured rate adds no bound."""
    assert fused_moe_prefill_seconds(2e-4, 1e15, 937.26) == pytest.approx(2e-4 + 1e15 / 937.26e12)
    assert fused_moe_prefill_seconds(2e-4, 1e15, None) == 0.0
    assert fused_moe_prefill_seconds(2e-4, 0.0, 937.26) == 0.0
