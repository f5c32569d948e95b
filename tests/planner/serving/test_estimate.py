"""``planner.serve_estimate``: the --json keys, bad input in one line, the weight shortfall."""

from __future__ import annotations

import json

import pytest

import planner
from planner.errors import InputError

KEYS = {"output_tokens_per_s", "output_tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_ms", "tpot_ms",
        "concurrency", "kv_cache_gib", "max_concurrency", "memory_breakdown_gib", "fits", "bottleneck", "assumptions"}
BASE = dict(model="llama3.1-70b", cluster="dgx-h100", gpus=8, isl=1000, osl=1000, precision="fp8")


def test_result_has_the_issue_keys() -> None:
    result = planner.serve_estimate(**BASE, tp=4).model_dump()
    assert KEYS <= set(result)
    assert set(result["memory_breakdown_gib"]) == {"weights", "kv_cache", "activations_workspace", "runtime"}
    assert result["bottleneck"] in ("compute", "memory bandwidth", "communication")
    assert result["output_tokens_per_s"] == pytest.approx(8 * result["output_tokens_per_s_per_gpu"], rel=1e-6)


def test_same_inputs_give_identical_json() -> None:
    first = json.dumps(planner.serve_estimate(**BASE, tp=4).model_dump(), sort_keys=True)
    assert first == json.dumps(planner.serve_estimate(**BASE, tp=4).model_dump(), sort_keys=True)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(tp=3), "tp 3 does not divide the 64 attention heads"),
    (dict(tp=4, engine="tgi"), "unknown engine 'tgi'"),
    (dict(tp=16), "16 GPUs per replica does not divide 8 GPUs"),
    (dict(prefill_workers=2, prefill_tp=4, decode_workers=2, decode_tp=4), "= 16 GPUs, more than the 8 given"),
    (dict(tp=4, prefill_workers=1, prefill_tp=4, decode_workers=1, decode_tp=4), "--tp describes an aggregated"),
    (dict(tp=4, ep=2), "needs a mixture-of-experts model"),
    (dict(tp=4, concurrency=0), "concurrency must be a positive integer"),
])
def test_bad_input_is_one_line(kwargs, fragment) -> None:
    with pytest.raises(InputError) as err:
        planner.serve_estimate(**BASE, **kwargs)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_fp4_before_hopper_is_refused() -> None:
    with pytest.raises(InputError, match="runs no FP4 weights"):
        planner.serve_estimate(**{**BASE, "cluster": "dgx-a100", "precision": "fp4"}, tp=4)


def test_weights_that_do_not_fit_say_by_how_much() -> None:
    result = planner.serve_estimate(model="llama3.1-405b", cluster="dgx-h100", gpus=2, tp=2, isl=100, osl=100)
    assert not result.fits and result.output_tokens_per_s == 0
    assert result.shortfall_gib > 300
    assert f"{result.shortfall_gib:.2f} GiB more per GPU" in result.assumptions[0]


def test_disaggregated_estimate_lists_both_roles() -> None:
    result = planner.serve_estimate(**BASE, prefill_workers=1, prefill_tp=4, decode_workers=1, decode_tp=4)
    assert [g.role for g in result.deployment.groups] == ["prefill", "decode"]
    assert result.deployment.gpus == 8 and result.deployment.mode == "disaggregated"


def test_concurrency_beyond_the_kv_cache_waits_in_the_queue() -> None:
    most = planner.serve_estimate(**BASE, tp=4).max_concurrency
    result = planner.serve_estimate(**BASE, tp=4, concurrency=10 * most)
    assert result.concurrency == most
    assert result.assumptions[0].startswith(f"concurrency {10 * most} exceeds the {most} sequences")


def test_a_sequence_longer_than_the_kv_cache_does_not_fit() -> None:
    result = planner.serve_estimate(**{**BASE, "isl": 5_000_000}, tp=4)
    assert not result.fits and result.max_concurrency == 0 and result.output_tokens_per_s == 0
    assert "cannot hold one sequence of 5001000 tokens" in result.assumptions[0]


def test_tensorrt_llm_is_refused_on_amd_gpus() -> None:
    """TensorRT-LLM is built for CUDA only; an AMD cluster names the engines that run there."""
    with pytest.raises(InputError, match="NVIDIA GPUs only"):
        planner.serve_estimate(model="llama3.1-8b", cluster="mi325x-8", gpus=8, isl=128, osl=128, tp=1, engine="trtllm")
    est = planner.serve_estimate(model="llama3.1-8b", cluster="mi325x-8", gpus=8, isl=128, osl=128, tp=1, engine="vllm")
    assert est.output_tokens_per_s_per_gpu > 0


def test_sglang_loads_mxfp4_on_amd_only_from_cdna4() -> None:
    """SGLang's Mxfp4Config raises on ROCm unless the GPU is gfx95x: gpt-oss on MI325X runs in vLLM,
    on MI355X in either."""
    oss = dict(model="gpt-oss-120b", gpus=8, isl=1024, osl=1024, tp=8, precision="fp4", concurrency=16)
    with pytest.raises(InputError, match="CDNA4"):
        planner.serve_estimate(**oss, cluster="mi325x-8", engine="sglang")
    assert planner.serve_estimate(**oss, cluster="mi325x-8", engine="vllm").output_tokens_per_s_per_gpu > 0
    assert planner.serve_estimate(**oss, cluster="mi355x-8", engine="sglang").output_tokens_per_s_per_gpu > 0
