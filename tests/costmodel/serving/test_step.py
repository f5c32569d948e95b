"""Prefill and decode step terms against published rules and the training model's own functions."""

from __future__ import annotations

import pytest

from costmodel.comm import all_to_all, place_group, send_recv
from costmodel.kernels import gemm_time
from costmodel.serving.comm import ep_all_to_all, pp_hand_off
from costmodel.serving.shape import block_forward_flops, model_shape
from costmodel.serving.specs import Instance, LowPrecisionRates, ServingEfficiency
from costmodel.serving.step import (
    Hardware,
    decode_step_parts,
    gemm_speedup,
    prefill_time,
)
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

H100 = Hardware(resolve_cluster_arg("dgx-h100"), LowPrecisionRates(), ServingEfficiency())
LLAMA70B = model_shape(resolve_model_arg("llama3.1-70b"))


def test_forward_gemms_cost_two_flops_per_parameter_per_token() -> None:
    """Kaplan et al. 2020 (arXiv:2001.08361 §2.1): a forward pass costs about 2N FLOPs per token for N
    non-embedding parameters (plus the attention term)."""
    gemm = sum(block_forward_flops(b, 1.0, 1.0)[0] * b.count for b in LLAMA70B.blocks)
    block_params = sum((b.attention_params + b.dense_params) * b.count for b in LLAMA70B.blocks)
    assert gemm == pytest.approx(2 * block_params, rel=0.001)


def test_prefill_is_no_faster_than_the_fp8_peak() -> None:
    """A 70B prefill of 8,192 tokens on 4 H100s: at least 2·N·tokens / (4 x 1979 TFLOP/s FP8 peak)."""
    t = prefill_time(H100, LLAMA70B, Instance(tp=4), 8192, 8192, "fp8")
    floor = 2 * 70.6e9 * 8192 / (4 * 1979e12)
    assert floor < t < 3 * floor


def test_fp8_gemms_run_at_the_measured_fp8_over_bf16_ratio() -> None:
    """MAMF (stas00/ml-engineering): H100 FP8 1402.6 / BF16 794.5 = 1.77."""
    assert gemm_speedup(H100, "fp8") == pytest.approx(1402.6 / 794.5, rel=0.005)
    assert gemm_time(H100.cluster, 1e12, gemm_speedup(H100, "fp8")) < gemm_time(H100.cluster, 1e12)


def test_decode_is_memory_bound_at_small_batch_and_compute_bound_at_large() -> None:
    small = decode_step_parts(H100, LLAMA70B, Instance(tp=4), 1, 2000, "fp8", 1.0)
    large = decode_step_parts(H100, LLAMA70B, Instance(tp=4), 4096, 2000, "fp8", 1.0)
    assert small.traffic > small.compute and large.compute > 100 * small.compute


def test_ep_dispatch_and_combine_are_the_training_all_to_all() -> None:
    """DeepSeek-V3 (arXiv:2412.19437 §3.3.2): dispatch in FP8 (1 byte), combine in BF16 (2 bytes)."""
    cluster = H100.cluster
    group = place_group(8, 1, 8)
    expected = all_to_all(cluster, group, 32 * 8 * 7168 * 1.0) + all_to_all(cluster, group, 32 * 8 * 7168 * 2.0)
    assert ep_all_to_all(cluster, 8, 32, 7168, 8) == expected
    assert ep_all_to_all(cluster, 1, 32, 7168, 8) == 0.0


def test_pipeline_hand_off_is_one_send() -> None:
    assert pp_hand_off(H100.cluster, 64, 8192) == send_recv(H100.cluster, 64 * 8192 * 2.0, False)


def test_pipeline_stages_multiply_tpot_by_their_micro_batches() -> None:
    one = decode_step_parts(H100, LLAMA70B, Instance(tp=4), 64, 2000, "fp8", 1.0).total
    two = decode_step_parts(H100, LLAMA70B, Instance(tp=4, pp=2), 64, 2000, "fp8", 1.0).total
    assert 0.5 * one < two < 1.5 * one
