"""Steady state of whole deployments: Little's law, published throughputs, disaggregation, comm."""

from __future__ import annotations

import pytest

from costmodel.comm import all_reduce, place_group, send_recv
from costmodel.serving.allreduce import decode_all_reduce, nccl_ring
from costmodel.serving.comm import kv_transfer
from costmodel.serving.deployment import (
    Workload,
    admission_wait,
    aggregated,
    disaggregated,
    prefill_per_request,
    prompts_per_prefill_step,
)
from costmodel.serving.engines import DEFAULTS
from costmodel.serving.shape import model_shape
from costmodel.serving.specs import Instance, LowPrecisionRates, ServingEfficiency
from costmodel.serving.step import Hardware, decode_step_parts, decode_step_time, prefill_time, weights_bytes_per_gpu
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg


def _hw(cluster: str, rates: LowPrecisionRates | None = None) -> Hardware:
    return Hardware(resolve_cluster_arg(cluster), rates or LowPrecisionRates(), ServingEfficiency())


LLAMA8B = model_shape(resolve_model_arg("llama3.1-8b"))
LLAMA70B = model_shape(resolve_model_arg("llama3.3-70b"))


@pytest.mark.parametrize(("shape", "cluster", "tp", "isl", "osl", "measured"), [
    (LLAMA8B, "dgx-h100", 1, 128, 128, 28312.0),
    (LLAMA8B, "dgx-h200", 1, 1000, 1000, 17744.0),
    (LLAMA70B, "dgx-h100", 2, 1000, 1000, 2102.5),
    (LLAMA70B, "dgx-h200", 1, 2048, 2048, 2003.0),
])
def test_max_throughput_matches_the_tensorrt_llm_table(shape, cluster, tp, isl, osl, measured) -> None:
    """NVIDIA TensorRT-LLM performance overview (docs/source/performance/perf-overview.md @00f37686aa85,
    FP8, trtllm-bench max throughput): output tokens/s per GPU within the 25 % p90 target."""
    est = aggregated(_hw(cluster), shape, Instance(tp=tp), 1, Workload(isl, osl, "fp8", 1.0), DEFAULTS["trtllm"])
    assert est.per_gpu == pytest.approx(measured, rel=0.25)


def test_littles_law_holds_in_steady_state() -> None:
    """Little (1961): sequences in flight = request rate x time each request spends in the system."""
    work = Workload(1000, 500, "fp8", 1.0)
    est = aggregated(_hw("dgx-h100"), LLAMA70B, Instance(tp=4), 2, work, DEFAULTS["vllm"], concurrency=256)
    requests_per_s = est.output_tokens_per_s / work.osl
    assert est.concurrency == pytest.approx(requests_per_s * est.tpot_s * work.osl)


def test_bigger_batches_trade_speed_per_user_for_throughput() -> None:
    hw, work = _hw("dgx-h100"), Workload(1000, 1000, "fp8", 1.0)
    small = aggregated(hw, LLAMA70B, Instance(tp=4), 1, work, DEFAULTS["vllm"], concurrency=8)
    large = aggregated(hw, LLAMA70B, Instance(tp=4), 1, work, DEFAULTS["vllm"], concurrency=256)
    assert large.per_gpu > 5 * small.per_gpu and large.tpot_s > small.tpot_s


def test_decode_at_batch_one_streams_the_weights() -> None:
    """Batch-1 decode is memory bound: at least the weight shard over HBM bandwidth (8 GB fp8 at 3.35 TB/s)."""
    t = decode_step_time(_hw("dgx-h100"), LLAMA8B, Instance(), 1, 1000, "fp8", 1.0)
    assert 8.0e9 / 3.35e12 < t < 3 * 8.0e9 / 3.35e12


def test_disaggregated_runs_at_the_slower_side() -> None:
    hw, work = _hw("dgx-h100"), Workload(4000, 200, "fp8", 1.0)
    few = disaggregated(hw, LLAMA70B, Instance(tp=4), 1, Instance(tp=4), 1, work, DEFAULTS["vllm"])
    more = disaggregated(hw, LLAMA70B, Instance(tp=4), 2, Instance(tp=4), 1, work, DEFAULTS["vllm"])
    assert few.prefill_share == 1.0  # long prompts, short answers: prefill bound
    assert more.output_tokens_per_s > few.output_tokens_per_s
    assert few.tpot_s == pytest.approx(more.tpot_s)


def test_tp_all_reduce_across_nodes_is_the_training_models_ring() -> None:
    cluster = resolve_cluster_arg("dgx-h100")
    assert decode_all_reduce(cluster, "vllm", 16, 64, 8192) == all_reduce(cluster, place_group(16, 1, 8), 64 * 8192 * 2.0)
    assert nccl_ring(cluster, 16, 1e6) == all_reduce(cluster, place_group(16, 1, 8), 1e6)
    assert decode_all_reduce(cluster, "trtllm", 1, 64, 8192) == 0.0


def test_kv_transfer_of_a_70b_prompt_over_the_network() -> None:
    """1000 prompt tokens of Llama 3.1 70B in bf16 are 327.68 MB; 4 senders on 50 GB/s NICs (DGX H100
    ConnectX-7 400 Gb/s) at 90 % move them in about 1.8 ms."""
    cluster = resolve_cluster_arg("dgx-h100")
    t = kv_transfer(cluster, 327.68e6, 4)
    assert t == send_recv(cluster, 327.68e6 / 4, True)
    assert t == pytest.approx(327.68e6 / 4 / (50e9 * 0.9), rel=0.02)


