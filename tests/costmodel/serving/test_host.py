"""The engine's host work per step: TensorRT-LLM's per-request figure, attention DP, the step bound."""

from __future__ import annotations

import dataclasses

import pytest

from costmodel.serving.deployment import Workload, aggregated, disaggregated
from costmodel.serving.engines import DEFAULTS, TRTLLM_HOST_US_PER_REQUEST
from costmodel.serving.host import host_step_seconds, requests_per_rank, token_seconds
from costmodel.serving.shape import model_shape
from costmodel.serving.specs import Instance, LowPrecisionRates, ServingEfficiency
from costmodel.serving.step import Hardware
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

LLAMA8B = model_shape(resolve_model_arg("llama3.1-8b"))
WORK = Workload(1024, 1024, "fp8", 1.0)


def _hw(engine: str = "trtllm") -> Hardware:
    return Hardware(resolve_cluster_arg("dgx-b200"), LowPrecisionRates(), ServingEfficiency(), engine=DEFAULTS[engine])


def test_trtllm_host_step_reproduces_the_measured_iteration() -> None:
    """NVIDIA/TensorRT-LLM PR 10273: 45.11 ms of host time per iteration with 1,536 requests on
    each of two attention-DP ranks (3,072 in flight)."""
    inst = Instance(tp=2, attention_dp=True)
    assert requests_per_rank(inst, 3072) == 1536
    assert host_step_seconds(DEFAULTS["trtllm"], inst, 3072) == pytest.approx(45.11e-3, rel=1e-9)
    assert TRTLLM_HOST_US_PER_REQUEST == pytest.approx(29.37, abs=0.01)


def test_tensor_parallel_ranks_each_walk_the_whole_batch() -> None:
    """Every TP rank runs the executor loop over all requests; attention DP splits them."""
    engine = DEFAULTS["trtllm"]
    split = host_step_seconds(engine, Instance(tp=4, attention_dp=True), 512)
    assert host_step_seconds(engine, Instance(tp=4), 512) == pytest.approx(4 * split)


def test_engines_without_a_published_figure_add_nothing() -> None:
    assert host_step_seconds(DEFAULTS["vllm"], Instance(), 4096) == 0.0
    assert host_step_seconds(DEFAULTS["sglang"], Instance(), 4096) == 0.0


def test_token_time_is_the_slower_of_gpu_and_host() -> None:
    assert token_seconds(2.0, 100, 0.01) == pytest.approx(0.02)
    assert token_seconds(2.0, 100, 0.05) == pytest.approx(0.05)


def test_a_large_trtllm_batch_of_a_small_model_is_host_bound() -> None:
    """Llama 3.1 8B on one B200 with as many sequences as its KV cache holds (over a thousand): the
    GPU step is shorter than that many x 29.4 µs, so TPOT is the host's step and the rate follows
    from it; without the host term it is faster."""
    hw = _hw()
    est = aggregated(hw, LLAMA8B, Instance(), 1, WORK, hw.engine, 2048)
    batch = est.concurrency
    host = batch * TRTLLM_HOST_US_PER_REQUEST * 1e-6
    assert batch > 1000
    assert est.tpot_s == pytest.approx(host, rel=1e-9)
    assert est.output_tokens_per_s == pytest.approx(batch / host, rel=1e-9)
    free = dataclasses.replace(hw.engine, host_us_per_request=0.0)
    gpu_only = aggregated(dataclasses.replace(hw, engine=free), LLAMA8B, Instance(), 1, WORK, free, 2048)
    assert gpu_only.tpot_s < host and gpu_only.output_tokens_per_s > est.output_tokens_per_s


def test_a_small_batch_is_not_host_bound() -> None:
    hw = _hw()
    est = aggregated(hw, LLAMA8B, Instance(), 1, WORK, hw.engine, 16)
    free = dataclasses.replace(hw.engine, host_us_per_request=0.0)
    assert est.tpot_s == aggregated(dataclasses.replace(hw, engine=free), LLAMA8B, Instance(), 1, WORK, free, 16).tpot_s


def test_disaggregated_decode_step_waits_for_the_host() -> None:
    hw = _hw()
    est = disaggregated(hw, LLAMA8B, Instance(), 1, Instance(), 1, WORK, hw.engine, 2048)
    assert est.concurrency > 1000
    assert est.tpot_s == pytest.approx(est.concurrency * TRTLLM_HOST_US_PER_REQUEST * 1e-6, rel=1e-9)