def test_fp4_without_fp4_tensor_cores_is_weight_only_mxfp4() -> None:
    """Hopper runs FP4 checkpoints weight-only (gpt-oss's MXFP4 experts): MXFP4 bytes, bf16 GEMMs."""
    work = Workload(128, 128, "fp4", 1.0)
    hopper = aggregated(_hw("dgx-h100"), LLAMA8B, Instance(), 1, work, DEFAULTS["vllm"])
    mx = weights_bytes_per_gpu(LLAMA8B, Instance(), "fp4", True)
    assert hopper.fits and hopper.decode.memory.weights == pytest.approx(mx)
    est = aggregated(_hw("dgx-b200", LowPrecisionRates(peak_fp4_tflops=9000)), LLAMA8B, Instance(), 1, work, DEFAULTS["vllm"])
    assert est.fits and est.per_gpu > 0


def test_weights_that_do_not_fit_leave_no_kv_cache() -> None:
    shape = model_shape(resolve_model_arg("llama3.1-405b"))
    est = aggregated(_hw("dgx-h100"), shape, Instance(tp=2), 1, Workload(1000, 1000, "bf16", 2.0), DEFAULTS["vllm"])
    assert not est.fits and est.decode.memory.shortfall / 2**30 > 300


def test_prefill_queue_is_m_d_1() -> None:
    """Pollaczek-Khinchine for deterministic service (Kleinrock vol. 1 §5.6): at half load a server of
    one request per second keeps a prompt waiting 0.5 s on average; at full load, forever."""
    from costmodel.serving.deployment import prefill_queue_wait

    assert prefill_queue_wait(0.5, 1.0) == pytest.approx(0.5)
    assert prefill_queue_wait(0.9, 1.0) == pytest.approx(4.5)
    assert prefill_queue_wait(1.0, 1.0) == float("inf")


def test_disaggregated_ttft_includes_the_prefill_queue() -> None:
    hw, work = _hw("dgx-h100"), Workload(4000, 200, "fp8", 1.0)
    est = disaggregated(hw, LLAMA70B, Instance(tp=4), 1, Instance(tp=4), 1, work, DEFAULTS["vllm"])
    alone = disaggregated(hw, LLAMA70B, Instance(tp=4), 1, Instance(tp=4), 1, work, DEFAULTS["vllm"], concurrency=1)
    assert est.ttft_s > 2 * alone.ttft_s  # loaded to 90 %: the queue dominates


def test_requests_beyond_the_kv_cache_wait_for_a_slot_by_littles_law() -> None:
    """A closed-loop client with more requests outstanding than the KV cache holds: the rate stays
    that of the sequences that fit, and each request's TTFT grows by its wait for a slot, (asked −
    running) / request rate (Little 1961), which by Little's law for the whole system makes the
    time each request spends there equal asked / request rate."""
    assert admission_wait(None, 8, 1.0) == 0.0 and admission_wait(8, 8, 1.0) == 0.0
    assert admission_wait(40, 8, 4.0) == pytest.approx(8.0)
    hw, work = _hw("dgx-h100"), Workload(8192, 1024, "fp8", 1.0)
    fits = aggregated(hw, LLAMA70B, Instance(tp=2), 1, work, DEFAULTS["vllm"])
    asked = 3 * fits.concurrency
    over = aggregated(hw, LLAMA70B, Instance(tp=2), 1, work, DEFAULTS["vllm"], concurrency=asked)
    assert over.concurrency == fits.concurrency
    assert over.output_tokens_per_s == pytest.approx(fits.output_tokens_per_s)
    requests_per_s = over.output_tokens_per_s / work.osl
    in_system = over.ttft_s - fits.ttft_s + over.tpot_s * work.osl
    assert in_system == pytest.approx(asked / requests_per_s)


def test_a_prefill_step_carries_the_prompts_that_arrived_since_the_last_step() -> None:
    """Little's law: b sequences of osl steps each are replaced at b/osl per step, so below osl in flight a
    prefill step carries one prompt and pays its weight reads alone; at 4 x osl it carries four."""
    assert prompts_per_prefill_step(128, 1024) == 1.0
    assert prompts_per_prefill_step(4096, 1024) == 4.0
    hw, work, inst = _hw("dgx-h100"), Workload(1024, 1024, "fp8", 1.0), Instance(tp=4)
    alone = prefill_time(hw, LLAMA70B, inst, 1024, 1024, "fp8")
    assert prefill_per_request(hw, LLAMA70B, inst, work, 1.0, DEFAULTS["vllm"]) == pytest.approx(alone)
    four = prefill_time(hw, LLAMA70B, inst, 4096, 1024, "fp8") / 4
    assert prefill_per_request(hw, LLAMA70B, inst, work, 4.0, DEFAULTS["vllm"]) == pytest.approx(four)
    assert four < alone


def test_aggregated_cycle_prices_one_prompt_per_prefill_step_below_osl_in_flight() -> None:
    """128 sequences of 1,024 tokens: the cycle is osl decode steps plus 128 prefills of one prompt each."""
    hw, work, inst = _hw("dgx-h100"), Workload(1024, 1024, "fp8", 1.0), Instance(tp=4)
    est = aggregated(hw, LLAMA70B, inst, 1, work, DEFAULTS["vllm"], concurrency=128)
    step = decode_step_parts(hw, LLAMA70B, inst, 128, 1024 + 512, "fp8", 1.0).total
    pre = prefill_time(hw, LLAMA70B, inst, 1024, 1024, "fp8") + hw.efficiency.request_overhead_us * 1e-6
    assert est.tpot_s == pytest.approx((1024 * step + 128 * pre) / 1024)
